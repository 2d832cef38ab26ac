package io.locality.flink.bench;

import java.nio.file.Path;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
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
 * paper's tuple size, 0 to 20 kB). {@code passes} replays of the trace, then the subtask finishes, or, with
 * {@code waitAtEnd}, stays idle so that the job's final state can still be saved; 0 replays until the job is
 * stopped.
 *
 * <p>A savepoint resumes it exactly ({@link ReplayPosition}), also on another store version: the restarted
 * job replays, with the new version's partition, every record the old job had not emitted and no other
 * ({@link PositionExchange}), so a switch of versions ({@code locality switch flink}) loses no record and
 * counts none twice.
 */
public final class TraceReplaySource implements Source<Tuple3<String, String, byte[]>, ReplayPosition, Void>,
        ResultTypeQueryable<Tuple3<String, String, byte[]>> {
    private static final long serialVersionUID = 2L;

    /** The record type: first key, second key, padding. */
    public static final TypeInformation<Tuple3<String, String, byte[]>> RECORD =
            Types.TUPLE(Types.STRING, Types.STRING, Types.PRIMITIVE_ARRAY(Types.BYTE));

    private final String trace;
    private final VersionRoutes routes;
    private final long version;
    private final int maxParallelism;
    private final int parallelism;
    private final int padding;
    private final long passes;
    private final boolean waitAtEnd;

    /**
     * @param trace UTF-8 text, one record a line: first key, a tab, second key
     * @param routes the first keyed operator's routing key by version (Flink assigns it to a subtask)
     * @param version the version the job runs
     */
    public TraceReplaySource(Path trace, VersionRoutes routes, long version, int maxParallelism, int parallelism,
            int padding, long passes, boolean waitAtEnd) {
        this.trace = trace.toString();
        this.routes = routes;
        this.version = version;
        this.maxParallelism = maxParallelism;
        this.parallelism = parallelism;
        this.padding = padding;
        this.passes = passes;
        this.waitAtEnd = waitAtEnd;
    }

    @Override
    public Boundedness getBoundedness() {
        return passes > 0 && !waitAtEnd ? Boundedness.BOUNDED : Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SourceReader<Tuple3<String, String, byte[]>, ReplayPosition> createReader(SourceReaderContext context) {
        return new TraceReplayReader(Path.of(trace), routes, version, maxParallelism, parallelism,
                context.getIndexOfSubtask(), padding, passes, waitAtEnd, context::sendSourceEventToCoordinator);
    }

    @Override
    public SplitEnumerator<ReplayPosition, Void> createEnumerator(SplitEnumeratorContext<ReplayPosition> context) {
        return new PositionExchange(context);
    }

    @Override
    public SplitEnumerator<ReplayPosition, Void> restoreEnumerator(SplitEnumeratorContext<ReplayPosition> context,
            Void state) {
        return new PositionExchange(context);
    }

    @Override
    public SimpleVersionedSerializer<ReplayPosition> getSplitSerializer() {
        return new ReplayPosition.Serializer();
    }

    @Override
    public SimpleVersionedSerializer<Void> getEnumeratorCheckpointSerializer() {
        return new NoEnumeratorState();
    }

    @Override
    public TypeInformation<Tuple3<String, String, byte[]>> getProducedType() {
        return RECORD;
    }

    /** The enumerator keeps nothing in a checkpoint: the positions are the readers'. */
    static final class NoEnumeratorState implements SimpleVersionedSerializer<Void> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Void nothing) {
            return new byte[0];
        }

        @Override
        public Void deserialize(int version, byte[] serialized) {
            return null;
        }
    }
}
