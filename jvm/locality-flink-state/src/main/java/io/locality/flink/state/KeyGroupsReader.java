package io.locality.flink.state;

import static org.apache.flink.runtime.state.FullSnapshotUtil.END_OF_KEY_GROUP_MARK;
import static org.apache.flink.runtime.state.FullSnapshotUtil.clearMetaDataFollowsFlag;
import static org.apache.flink.runtime.state.FullSnapshotUtil.hasMetaDataFollowsFlag;

import java.io.Closeable;
import java.io.IOException;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.StreamCompressionDecorator;
import org.apache.flink.runtime.state.UncompressedStreamCompressionDecorator;

/**
 * Reads the keyed state of one savepoint file in Flink's unified savepoint format (FLIP-41; Flink's own
 * reader is {@code FullSnapshotRestoreOperation}): a header ({@link KeyedBackendSerializationProxy}: the key
 * serializer, the states' meta information, whether key groups are compressed), then each key group at the
 * offset its {@link KeyGroupsStateHandle} records: a state id, that state's {@code (key, value)} pairs, the
 * last one flagged in its key's first byte, then the next state id or the end-of-key-group mark.
 *
 * <p>Keys and values stay the bytes the backend wrote: a reader that only moves entries decodes nothing it
 * does not need. A handle may be the intersection of a larger file with a key-group range (the file's
 * header is still at its start).
 */
final class KeyGroupsReader implements Closeable {
    /** One {@code (key, value)} pair of a key group, as the backend serialized it (the flag cleared). */
    interface EntryVisitor {
        void accept(int keyGroup, int stateId, byte[] key, byte[] value) throws IOException;
    }

    /** The buffer between a file system's stream and the reads of one entry's few bytes at a time. */
    static final int BUFFER_BYTES = 1 << 16;

    private final KeyGroupsStateHandle handle;
    private final FSDataInputStream in;
    private final KeyedBackendSerializationProxy<?> header;

    private KeyGroupsReader(KeyGroupsStateHandle handle, FSDataInputStream in, KeyedBackendSerializationProxy<?> header) {
        this.handle = handle;
        this.in = in;
        this.header = header;
    }

    /** Opens {@code handle}'s file and reads its header. */
    static KeyGroupsReader open(KeyGroupsStateHandle handle, ClassLoader classLoader) throws IOException {
        FSDataInputStream in = handle.openInputStream();
        try {
            KeyedBackendSerializationProxy<?> header = new KeyedBackendSerializationProxy<>(classLoader);
            header.read(new DataInputViewStreamWrapper(in));
            return new KeyGroupsReader(handle, in, header);
        } catch (IOException | RuntimeException e) {
            in.close();
            throw e;
        }
    }

    KeyedBackendSerializationProxy<?> header() {
        return header;
    }

    static StreamCompressionDecorator compression(KeyedBackendSerializationProxy<?> header) {
        return header.isUsingKeyGroupCompression() ? SnappyStreamCompressionDecorator.INSTANCE
                : UncompressedStreamCompressionDecorator.INSTANCE;
    }

    /** Gives every entry to {@code visitor}, key group by key group in the handle's (ascending) order. */
    void forEach(EntryVisitor visitor) throws IOException {
        StreamCompressionDecorator compression = compression(header);
        for (Tuple2<Integer, Long> group : handle.getGroupRangeOffsets()) {
            if (group.f1 == 0L) {
                continue; // a key group without entries has no offset
            }
            in.seek(group.f1);
            // buffered: a file system's stream (the local one) may read each short and length byte by byte;
            // reading past the key group's end is harmless, the next one is sought
            DataInputViewStreamWrapper entries = new DataInputViewStreamWrapper(
                    new BufferedEntries(compression.decorateWithCompression(in), BUFFER_BYTES));
            int stateId = END_OF_KEY_GROUP_MARK & entries.readShort();
            while (stateId != END_OF_KEY_GROUP_MARK) {
                byte[] key = BytePrimitiveArraySerializer.INSTANCE.deserialize(entries);
                byte[] value = BytePrimitiveArraySerializer.INSTANCE.deserialize(entries);
                boolean lastOfState = hasMetaDataFollowsFlag(key);
                clearMetaDataFollowsFlag(key);
                visitor.accept(group.f0, stateId, key, value);
                if (lastOfState) {
                    stateId = END_OF_KEY_GROUP_MARK & entries.readShort();
                }
            }
        }
    }

    @Override
    public void close() throws IOException {
        in.close();
    }
}
