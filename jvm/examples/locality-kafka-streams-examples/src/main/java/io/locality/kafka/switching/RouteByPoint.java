package io.locality.kafka.switching;

import java.util.function.BiFunction;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

/**
 * Keys each record for the next operator and names its partition by that operator's table in the version in
 * force at the record's point (its timestamp), for the {@link HeaderPartitioner} of the sink after it.
 *
 * <p>Every task that routes a record routes it alike, whenever it does (docs/switch.md): a record before a
 * switch point goes where the old version says even when it is routed after the switch. A point at or past
 * the schedule's seal waits (bounded) until the publisher extends the schedule
 * ({@code ScheduleFollower.settle}); past the bound the task fails with a {@code ScheduleExpiredException}.
 * Markers pass through unchanged (to every partition); a record without a routing key passes without a
 * partition (the producer's own partitioning).
 *
 * @param <K> the key type of the records in
 * @param <V> the value type
 * @param <R> the routing key type: the next operator's key
 */
public final class RouteByPoint<K, V, R> implements Processor<K, V, R, V> {
    private final SwitchPlans tables;
    private final BiFunction<K, V, R> routingKey;
    private ProcessorContext<R, V> context;

    /**
     * Routes by the tables of {@code tables}' operator.
     *
     * @param routingKey the next operator's key of a record (its key, or a field of its value)
     */
    public RouteByPoint(SwitchPlans tables, BiFunction<K, V, R> routingKey) {
        this.tables = tables;
        this.routingKey = routingKey;
    }

    @Override
    public void init(ProcessorContext<R, V> context) {
        this.context = context;
    }

    @Override
    public void process(Record<K, V> record) {
        if (SwitchHeaders.markerPoint(record.headers()).isPresent()) {
            context.forward(record.withKey(null));
            return;
        }
        R key = routingKey.apply(record.key(), record.value());
        if (key == null) {
            context.forward(record.withKey((R) null).withHeaders(SwitchHeaders.withoutProtocol(record.headers())));
            return;
        }
        int partition = tables.tableAt(record.timestamp()).route(key);
        context.forward(record.withKey(key).withHeaders(SwitchHeaders.toPartition(record.headers(), partition)));
    }
}
