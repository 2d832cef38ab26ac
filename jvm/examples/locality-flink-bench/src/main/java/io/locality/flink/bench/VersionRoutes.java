package io.locality.flink.bench;

import io.locality.flink.RoutingKeySelector;
import io.locality.routing.RoutingConfiguration;
import io.locality.store.ConfigStore;
import io.locality.store.LastGoodVersions;
import io.locality.store.StoreRetry;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.time.Duration;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;



/**
 * The first keyed operator's routing key under each store version: what {@link TraceReplaySource} partitions
 * the trace by, for the version the job runs and, after a switch, for the version it ran before.
 */
@FunctionalInterface
public interface VersionRoutes extends Serializable {
    /** How often a subtask reads its version again while the store cannot be read. */
    Duration STORE_POLL = Duration.ofSeconds(1);
    /**
     * How long a subtask waits for its store at most: a subtask that opens during an outage (a deployment, a
     * restart) waits for the store rather than failing the job, and fails naming the store past this.
     */
    Duration STORE_WAIT = Duration.ofMinutes(5);

    /** The first operator's routing key under {@code version}. */
    KeySelector<Tuple3<String, String, byte[]>, String> first(long version);

    /**
     * The tables of {@code store} ({@code tables}), or the raw first key whatever the version ({@code hash}).
     * The store's URI travels with the job: each subtask that needs a version reads it from the store itself,
     * once per JVM ({@link LastGoodVersions#pinned}), waiting for the store within {@link #STORE_WAIT}.
     */
    static VersionRoutes of(String store, String mode) {
        if (mode.equals("hash")) {
            return version -> new FieldKey(0);
        }
        return version -> {
            try {
                RoutingConfiguration configuration = LastGoodVersions.pinned(ConfigStore.open(store), version,
                        new StoreRetry(STORE_POLL, STORE_WAIT), new StoreWaitLog());
                return RoutingKeySelector.of(configuration.table(configuration.topology().operators().get(0)),
                        String.class, new FieldKey(0));
            } catch (IOException e) {
                throw new UncheckedIOException("cannot load version " + version + " of the store " + store, e);
            }
        };
    }

    /** A subtask's wait for its store, in the TaskManager's log. */
    final class StoreWaitLog implements StoreRetry.Listener {
        private static final Logger LOG = LoggerFactory.getLogger(VersionRoutes.class);

        @Override
        public void storeWaiting(String what, IOException why) {
            LOG.warn("waiting for the store: {} cannot be read ({}); reading it again every {} s, for at most {} s",
                    what, why.getMessage(), STORE_POLL.toSeconds(), STORE_WAIT.toSeconds());
        }

        @Override
        public void storeResumed(String what, long millis) {
            LOG.info("read {} after waiting {} ms for the store", what, millis);
        }
    }
}
