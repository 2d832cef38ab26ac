package io.locality.flink.state;

import java.io.IOException;
import java.util.Set;
import java.util.TreeSet;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.runtime.SavepointLoader;

/**
 * The operators of a savepoint, found by their uid, and what a rewrite checks about one: its parallelism,
 * max parallelism and the names of its keyed states.
 */
final class SavepointOperators {
    /** Keyed states of every keyed operator's timer service (heap backend), which hold no user state. */
    private static final String TIMER_STATES = "_timer_state/";

    private final String path;
    private final CheckpointMetadata metadata;

    private SavepointOperators(String path, CheckpointMetadata metadata) {
        this.path = path;
        this.metadata = metadata;
    }

    /**
     * @throws IllegalArgumentException when {@code path} is not a savepoint (the message says why)
     */
    static SavepointOperators load(String path) {
        try {
            return new SavepointOperators(path, SavepointLoader.loadSavepointMetadata(path));
        } catch (IOException e) {
            throw new IllegalArgumentException("--savepoint " + path + " is not a readable savepoint: " + e.getMessage());
        }
    }

    CheckpointMetadata metadata() {
        return metadata;
    }

    long checkpointId() {
        return metadata.getCheckpointId();
    }

    /**
     * The state of the operator with uid {@code uid}.
     *
     * @throws IllegalArgumentException when the savepoint has none
     */
    OperatorState operator(String uid) {
        var id = OperatorIdentifier.forUid(uid).getOperatorId();
        return metadata.getOperatorStates().stream().filter(state -> state.getOperatorID().equals(id)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("the savepoint " + path + " has no operator with uid '"
                        + uid + "' (it holds " + metadata.getOperatorStates().size() + " operators; set the uid with "
                        + ".uid(...) on the keyed operator)"));
    }

    /**
     * The file subtask {@code subtask} of operator {@code uid} restores its keyed state from, or null.
     *
     * @throws RewriteRefused when the state is in a backend's native format
     */
    KeyGroupsStateHandle keyedFile(String uid, int subtask) {
        OperatorSubtaskState state = operator(uid).getState(subtask);
        if (state == null || state.getManagedKeyedState().isEmpty()) {
            return null;
        }
        KeyedStateHandle handle = state.getManagedKeyedState().iterator().next(); // a savepoint holds one
        if (!(handle instanceof KeyGroupsStateHandle file)) {
            throw new RewriteRefused("operator '" + uid + "' keeps its keyed state in " + path + " as "
                    + handle.getClass().getSimpleName() + ": take the savepoint in Flink's canonical format");
        }
        return file;
    }

    /** Whether the operator holds any keyed state (none when no record reached it). */
    static boolean hasKeyedState(OperatorState state) {
        return state.getStates().stream().map(OperatorSubtaskState::getManagedKeyedState)
                .anyMatch(handles -> !handles.isEmpty());
    }

    /**
     * Checks that the keyed state of operator {@code uid} is the MapState {@code stateName} (besides its
     * timer service's queues): a rewrite writes that state alone and would lose any other.
     *
     * @throws IllegalArgumentException naming the states found
     */
    void checkOnlyState(String uid, String stateName) {
        Set<String> names;
        try {
            names = new TreeSet<>(SavepointLoader.loadOperatorStateMetadata(path, OperatorIdentifier.forUid(uid))
                    .keySet());
        } catch (IOException | IllegalArgumentException e) {
            throw new IllegalArgumentException("cannot read the keyed state of '" + uid + "' in " + path + " ("
                    + e.getMessage() + "): take the savepoint in the canonical format");
        }
        if (!names.contains(stateName)) {
            throw new IllegalArgumentException("operator '" + uid + "' has no keyed state '" + stateName + "' in "
                    + path + "; its keyed states: " + names);
        }
        names.removeIf(name -> name.equals(stateName) || name.startsWith(TIMER_STATES));
        if (!names.isEmpty()) {
            throw new IllegalArgumentException("operator '" + uid + "' keeps keyed state " + names + " besides the "
                    + "MapState '" + stateName + "'; a rewrite writes that MapState alone and would lose it");
        }
    }
}
