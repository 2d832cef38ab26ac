package io.locality.storm;

import io.locality.routing.LocalityStore;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
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
 */
public final class LocalityGrouping implements CustomStreamGrouping {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(LocalityGrouping.class);

    private final String store;
    private final String operator;
    private final String keyField;
    private final Integer version;
    private transient TableTaskChooser chooser;

    /**
     * Follows the current version of {@code store}.
     *
     * @param store the store's root directory, as every worker sees it (a shared mount, or a copy per host)
     * @param operator the operator whose table routes this bolt's input
     * @param keyField the field of the input stream that holds the operator's key
     */
    public LocalityGrouping(String store, String operator, String keyField) {
        this(store, operator, keyField, null);
    }

    private LocalityGrouping(String store, String operator, String keyField, Integer version) {
        this.store = store;
        this.operator = operator;
        this.keyField = keyField;
        this.version = version;
    }

    /** The same grouping pinned to {@code version} of the store. */
    public LocalityGrouping atVersion(int version) {
        return new LocalityGrouping(store, operator, keyField, version);
    }

    @Override
    public void prepare(WorkerTopologyContext context, GlobalStreamId stream, List<Integer> targetTasks) {
        RoutingConfiguration configuration;
        try {
            LocalityStore opened = new LocalityStore(Path.of(store));
            configuration = version == null ? opened.load() : opened.load(version);
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
