package io.locality.flink;

import io.locality.routing.RoutingTable;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Flink {@link KeySelector} that keys a record on its routing key: a table key's surrogate, so the
 * record reaches the subtask the table names, and every other key itself, so Flink's own assignment
 * places it (where the table's {@code flink} fallback predicts).
 *
 * <p>{@code stream.keyBy(RoutingKeySelector.of(table, String.class, r -> r.hashtag))}. Several real keys
 * share a surrogate, so the keyed operator keeps each real key's state inside the routing key's state:
 * {@link RealKeyedProcessFunction}. The routing key has the real key's Java type ({@code String},
 * {@code Long} or {@code Integer}), declared through {@link ResultTypeQueryable}. The job must run with
 * the tables' max parallelism and the operator with their parallelism ({@link #routes()} gives both).
 * The routes are copied into the job graph when it is built: a new table version takes a restart.
 *
 * @param <T> the record type
 * @param <K> the key type: {@code String}, {@code Long} or {@code Integer}
 */
public final class RoutingKeySelector<T, K> implements KeySelector<T, K>, ResultTypeQueryable<K> {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(RoutingKeySelector.class);

    private final FlinkRoutingKeys routes;
    private final Class<K> keyClass;
    private final KeySelector<T, K> realKey;
    private final KeySelector<T, Integer> server;

    private RoutingKeySelector(FlinkRoutingKeys routes, Class<K> keyClass, KeySelector<T, K> realKey,
            KeySelector<T, Integer> server) {
        this.routes = routes;
        this.keyClass = keyClass;
        this.realKey = realKey;
        this.server = server;
    }

    /**
     * Keys records on the routes of {@code table}; a split key goes whole to its home subtask.
     *
     * @param keyClass {@code String.class}, {@code Long.class} or {@code Integer.class}: the type of the real keys
     * @param realKey the real key of a record
     * @throws IllegalArgumentException as {@link FlinkRoutingKeys#of(RoutingTable, KeyType)}
     */
    public static <T, K> RoutingKeySelector<T, K> of(RoutingTable table, Class<K> keyClass, KeySelector<T, K> realKey) {
        if (!table.splits().isEmpty()) {
            LOG.warn("the table of '{}' splits {} hot keys but the key selector was given no server: their records "
                    + "go whole to their home subtask", table.operator(), table.splits().size());
        }
        return new RoutingKeySelector<>(FlinkRoutingKeys.of(table, KeyType.of(keyClass)), keyClass, realKey, null);
    }

    /**
     * Keys records on the routes of {@code table}, a split key to its part on the server position
     * {@code server} gives for the record (the server of the upstream instance, which the record carries:
     * one selector serves every upstream subtask).
     */
    public static <T, K> RoutingKeySelector<T, K> of(RoutingTable table, Class<K> keyClass, KeySelector<T, K> realKey,
            KeySelector<T, Integer> server) {
        return new RoutingKeySelector<>(FlinkRoutingKeys.of(table, KeyType.of(keyClass)), keyClass, realKey, server);
    }

    /** The routes, with the max parallelism and parallelism the job must run with. */
    public FlinkRoutingKeys routes() {
        return routes;
    }

    @Override
    public K getKey(T record) throws Exception {
        K key = realKey.getKey(record);
        return keyClass.cast(server == null ? routes.routingKey(key) : routes.routingKey(key, server.getKey(record)));
    }

    @Override
    public TypeInformation<K> getProducedType() {
        return TypeInformation.of(keyClass);
    }
}
