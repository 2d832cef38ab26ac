package io.locality.flink.bench;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A trace replayed at full speed, each source subtask replaying the records its first keyed operator's
 * subtask owns: the trace arrives partitioned by the first operator's routing, as a Kafka topic keyed by
 * it would, so the source feeds that operator in the same slot (no hop) and the one hop between servers
 * is the one the tables decide, between the two keyed operators.
 *
 * <p>A record is {@code (first key, second key, padding)}, the padding {@code padding} bytes (the core
 * paper's tuple size, 0 to 20 kB). {@code passes} replays of the subtask's share, then the subtask
 * finishes; 0 replays until the job is cancelled. No splits: a reader knows its subtask.
 */
public final class TraceReplaySource implements Source<Tuple3<String, String, byte[]>, TraceReplaySource.NoSplit,
        Void>, ResultTypeQueryable<Tuple3<String, String, byte[]>> {
    private static final long serialVersionUID = 1L;

    /** The record type: first key, second key, padding. */
    public static final TypeInformation<Tuple3<String, String, byte[]>> RECORD =
            Types.TUPLE(Types.STRING, Types.STRING, Types.PRIMITIVE_ARRAY(Types.BYTE));

    private final String trace;
    private final KeySelector<Tuple3<String, String, byte[]>, String> firstRoute;
    private final int maxParallelism;
    private final int parallelism;
    private final int padding;
    private final long passes;

    /**
     * @param trace UTF-8 text, one record a line: first key, a tab, second key
     * @param firstRoute the first keyed operator's routing key (Flink assigns it to a subtask)
     */
    public TraceReplaySource(Path trace, KeySelector<Tuple3<String, String, byte[]>, String> firstRoute,
            int maxParallelism, int parallelism, int padding, long passes) {
        this.trace = trace.toString();
        this.firstRoute = firstRoute;
        this.maxParallelism = maxParallelism;
        this.parallelism = parallelism;
        this.padding = padding;
        this.passes = passes;
    }

    @Override
    public Boundedness getBoundedness() {
        return passes > 0 ? Boundedness.BOUNDED : Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SourceReader<Tuple3<String, String, byte[]>, NoSplit> createReader(SourceReaderContext context) {
        return new TraceReplayReader(Path.of(trace), firstRoute, maxParallelism, parallelism,
                context.getIndexOfSubtask(), padding, passes);
    }

    @Override
    public SplitEnumerator<NoSplit, Void> createEnumerator(SplitEnumeratorContext<NoSplit> context) {
        return new NoSplits();
    }

    @Override
    public SplitEnumerator<NoSplit, Void> restoreEnumerator(SplitEnumeratorContext<NoSplit> context, Void state) {
        return new NoSplits();
    }

    @Override
    public SimpleVersionedSerializer<NoSplit> getSplitSerializer() {
        return new Nothing<>(new NoSplit());
    }

    @Override
    public SimpleVersionedSerializer<Void> getEnumeratorCheckpointSerializer() {
        return new Nothing<>(null);
    }

    @Override
    public TypeInformation<Tuple3<String, String, byte[]>> getProducedType() {
        return RECORD;
    }

    /** The source has no splits; Flink's source API still names a split type. */
    public static final class NoSplit implements SourceSplit {
        @Override
        public String splitId() {
            return "none";
        }
    }

    /** An enumerator with nothing to hand out. */
    static final class NoSplits implements SplitEnumerator<NoSplit, Void> {
        @Override
        public void start() {
        }

        @Override
        public void handleSplitRequest(int subtask, String host) {
        }

        @Override
        public void addSplitsBack(List<NoSplit> splits, int subtask) {
        }

        @Override
        public void addReader(int subtask) {
        }

        @Override
        public Void snapshotState(long checkpointId) {
            return null;
        }

        @Override
        public void close() throws IOException {
        }
    }

    /** Serializes nothing: splits and enumerator state carry no information. */
    static final class Nothing<T> implements SimpleVersionedSerializer<T> {
        private final T value;

        Nothing(T value) {
            this.value = value;
        }

        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(T object) {
            return new byte[0];
        }

        @Override
        public T deserialize(int version, byte[] serialized) {
            return value;
        }
    }
}
