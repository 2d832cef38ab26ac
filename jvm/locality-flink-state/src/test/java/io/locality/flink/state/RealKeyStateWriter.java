package io.locality.flink.state;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.state.api.functions.KeyedStateBootstrapFunction;

/**
 * Writes {@code (routing key, real key, state)} entries into a new savepoint's {@code MapState<realKey, S>}
 * of one operator: the input is keyed by the routing key, so each real key's state joins the map of the
 * routing key it is given.
 */
final class RealKeyStateWriter<K, S> extends KeyedStateBootstrapFunction<K, Tuple3<K, K, S>> {
    private static final long serialVersionUID = 1L;

    private final MapStateDescriptor<K, S> descriptor;
    private transient MapState<K, S> perRealKey;

    RealKeyStateWriter(String stateName, TypeInformation<K> keyType, TypeInformation<S> valueType) {
        this.descriptor = new MapStateDescriptor<>(stateName, keyType, valueType);
    }

    @Override
    public void open(OpenContext openContext) {
        perRealKey = getRuntimeContext().getMapState(descriptor);
    }

    @Override
    public void processElement(Tuple3<K, K, S> entry, Context ctx) throws Exception {
        perRealKey.put(entry.f1, entry.f2);
    }
}
