package io.locality.flink.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.stream.IntStream;

import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

/**
 * One subtask of {@link TraceReplaySource}: the records whose first routing key Flink assigns to this
 * subtask, built once (one shared padding array: serialization copies it), emitted in trace order,
 * {@code passes} times over (or until stopped).
 *
 * <p>Its position is the ordinal of the next record, {@code pass x N + line} ({@link ReplayPosition}). Restored
 * from a position of another version, it asks every old subtask's position ({@link PositionExchange}) and
 * resumes from the smallest, skipping each record whose ordinal is below its old subtask's position (the old
 * job emitted it), until it is past all of them.
 */
final class TraceReplayReader implements SourceReader<Tuple3<String, String, byte[]>, ReplayPosition> {
    private final Path trace;
    private final VersionRoutes routes;
    private final long version;
    private final int maxParallelism;
    private final int parallelism;
    private final int subtask;
    private final int padding;
    private final long end;
    private final boolean waitAtEnd;
    private final Consumer<SourceEvent> toEnumerator;

    private Tuple3<String, String, byte[]>[] records;
    /** The lines of the trace this subtask replays, in trace order. */
    private int[] share;
    private long pass;
    private int next;
    /** A position restored from a savepoint, until the reader has started from it. */
    private ReplayPosition restored;
    /** While catching up on a switch: the old version, every old subtask's ordinal, each line's old subtask. */
    private long previousVersion = ReplayPosition.NONE;
    private long[] previousOrdinals = new long[0];
    private int[] previousOwners;
    private long catchUpUntil;
    private CompletableFuture<Void> available = CompletableFuture.completedFuture(null);

    TraceReplayReader(Path trace, VersionRoutes routes, long version, int maxParallelism, int parallelism,
            int subtask, int padding, long passes, boolean waitAtEnd, Consumer<SourceEvent> toEnumerator) {
        this.trace = trace;
        this.routes = routes;
        this.version = version;
        this.maxParallelism = maxParallelism;
        this.parallelism = parallelism;
        this.subtask = subtask;
        this.padding = padding;
        this.end = passes > 0 ? passes : Long.MAX_VALUE;
        this.waitAtEnd = waitAtEnd;
        this.toEnumerator = toEnumerator;
    }

    @Override
    public void addSplits(List<ReplayPosition> splits) {
        for (ReplayPosition split : splits) {
            if (split.subtask() != subtask || restored != null) {
                throw new IllegalStateException("subtask " + subtask + " of the replay was given " + splits
                        + ": a change of parallelism is not supported");
            }
            restored = split;
        }
    }

    @Override
    @SuppressWarnings("unchecked")
    public void start() {
        List<String> lines;
        try {
            lines = Files.readAllLines(trace, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the trace " + trace, e);
        }
        byte[] pad = new byte[padding];
        records = new Tuple3[lines.size()];
        for (int i = 0; i < records.length; i++) {
            String line = lines.get(i);
            int tab = line.indexOf('\t');
            if (tab < 0) {
                throw new IllegalArgumentException("trace " + trace + ": a line without a tab: " + line);
            }
            records[i] = Tuple3.of(line.substring(0, tab), line.substring(tab + 1), pad);
        }
        int[] owners = owners(version);
        share = IntStream.range(0, owners.length).filter(i -> owners[i] == subtask).toArray();
        if (restored == null) {
            seek(0);
        } else if (restored.version() == version) {
            catchUp(restored.previousVersion(), restored.previousOrdinals());
            seek(restored.ordinal());
            restored = null;
        } else if (restored.previousVersion() != ReplayPosition.NONE) {
            throw new IllegalStateException("the savepoint was taken while the replay still caught up on the switch "
                    + "from version " + restored.previousVersion() + " to " + restored.version()
                    + ": switch again once that is over (it takes one pass of the trace at most)");
        } else {
            available = new CompletableFuture<>();
            toEnumerator.accept(new PositionExchange.Restored(restored.version(), restored.ordinal()));
        }
    }

    /** The subtask of every line of the trace under {@code routedBy}. */
    private int[] owners(long routedBy) {
        KeySelector<Tuple3<String, String, byte[]>, String> route = routes.first(routedBy);
        int[] owners = new int[records.length];
        for (int i = 0; i < records.length; i++) {
            try {
                owners[i] = KeyGroupRangeAssignment.assignKeyToParallelOperator(route.getKey(records[i]),
                        maxParallelism, parallelism);
            } catch (Exception e) {
                throw new IllegalStateException("no routing key for " + records[i].f0, e);
            }
        }
        return owners;
    }

    private void catchUp(long oldVersion, long[] oldOrdinals) {
        previousVersion = oldVersion;
        previousOrdinals = oldOrdinals.clone();
        previousOwners = oldVersion == ReplayPosition.NONE ? null : owners(oldVersion);
        catchUpUntil = Arrays.stream(oldOrdinals).max().orElse(0);
    }

    @Override
    public void handleSourceEvents(SourceEvent event) {
        if (!(event instanceof PositionExchange.AllRestored positions) || restored == null
                || positions.version() != restored.version()) {
            throw new IllegalStateException("subtask " + subtask + " of the replay got " + event + " restored from "
                    + restored);
        }
        catchUp(positions.version(), positions.ordinals());
        seek(Arrays.stream(positions.ordinals()).min().orElse(0));
        restored = null;
        available.complete(null);
    }

    /** The first line of this subtask's share at or after {@code ordinal}. */
    private void seek(long ordinal) {
        pass = records.length == 0 ? 0 : ordinal / records.length;
        int line = records.length == 0 ? 0 : (int) (ordinal % records.length);
        int found = Arrays.binarySearch(share, line);
        next = found >= 0 ? found : -found - 1;
        if (next == share.length) {
            next = 0;
            pass++;
        }
    }

    private long ordinal() {
        // A subtask with no records has no position of its own; 0 is below everyone's.
        return share.length == 0 ? 0 : pass * records.length + share[next];
    }

    @Override
    public InputStatus pollNext(ReaderOutput<Tuple3<String, String, byte[]>> output) {
        if (!available.isDone()) {
            return InputStatus.NOTHING_AVAILABLE;
        }
        // Bounded: at most one pass of the share is skipped per call.
        for (int looked = 0; looked < share.length && pass < end; looked++) {
            int line = share[next];
            long ordinal = pass * records.length + line;
            if (++next == share.length) {
                next = 0;
                pass++;
            }
            if (previousOwners != null) {
                if (ordinal >= catchUpUntil) {
                    catchUp(ReplayPosition.NONE, new long[0]);
                } else if (ordinal < previousOrdinals[previousOwners[line]]) {
                    continue; // the old job emitted it
                }
            }
            output.collect(records[line]);
            return InputStatus.MORE_AVAILABLE;
        }
        if (share.length > 0 && pass < end) {
            return InputStatus.MORE_AVAILABLE;
        }
        if (waitAtEnd) {
            available = new CompletableFuture<>(); // never completed: idle until the job is stopped
            return InputStatus.NOTHING_AVAILABLE;
        }
        return InputStatus.END_OF_INPUT;
    }

    @Override
    public List<ReplayPosition> snapshotState(long checkpointId) {
        if (restored != null) { // not resumed yet: nothing emitted since the restored position
            return List.of(restored);
        }
        return List.of(new ReplayPosition(version, subtask, ordinal(), previousVersion, previousOrdinals));
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
        return available;
    }

    @Override
    public void notifyNoMoreSplits() {
    }

    @Override
    public void close() {
    }
}
