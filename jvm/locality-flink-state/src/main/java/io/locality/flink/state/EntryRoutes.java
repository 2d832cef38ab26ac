package io.locality.flink.state;

import io.locality.flink.FlinkRoutingKeys;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;

/**
 * The routing keys of the entries of one savepoint file of a rewritten operator: the one each entry sits
 * under, the one the old version gives its real key, the one the new version does. Most entries are of keys
 * neither version lists, under their real key itself: those are told from their bytes, no key decoded or
 * looked up ({@link SerializedKeys}). Not thread-safe.
 */
final class EntryRoutes {
    private final RewrittenOperator operator;
    private final List<StateMetaInfoSnapshot> states;
    private final int mapState;
    private final MapStateKeys keys;
    private final SerializedKeys listed;
    private Object expected;
    private Object next;
    private int nextSubtask;

    /**
     * @param range the key groups of the file of {@code header}
     */
    EntryRoutes(RewrittenOperator operator, KeyedBackendSerializationProxy<?> header, KeyGroupRange range)
            throws IOException {
        this.operator = operator;
        this.states = header.getStateMetaInfoSnapshots();
        this.mapState = mapState(header, operator.operator().stateName());
        this.keys = mapState < 0 ? null : new MapStateKeys(header, states.get(mapState), operator.before().maxParallelism());
        this.listed = keys == null ? null : listedKeys(operator, keys.realKeySerializer(), range);
    }

    /** The keys the tables of either version list in key groups {@code range}, serialized as real keys. */
    private static SerializedKeys listedKeys(RewrittenOperator operator, TypeSerializer<Object> realKeySerializer,
            KeyGroupRange range) throws IOException {
        List<Object> listed = new ArrayList<>(); // a key both versions list is in twice: its fingerprint once
        for (FlinkRoutingKeys routes : List.of(operator.before(), operator.after())) {
            routes.routes().keySet().forEach(key -> listed.add(routes.keyType().jobKey(key)));
        }
        return SerializedKeys.of(listed, realKeySerializer, operator.before().maxParallelism(), range);
    }

    /** The id of state {@code stateName} in the file of {@code header} (-1 when it has none). */
    static int mapState(KeyedBackendSerializationProxy<?> header, String stateName) {
        return header.getStateMetaInfoSnapshots().stream().map(StateMetaInfoSnapshot::getName).toList()
                .indexOf(stateName);
    }

    /**
     * Reads an entry of state {@code stateId}; whether the new version gives it another routing key.
     *
     * @throws RewriteRefused when the entry is not of the operator's {@code MapState}
     */
    boolean read(int keyGroup, int stateId, byte[] key) throws IOException {
        if (stateId != mapState) {
            throw new RewriteRefused(otherState(states.get(stateId)));
        }
        keys.read(key);
        if (keys.underItsRealKey() && !listed.mayHold(keyGroup, key, keys.realKeyStart(), key.length)) {
            // neither version lists the key: both key it on itself, which it is under
            expected = keys.routingKey();
            next = expected;
            return false;
        }
        Object realKey = keys.realKey();
        expected = operator.before().routingKey(realKey);
        next = operator.after().routingKey(realKey);
        return !next.equals(keys.routingKey());
    }

    /** The routing key the entry read sits under. */
    Object routingKey() {
        return keys.routingKey();
    }

    Object realKey() throws IOException {
        return keys.realKey();
    }

    /** The routing key the old version gives the entry's real key. */
    Object expected() {
        return expected;
    }

    /** The serialized size of the entry's real key and state (its value opens with a null flag). */
    long size(byte[] value) {
        return keys.realKeyLength() + value.length - 1L;
    }

    /**
     * The entry read (whose routing key changes) under its new routing key, in that key's key group, bound
     * for its new subtask: {@code firstTarget} + that subtask ({@link KeyedLayout#target}).
     */
    MovedEntry moved(int firstTarget, byte[] key, byte[] value) throws IOException {
        int maxParallelism = operator.after().maxParallelism();
        int keyGroup = KeyGroupRangeAssignment.assignToKeyGroup(next, maxParallelism);
        nextSubtask = KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup(maxParallelism,
                operator.after().parallelism(), keyGroup);
        return new MovedEntry(firstTarget + nextSubtask, keyGroup, keys.withRoutingKey(key, next, keyGroup), value);
    }

    /** After {@link #moved}: whether the entry changes subtask, not only routing key. */
    boolean movesSubtask() {
        return nextSubtask != operator.before().subtaskOf(keys.routingKey());
    }

    private String otherState(StateMetaInfoSnapshot state) {
        String uid = operator.operator().uid();
        if (state.getBackendStateType() == StateMetaInfoSnapshot.BackendStateType.PRIORITY_QUEUE) {
            return "operator '" + uid + "' has timers (" + state.getName() + "); a rewrite moves the real keys' "
                    + "MapState entries and cannot tell which real key a timer is for";
        }
        return "operator '" + uid + "' keeps keyed state '" + state.getName() + "' besides the MapState '"
                + operator.operator().stateName() + "'; a rewrite moves that MapState alone";
    }
}
