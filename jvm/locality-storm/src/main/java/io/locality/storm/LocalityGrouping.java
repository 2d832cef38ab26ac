package io.locality.storm;

import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import io.locality.store.ConfigStore;
import io.locality.store.LastGoodVersions;
import io.locality.store.StoreRetry;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.List;
import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.grouping.CustomStreamGrouping;
import org.apache.storm.task.WorkerTopologyContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Storm grouping that follows one operator's routing table in a locality store.
 *
 * <p>{@code builder.setBolt("hashtags", bolt, 6).customGrouping("locations", new LocalityGrouping(store,
 * "hashtag", "hashtag"))} sends a tuple whose key has a table entry to the task the table names (the
 * entry's index into the bolt's tasks sorted by id) and every other tuple exactly where
 * {@code fieldsGrouping("locations", new Fields("hashtag"))} would, computed by Storm's own code. The
 * tables put keys that travel together on tasks of one worker (Caneill, El Rheddane, Leroy, De Palma,
 * "Locality-aware routing in stateful streaming applications", Middleware 2016).
 *
 * <p>Each worker loads the store when Storm prepares the grouping: the version {@code CURRENT} names, or
 * the version pinned here, verified against its manifest (a damaged version fails the worker's start with
 * a message naming the file). Pin the version when workers may start at different times, so that every
 * worker follows the same tables. A hot key the table splits over servers goes whole to its home task (its
 * state stays correct; it is not spread), with a warning.
 *
 * <p>A grouping reads the store only when it is prepared, so a running topology never notices an outage of
 * the store. A grouping prepared while the store cannot be read (its server is down or unreachable) starts
 * on the version this worker already loaded from the store, if it did ({@link LastGoodVersions}: the pinned
 * version, which it never reads again, or the last one {@code CURRENT} named, once a read of {@code CURRENT}
 * finds the store out); otherwise it waits for the store, reading again every {@value #POLL_SECONDS} s,
 * for at most {@link #waitingForStore(Duration)}
 * (default {@value #DEFAULT_WAIT_SECONDS} s, well within the time Nimbus gives a worker to start its tasks),
 * logging why, and starts at its first read after the store's return. Past the bound the worker fails to start
 * with a message naming the store and the wait; Storm starts it again.
 */
public final class LocalityGrouping implements CustomStreamGrouping {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(LocalityGrouping.class);
    /** How often a grouping prepared during an outage reads the store again. */
    static final int POLL_SECONDS = 1;
    /** How long a grouping waits for an unavailable store by default. */
    static final int DEFAULT_WAIT_SECONDS = 60;

    private final String store;
    private final String operator;
    private final String keyField;
    private final Long version;
    private final long storeWaitMillis;
    private transient TableTaskChooser chooser;

    /**
     * Follows the current version of {@code store}.
     *
     * @param store the store as every worker reaches it: a directory (a shared mount, or a copy per host) or an
     *     {@code s3://bucket/prefix} URI, read with the AWS SDK's standard configuration of each worker
     *     ({@link ConfigStore#open(String)})
     * @param operator the operator whose table routes this bolt's input
     * @param keyField the field of the input stream that holds the operator's key
     */
    public LocalityGrouping(String store, String operator, String keyField) {
        this(store, operator, keyField, null, Duration.ofSeconds(DEFAULT_WAIT_SECONDS).toMillis());
    }

    private LocalityGrouping(String store, String operator, String keyField, Long version, long storeWaitMillis) {
        this.store = store;
        this.operator = operator;
        this.keyField = keyField;
        this.version = version;
        this.storeWaitMillis = storeWaitMillis;
    }

    /** The same grouping pinned to {@code version} of the store. */
    public LocalityGrouping atVersion(long version) {
        return new LocalityGrouping(store, operator, keyField, version, storeWaitMillis);
    }

    /**
     * The same grouping, waiting at most {@code bound} for an unavailable store when it is prepared with no
     * version of the store loaded in its worker. Keep it below {@code nimbus.task.launch.secs} (120 s by
     * default): Nimbus moves tasks that take longer to start.
     */
    public LocalityGrouping waitingForStore(Duration bound) {
        if (bound.isNegative()) {
            throw new IllegalArgumentException("a locality grouping waits >= 0 for its store; got " + bound);
        }
        return new LocalityGrouping(store, operator, keyField, version, bound.toMillis());
    }

    @Override
    public void prepare(WorkerTopologyContext context, GlobalStreamId stream, List<Integer> targetTasks) {
        RoutingConfiguration configuration;
        try {
            ConfigStore opened = ConfigStore.open(store);
            StoreRetry retry = new StoreRetry(Duration.ofSeconds(POLL_SECONDS), Duration.ofMillis(storeWaitMillis));
            LastGoodVersions.Listener log = new StoreLog(operator, storeWaitMillis);
            configuration = version == null ? LastGoodVersions.current(opened, retry, log)
                    : LastGoodVersions.pinned(opened, version, retry, log);
        } catch (IOException e) {
            throw new UncheckedIOException("the locality grouping of operator '" + operator + "' cannot load its table: "
                    + e.getMessage(), e);
        }
        RoutingTable table = configuration.table(operator);
        String name = stream.get_componentId() + ":" + stream.get_streamId();
        chooser = TableTaskChooser.of(table, name, context.getComponentOutputFields(stream), keyField, targetTasks);
        if (!table.splits().isEmpty()) {
            LOG.warn("the table of '{}' (version {}) splits {} hot keys over servers; this grouping sends each whole "
                    + "to its home task", operator, configuration.version(), table.splits().size());
        }
        LOG.info("'{}' follows version {} of {}: {} entries, {} tasks", operator, configuration.version(), store,
                table.entries().size(), targetTasks.size());
    }

    @Override
    public List<Integer> chooseTasks(int taskId, List<Object> values) {
        return chooser.chooseTasks(values);
    }
}
