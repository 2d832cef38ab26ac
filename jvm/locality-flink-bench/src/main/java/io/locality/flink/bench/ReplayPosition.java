package io.locality.flink.bench;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.Arrays;

import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * Where one subtask of {@link TraceReplaySource} is in the endless replay: the store version whose routing
 * chose its records, and the <em>ordinal</em> of the next record it would consider, {@code pass x N + line}
 * for a trace of {@code N} lines. Every subtask counts the same ordinals, so positions taken under one
 * version can be compared with records routed by another.
 *
 * <p>After a switch of versions, the subtasks still replaying the records the old version left behind carry
 * that version and every old subtask's ordinal ({@code previousVersion}, {@code previousOrdinals}): a record
 * whose ordinal is below its old subtask's was emitted by the old job. Empty once every subtask is past
 * them. This is the split a savepoint stores for the subtask (the source has one split per subtask).
 */
public final class ReplayPosition implements SourceSplit {
    /** No previous version: the subtask is not catching up on a switch. */
    public static final int NONE = -1;

    private final int version;
    private final int subtask;
    private final long ordinal;
    private final int previousVersion;
    private final long[] previousOrdinals;

    public ReplayPosition(int version, int subtask, long ordinal, int previousVersion, long[] previousOrdinals) {
        this.version = version;
        this.subtask = subtask;
        this.ordinal = ordinal;
        this.previousVersion = previousVersion;
        this.previousOrdinals = previousOrdinals.clone();
    }

    public int version() {
        return version;
    }

    public int subtask() {
        return subtask;
    }

    public long ordinal() {
        return ordinal;
    }

    public int previousVersion() {
        return previousVersion;
    }

    public long[] previousOrdinals() {
        return previousOrdinals.clone();
    }

    @Override
    public String splitId() {
        return "subtask-" + subtask;
    }

    @Override
    public String toString() {
        return "ReplayPosition{version " + version + ", subtask " + subtask + ", ordinal " + ordinal
                + (previousVersion == NONE ? "" : ", after version " + previousVersion + " at "
                        + Arrays.toString(previousOrdinals)) + "}";
    }

    /** The split's bytes in a savepoint: version 1 of this layout. */
    static final class Serializer implements SimpleVersionedSerializer<ReplayPosition> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(ReplayPosition position) throws IOException {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                out.writeInt(position.version);
                out.writeInt(position.subtask);
                out.writeLong(position.ordinal);
                out.writeInt(position.previousVersion);
                out.writeInt(position.previousOrdinals.length);
                for (long value : position.previousOrdinals) {
                    out.writeLong(value);
                }
            }
            return bytes.toByteArray();
        }

        @Override
        public ReplayPosition deserialize(int layout, byte[] serialized) throws IOException {
            if (layout != 1) {
                throw new IOException("a replay position of layout " + layout + "; this source reads layout 1");
            }
            try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
                int version = in.readInt();
                int subtask = in.readInt();
                long ordinal = in.readLong();
                int previousVersion = in.readInt();
                long[] previousOrdinals = new long[in.readInt()];
                for (int i = 0; i < previousOrdinals.length; i++) {
                    previousOrdinals[i] = in.readLong();
                }
                return new ReplayPosition(version, subtask, ordinal, previousVersion, previousOrdinals);
            }
        }
    }
}
