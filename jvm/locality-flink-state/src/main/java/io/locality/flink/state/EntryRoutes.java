package io.locality.flink.state;

import java.io.IOException;
import java.util.List;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;

/**
 * The routing keys of the entries of one savepoint file of a rewritten operator: the one each entry sits
 * under, the one the old version gives its real key, the one the new version does. Not thread-safe.
 */
final class EntryRoutes {
    private final RewrittenOperator operator;
    private final List<StateMetaInfoSnapshot> states;
    private final int mapState;
    private final MapStateKeys keys;
    private Object next;
    private int nextSubtask;

    EntryRoutes(RewrittenOperator operator, KeyedBackendSerializationProxy<?> header) {
        this.operator = operator;
        this.states = header.getStateMetaInfoSnapshots();
        this.mapState = mapState(header, operator.operator().stateName());
        this.keys = mapState < 0 ? null : new MapStateKeys(header, states.get(mapState), operator.before().maxParallelism());
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
    boolean read(int stateId, byte[] key) throws IOException {
        if (stateId != mapState) {
            throw new RewriteRefused(otherState(states.get(stateId)));
        }
        keys.read(key);
        next = operator.after().routingKey(keys.realKey());
        return !next.equals(keys.routingKey());
    }

    /** The routing key the entry read sits under. */
    Object routingKey() {
        return keys.routingKey();
    }

    Object realKey() {
        return keys.realKey();
    }

    /** The routing key the old version gives the entry's real key. */
    Object expected() {
        return operator.before().routingKey(keys.realKey());
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
