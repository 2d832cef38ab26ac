package io.locality.flink.state;

import io.locality.flink.FlinkRoutingKeys;
import java.io.IOException;
import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.core.memory.DataOutputSerializer;

/**
 * Gives each real key's state the routing key the new version gives the key, after checking that it sat
 * under the routing key the old version gives it; counts what moves ({@link RewriteSummary}).
 *
 * <p>Every real key is re-keyed by the new tables, not only the moved ones: a key that stays on its
 * subtask may still change routing key (its entry dropped because the new fallback puts it there anyway),
 * and a key whose routing key does not change is written back unchanged. A key whose state sits under
 * another routing key than the old version's fails the rewrite: the savepoint was not taken by a job on
 * that version, and re-keying by it would put state where no record will look. The failure is thrown when
 * the input has ended ({@link #close()}), naming the first such key and how many there were: thrown from
 * {@code map}, it raced the savepoint source's coordinator, whose next event to the failed task could
 * become the job's reported cause instead ("An OperatorEvent ... was lost").
 */
final class Rekey<K, S> extends RichMapFunction<Tuple3<K, K, S>, Tuple3<K, K, S>> {
    private static final long serialVersionUID = 1L;

    private final String operator;
    private final long fromVersion;
    private final FlinkRoutingKeys before;
    private final FlinkRoutingKeys after;
    private final TypeInformation<K> keyType;
    private final TypeInformation<S> valueType;
    private transient TypeSerializer<K> keySerializer;
    private transient TypeSerializer<S> valueSerializer;
    private transient DataOutputSerializer buffer;
    private transient LongCounter entries;
    private transient LongCounter bytes;
    private transient LongCounter moved;
    private transient LongCounter movedBytes;
    private transient LongCounter rekeyed;
    private transient String refusal;
    private transient long refused;

    Rekey(String operator, long fromVersion, FlinkRoutingKeys before, FlinkRoutingKeys after,
            TypeInformation<K> keyType, TypeInformation<S> valueType) {
        this.operator = operator;
        this.fromVersion = fromVersion;
        this.before = before;
        this.after = after;
        this.keyType = keyType;
        this.valueType = valueType;
    }

    @Override
    public void open(OpenContext openContext) {
        keySerializer = getRuntimeContext().createSerializer(keyType);
        valueSerializer = getRuntimeContext().createSerializer(valueType);
        buffer = new DataOutputSerializer(64);
        entries = counter(RewriteSummary.ENTRIES);
        bytes = counter(RewriteSummary.BYTES);
        moved = counter(RewriteSummary.MOVED);
        movedBytes = counter(RewriteSummary.MOVED_BYTES);
        rekeyed = counter(RewriteSummary.REKEYED);
    }

    private LongCounter counter(String field) {
        LongCounter counter = new LongCounter();
        getRuntimeContext().addAccumulator(RewriteSummary.accumulator(operator, field), counter);
        return counter;
    }

    @Override
    @SuppressWarnings("unchecked")
    public Tuple3<K, K, S> map(Tuple3<K, K, S> entry) throws IOException {
        K routingKey = entry.f0;
        K realKey = entry.f1;
        Object expected = before.routingKey(realKey);
        if (!expected.equals(routingKey)) {
            if (refused++ == 0) {
                refusal = "the state of key " + RealKeyStateReader.printable(realKey) + " of '" + operator
                        + "' is under routing key " + RealKeyStateReader.printable(routingKey) + ", but version "
                        + fromVersion + " keys it on " + RealKeyStateReader.printable(expected);
            }
            return entry; // the rewrite fails at close(); what it wrote is removed
        }
        K next = (K) after.routingKey(realKey);
        long size = size(realKey, entry.f2);
        entries.add(1L);
        bytes.add(size);
        if (before.subtaskOf(routingKey) != after.subtaskOf(next)) {
            moved.add(1L);
            movedBytes.add(size);
        } else if (!next.equals(routingKey)) {
            rekeyed.add(1L);
        }
        return Tuple3.of(next, realKey, entry.f2);
    }

    @Override
    public void close() throws Exception {
        super.close();
        if (refused > 0) {
            String more = refused > 1 ? " (and " + (refused - 1) + " more keys of this subtask)" : "";
            throw new IllegalStateException(refusal + more + ": the savepoint was not taken by a job on version "
                    + fromVersion);
        }
    }

    /** Bytes of one MapState entry as Flink serializes it: the real key and its state. */
    private long size(K realKey, S state) throws IOException {
        buffer.clear();
        keySerializer.serialize(realKey, buffer);
        valueSerializer.serialize(state, buffer);
        return buffer.length();
    }
}
