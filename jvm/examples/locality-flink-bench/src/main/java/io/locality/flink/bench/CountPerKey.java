package io.locality.flink.bench;

import io.locality.flink.RealKeyedProcessFunction;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.util.Collector;

/**
 * The paper's stateful operator: counts the occurrences of its key, then forwards the record (Caneill et
 * al., Middleware 2016, Section 4.1). Each real key's count lives under its routing key
 * ({@link RealKeyedProcessFunction}): hash routing runs the same code, one real key per routing key.
 */
public final class CountPerKey
        extends RealKeyedProcessFunction<String, Tuple3<String, String, byte[]>, Long, Tuple3<String, String, byte[]>> {
    private static final long serialVersionUID = 1L;

    /** Counts field {@code field} of the records (0: the first operator's key, 1: the second's). */
    public CountPerKey(int field) {
        super("count", new FieldKey(field), Types.STRING, Types.LONG);
    }

    @Override
    protected Long process(String key, Long count, Tuple3<String, String, byte[]> record, Context context,
            Collector<Tuple3<String, String, byte[]>> out) {
        out.collect(record);
        return count == null ? 1L : count + 1;
    }
}
