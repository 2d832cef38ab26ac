package io.locality.flink.bench;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * The paper's stateful operator: counts the occurrences of its key (Caneill et al., Middleware 2016,
 * Section 4.1), then forwards the record. Flink's current key is the routing key, which several table keys
 * share, so each real key's count lives in a {@code MapState} under it (docs/engines/flink.md); hash
 * routing runs the same code, one real key per routing key.
 */
public final class CountPerRealKey extends KeyedProcessFunction<String, Tuple3<String, String, byte[]>,
        Tuple3<String, String, byte[]>> {
    private static final long serialVersionUID = 1L;

    private final int field;
    private transient MapState<String, Long> counts;

    /** Counts field {@code field} of the records (0: the first operator's key, 1: the second's). */
    public CountPerRealKey(int field) {
        this.field = field;
    }

    @Override
    public void open(OpenContext context) {
        counts = getRuntimeContext().getMapState(new MapStateDescriptor<>("count", Types.STRING, Types.LONG));
    }

    @Override
    public void processElement(Tuple3<String, String, byte[]> record, Context context,
            Collector<Tuple3<String, String, byte[]>> out) throws Exception {
        String key = record.getField(field);
        Long count = counts.get(key);
        counts.put(key, count == null ? 1L : count + 1);
        out.collect(record);
    }
}
