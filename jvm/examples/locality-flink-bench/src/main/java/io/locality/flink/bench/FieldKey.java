package io.locality.flink.bench;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;

/** The real key of a replayed record: field 0 for the first keyed operator, field 1 for the second. */
public final class FieldKey implements KeySelector<Tuple3<String, String, byte[]>, String> {
    private static final long serialVersionUID = 1L;

    private final int field;

    public FieldKey(int field) {
        this.field = field;
    }

    @Override
    public String getKey(Tuple3<String, String, byte[]> record) {
        return record.getField(field);
    }
}
