package io.locality.flink.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

/**
 * One subtask of {@link TraceReplaySource}: the records whose first routing key Flink assigns to this
 * subtask, built once (one shared padding array: serialization copies it), emitted in trace order,
 * {@code passes} times over (or until cancelled).
 */
final class TraceReplayReader implements SourceReader<Tuple3<String, String, byte[]>, TraceReplaySource.NoSplit> {
    private final Path trace;
    private final KeySelector<Tuple3<String, String, byte[]>, String> firstRoute;
    private final int maxParallelism;
    private final int parallelism;
    private final int subtask;
    private final int padding;
    private final long passes;
    private List<Tuple3<String, String, byte[]>> share;
    private int next;
    private long pass;

    TraceReplayReader(Path trace, KeySelector<Tuple3<String, String, byte[]>, String> firstRoute,
            int maxParallelism, int parallelism, int subtask, int padding, long passes) {
        this.trace = trace;
        this.firstRoute = firstRoute;
        this.maxParallelism = maxParallelism;
        this.parallelism = parallelism;
        this.subtask = subtask;
        this.padding = padding;
        this.passes = passes;
    }

    @Override
    public void start() {
        byte[] pad = new byte[padding];
        share = new ArrayList<>();
        List<String> lines;
        try {
            lines = Files.readAllLines(trace, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the trace " + trace, e);
        }
        for (String line : lines) {
            int tab = line.indexOf('\t');
            if (tab < 0) {
                throw new IllegalArgumentException("trace " + trace + ": a line without a tab: " + line);
            }
            Tuple3<String, String, byte[]> record = Tuple3.of(line.substring(0, tab), line.substring(tab + 1), pad);
            if (KeyGroupRangeAssignment.assignKeyToParallelOperator(routingKey(record), maxParallelism, parallelism)
                    == subtask) {
                share.add(record);
            }
        }
    }

    private String routingKey(Tuple3<String, String, byte[]> record) {
        try {
            return firstRoute.getKey(record);
        } catch (Exception e) {
            throw new IllegalStateException("no routing key for " + record.f0, e);
        }
    }

    @Override
    public InputStatus pollNext(ReaderOutput<Tuple3<String, String, byte[]>> output) {
        if (share.isEmpty() || (passes > 0 && pass >= passes)) {
            return InputStatus.END_OF_INPUT;
        }
        output.collect(share.get(next));
        if (++next == share.size()) {
            next = 0;
            pass++;
        }
        return InputStatus.MORE_AVAILABLE;
    }

    @Override
    public List<TraceReplaySource.NoSplit> snapshotState(long checkpointId) {
        return List.of();
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
        return CompletableFuture.completedFuture(null);
    }

    @Override
    public void addSplits(List<TraceReplaySource.NoSplit> splits) {
    }

    @Override
    public void notifyNoMoreSplits() {
    }

    @Override
    public void close() {
    }
}
