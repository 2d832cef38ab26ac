package io.locality.flink.state;

import java.util.Map;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.state.api.functions.KeyedStateReaderFunction;
import org.apache.flink.util.Collector;

/**
 * Reads a savepoint's {@code MapState<realKey, S>} of one operator: one {@code (routing key, real key,
 * state)} per real key.
 *
 * <p>Refuses a routing key with timers: a timer belongs to a routing key, and which of its real keys it
 * is for lives in the job's own state, so a rewrite that moves real keys cannot say where it goes.
 */
final class RealKeyStateReader<K, S> extends KeyedStateReaderFunction<K, Tuple3<K, K, S>> {
    private static final long serialVersionUID = 1L;

    private final String uid;
    private final MapStateDescriptor<K, S> descriptor;
    private transient MapState<K, S> perRealKey;

    RealKeyStateReader(String uid, String stateName, TypeInformation<K> keyType, TypeInformation<S> valueType) {
        this.uid = uid;
        this.descriptor = new MapStateDescriptor<>(stateName, keyType, valueType);
    }

    @Override
    public void open(OpenContext openContext) {
        perRealKey = getRuntimeContext().getMapState(descriptor);
    }

    @Override
    public void readKey(K routingKey, Context ctx, Collector<Tuple3<K, K, S>> out) throws Exception {
        if (!ctx.registeredEventTimeTimers().isEmpty() || !ctx.registeredProcessingTimeTimers().isEmpty()) {
            throw new IllegalStateException("operator '" + uid + "' has timers under routing key " + printable(routingKey)
                    + "; a rewrite moves the real keys' MapState entries and cannot tell which real key a timer is for");
        }
        for (Map.Entry<K, S> entry : perRealKey.entries()) {
            out.collect(Tuple3.of(routingKey, entry.getKey(), entry.getValue()));
        }
    }

    /** A key as messages show it (a String surrogate starts with U+0000). */
    static String printable(Object key) {
        return key instanceof String text ? "'" + text.replace("\u0000", "\\u0000") + "'" : String.valueOf(key);
    }
}
