package io.locality.flink.state;

import static org.apache.flink.runtime.state.FullSnapshotUtil.END_OF_KEY_GROUP_MARK;
import static org.apache.flink.runtime.state.FullSnapshotUtil.setMetaDataFollowsFlagInKey;

import java.io.Closeable;
import java.io.IOException;
import java.io.OutputStream;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.core.fs.FSDataOutputStream;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.core.memory.DataOutputViewStreamWrapper;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeOffsets;
import org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.StreamCompressionDecorator;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;

/**
 * Writes keyed state into one savepoint file in Flink's unified savepoint format, as Flink's own
 * {@code FullSnapshotAsyncWriter} does ({@link KeyGroupsReader} reads it): the header, then each key group
 * at an offset the returned handle records. Entries come in ascending key group; within a key group, one
 * state's entries together.
 *
 * <p>The handle is a {@link RelativeFileStateHandle}: the savepoint's {@code _metadata} names the file
 * relative to the savepoint's directory, so the savepoint can be moved as a whole, like one Flink took.
 */
final class KeyGroupsWriter implements Closeable {
    private final FileSystem fs;
    private final Path file;
    private final FSDataOutputStream out;
    private final KeyGroupRangeOffsets offsets;
    private final StreamCompressionDecorator compression;
    private OutputStream group;
    /**
     * The current key group's entries on their way to {@link #group}: an unsynchronized buffer (each length
     * is four single-byte writes), written through once it holds {@link KeyGroupsReader#BUFFER_BYTES}.
     */
    private final DataOutputSerializer entries = new DataOutputSerializer(2 * KeyGroupsReader.BUFFER_BYTES);
    // the last entry waits for the next: the last of a state or key group carries the flag in its key
    private int pendingGroup = -1;
    private int pendingState;
    private byte[] pendingKey;
    private byte[] pendingValue;
    private boolean finished;

    private KeyGroupsWriter(FileSystem fs, Path file, FSDataOutputStream out, KeyGroupRange range,
            StreamCompressionDecorator compression) {
        this.fs = fs;
        this.file = file;
        this.out = out;
        this.offsets = new KeyGroupRangeOffsets(range);
        this.compression = compression;
    }

    /** A new file {@code file} for key groups {@code range}, with {@code header} (the states it holds). */
    static KeyGroupsWriter create(Path file, KeyedBackendSerializationProxy<?> header, KeyGroupRange range)
            throws IOException {
        FileSystem fs = file.getFileSystem();
        FSDataOutputStream out = fs.create(file, FileSystem.WriteMode.NO_OVERWRITE);
        KeyGroupsWriter writer = new KeyGroupsWriter(fs, file, out, range, KeyGroupsReader.compression(header));
        try {
            header.write(new DataOutputViewStreamWrapper(out));
        } catch (IOException | RuntimeException e) {
            writer.close();
            throw e;
        }
        return writer;
    }

    /** Adds one entry of state {@code stateId} in key group {@code keyGroup} (not below the last one's). */
    void add(int keyGroup, int stateId, byte[] key, byte[] value) throws IOException {
        if (keyGroup < pendingGroup) {
            throw new IllegalStateException("key group " + keyGroup + " after key group " + pendingGroup + " in " + file);
        }
        if (pendingKey == null) {
            beginGroup(keyGroup, stateId);
        } else if (keyGroup != pendingGroup) {
            endGroup();
            beginGroup(keyGroup, stateId);
        } else if (stateId != pendingState) {
            writePending(true);
            entries.writeShort(stateId);
        } else {
            writePending(false);
        }
        pendingGroup = keyGroup;
        pendingState = stateId;
        pendingKey = key;
        pendingValue = value;
    }

    private void beginGroup(int keyGroup, int stateId) throws IOException {
        offsets.setKeyGroupOffset(keyGroup, out.getPos());
        group = compression.decorateWithCompression(out);
        entries.writeShort(stateId);
    }

    /** Writes the pending entry, the end mark and the buffer; closes the compression, not the file. */
    private void endGroup() throws IOException {
        writePending(true);
        entries.writeShort(END_OF_KEY_GROUP_MARK);
        group.write(entries.getSharedBuffer(), 0, entries.length());
        entries.clear();
        group.close(); // the next offset is taken after this key group's last byte
    }

    private void writePending(boolean lastOfState) throws IOException {
        if (lastOfState) {
            setMetaDataFollowsFlagInKey(pendingKey);
        }
        BytePrimitiveArraySerializer.INSTANCE.serialize(pendingKey, entries);
        BytePrimitiveArraySerializer.INSTANCE.serialize(pendingValue, entries);
        if (entries.length() >= KeyGroupsReader.BUFFER_BYTES) {
            group.write(entries.getSharedBuffer(), 0, entries.length());
            entries.clear();
        }
    }

    /** Ends the file: the handle to restore its entries from, or null (and no file) when it got none. */
    KeyGroupsSavepointStateHandle finish() throws IOException {
        finished = true;
        if (pendingKey == null) {
            out.close();
            fs.delete(file, false);
            return null;
        }
        endGroup();
        long size = out.getPos();
        out.close();
        return new KeyGroupsSavepointStateHandle(offsets, new RelativeFileStateHandle(file, file.getName(), size));
    }

    /** Without {@link #finish()}: removes the file (a failed rewrite leaves no part of it). */
    @Override
    public void close() throws IOException {
        if (!finished) {
            finished = true;
            out.close();
            fs.delete(file, false);
        }
    }
}
