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
    public static final long NONE = -1;

    private final long version;
    private final int subtask;
    private final long ordinal;
    private final long previousVersion;
    private final long[] previousOrdinals;

    public ReplayPosition(long version, int subtask, long ordinal, long previousVersion, long[] previousOrdinals) {
        this.version = version;
        this.subtask = subtask;
        this.ordinal = ordinal;
        this.previousVersion = previousVersion;
        this.previousOrdinals = previousOrdinals.clone();
    }

    public long version() {
        return version;
    }

    public int subtask() {
        return subtask;
    }

    public long ordinal() {
        return ordinal;
    }

    public long previousVersion() {
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

    /**
     * The split's bytes in a savepoint: layout 2, whose store versions are 8 bytes (the store numbers them
     * up to 18 digits); layout 1, of savepoints taken before, held them in 4.
     */
    static final class Serializer implements SimpleVersionedSerializer<ReplayPosition> {
        private static final int LAYOUT = 2;

        @Override
        public int getVersion() {
            return LAYOUT;
        }

        @Override
        public byte[] serialize(ReplayPosition position) throws IOException {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                out.writeLong(position.version);
                out.writeInt(position.subtask);
                out.writeLong(position.ordinal);
                out.writeLong(position.previousVersion);
                out.writeInt(position.previousOrdinals.length);
                for (long value : position.previousOrdinals) {
                    out.writeLong(value);
                }
            }
            return bytes.toByteArray();
        }

        @Override
        public ReplayPosition deserialize(int layout, byte[] serialized) throws IOException {
            if (layout != 1 && layout != LAYOUT) {
                throw new IOException("a replay position of layout " + layout + "; this source reads layouts 1 and "
                        + LAYOUT);
            }
            try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
                long version = layout == 1 ? in.readInt() : in.readLong();
                int subtask = in.readInt();
                long ordinal = in.readLong();
                long previousVersion = layout == 1 ? in.readInt() : in.readLong();
                long[] previousOrdinals = new long[in.readInt()];
                for (int i = 0; i < previousOrdinals.length; i++) {
                    previousOrdinals[i] = in.readLong();
                }
                return new ReplayPosition(version, subtask, ordinal, previousVersion, previousOrdinals);
            }
        }
    }
}
