package io.locality.storm;

import io.locality.routing.RoutingConfiguration;
import io.locality.store.LastGoodVersions;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a {@link LocalityGrouping} does when its store cannot be read as it is prepared, in the worker's log:
 * the version it starts on instead, or that it waits for the store, and for how long it did.
 */
final class StoreLog implements LastGoodVersions.Listener {
    private static final Logger LOG = LoggerFactory.getLogger(LocalityGrouping.class);

    private final String operator;
    private final long waitMillis;

    /** The log of the grouping of {@code operator}, which waits at most {@code waitMillis} for its store. */
    StoreLog(String operator, long waitMillis) {
        this.operator = operator;
        this.waitMillis = waitMillis;
    }

    @Override
    public void keptVersion(RoutingConfiguration kept, IOException why) {
        LOG.warn("'{}' starts on version {}, the last this worker loaded, because the store cannot be read now: {}",
                operator, kept.version(), why.getMessage());
    }

    @Override
    public void storeWaiting(String what, IOException why) {
        LOG.warn("'{}' waits for the store: {} cannot be read ({}); reading it again every {} s, for at most {} ms",
                operator, what, why.getMessage(), LocalityGrouping.POLL_SECONDS, waitMillis);
    }

    @Override
    public void storeResumed(String what, long millis) {
        LOG.info("'{}' read {} after waiting {} ms for the store", operator, what, millis);
    }
}
