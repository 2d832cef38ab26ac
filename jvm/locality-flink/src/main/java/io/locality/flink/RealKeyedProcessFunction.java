package io.locality.flink;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * A keyed operator behind a {@link RoutingKeySelector}: the state of each <em>real</em> key, kept in a
 * {@code MapState<realKey, S>} under the routing key.
 *
 * <p>Several table keys share one surrogate, so Flink's current key ({@code ctx.getCurrentKey()}) is the
 * routing key, not the record's key; state kept directly under it would mix them. Extend this class and
 * write {@link #process}: it receives the record's real key and that key's state (null the first time),
 * and returns the new state (null removes it). Keys without a table entry are their own routing key, so
 * their map holds one entry. Timers fire per routing key: keep the real keys a timer is for in state.
 *
 * @param <K> the key type (of the real and the routing keys)
 * @param <I> the input record type
 * @param <S> the state of one real key
 * @param <O> the output type
 */
public abstract class RealKeyedProcessFunction<K, I, S, O> extends KeyedProcessFunction<K, I, O> {
    private static final long serialVersionUID = 1L;

    private final String stateName;
    private final KeySelector<I, K> realKey;
    private final TypeInformation<K> keyType;
    private final TypeInformation<S> stateType;
    private transient MapState<K, S> perRealKey;

    /**
     * @param stateName the name of the {@code MapState} (its identity in checkpoints and savepoints)
     * @param realKey the real key of a record, as the {@link RoutingKeySelector} reads it
     */
    protected RealKeyedProcessFunction(String stateName, KeySelector<I, K> realKey, TypeInformation<K> keyType,
            TypeInformation<S> stateType) {
        this.stateName = stateName;
        this.realKey = realKey;
        this.keyType = keyType;
        this.stateType = stateType;
    }

    @Override
    public void open(OpenContext openContext) throws Exception {
        perRealKey = getRuntimeContext().getMapState(new MapStateDescriptor<>(stateName, keyType, stateType));
    }

    @Override
    public final void processElement(I record, Context ctx, Collector<O> out) throws Exception {
        K key = realKey.getKey(record);
        S state = process(key, perRealKey.get(key), record, ctx, out);
        if (state == null) {
            perRealKey.remove(key);
        } else {
            perRealKey.put(key, state);
        }
    }

    /**
     * Handles one record of real key {@code key}.
     *
     * @param state the key's state, or null if it has none
     * @return the key's new state; null removes it
     */
    protected abstract S process(K key, S state, I record, Context ctx, Collector<O> out) throws Exception;

    /** The state of every real key under the current routing key (for timers and inspection). */
    protected MapState<K, S> perRealKey() {
        return perRealKey;
    }
}
