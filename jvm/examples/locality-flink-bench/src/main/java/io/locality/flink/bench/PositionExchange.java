package io.locality.flink.bench;

import java.util.List;
import java.util.TreeMap;

import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;

/**
 * The enumerator of {@link TraceReplaySource}: it hands out no splits (each reader knows its subtask) and,
 * when the job restarts on another store version, tells every reader where every old subtask stopped.
 *
 * <p>Why: each subtask replays the records its version routes to it, so after a switch a record's new subtask
 * is in general not the one that replayed it before, and only its old subtask's position says whether it was
 * emitted before the savepoint. Each reader restored from a position of another version sends it here
 * ({@link Restored}); once all have, every reader gets all of them ({@link AllRestored}) and resumes.
 */
final class PositionExchange implements SplitEnumerator<ReplayPosition, Void> {
    private final SplitEnumeratorContext<ReplayPosition> context;
    private final TreeMap<Integer, Restored> restored = new TreeMap<>();
    private AllRestored gathered;

    PositionExchange(SplitEnumeratorContext<ReplayPosition> context) {
        this.context = context;
    }

    @Override
    public void handleSourceEvent(int subtask, SourceEvent event) {
        if (!(event instanceof Restored position)) {
            throw new IllegalArgumentException("unexpected source event " + event);
        }
        if (gathered != null) { // a reader restarted after the exchange: it gets the same answer
            context.sendEventToSourceReader(subtask, gathered);
            return;
        }
        restored.put(subtask, position);
        int parallelism = context.currentParallelism();
        if (restored.size() < parallelism) {
            return;
        }
        long version = restored.firstEntry().getValue().version();
        long[] ordinals = new long[parallelism];
        for (int i = 0; i < parallelism; i++) {
            Restored one = restored.get(i);
            if (one == null || one.version() != version) {
                throw new IllegalStateException("the savepoint's replay positions are of different versions or "
                        + "subtasks: " + restored);
            }
            ordinals[i] = one.ordinal();
        }
        gathered = new AllRestored(version, ordinals);
        for (int i = 0; i < parallelism; i++) {
            context.sendEventToSourceReader(i, gathered);
        }
    }

    @Override
    public void start() {
    }

    @Override
    public void handleSplitRequest(int subtask, String host) {
    }

    @Override
    public void addSplitsBack(List<ReplayPosition> splits, int subtask) {
    }

    @Override
    public void addReader(int subtask) {
    }

    @Override
    public Void snapshotState(long checkpointId) {
        return null;
    }

    @Override
    public void close() {
    }

    /** A reader's restored position, taken under {@code version}. */
    record Restored(long version, long ordinal) implements SourceEvent {
    }

    /** Every old subtask's position under {@code version}, by subtask. */
    record AllRestored(long version, long[] ordinals) implements SourceEvent {
    }
}
