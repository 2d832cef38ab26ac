package io.locality.flink.state;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

/**
 * The keys of a set that fall in a range of key groups, in their serialized form, asked about a range of a
 * byte array (a real key at the end of a savepoint entry's composite key) without decoding it. Holds a
 * 64-bit fingerprint of each key's bytes in an open-addressing table per key group, so that the entries of
 * one key group, read together, probe a table that stays in the processor's cache. {@link #mayHold} is
 * true for every key of the set, and for any other key with probability about {@code n / 2^64} ({@code n}
 * the keys of its key group): a caller decodes the key and looks it up exactly when it is true. 16 to 32
 * bytes per key.
 */
final class SerializedKeys {
    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final long[] NONE = new long[1];

    private final KeyGroupRange range;
    /** Per key group of the range: its keys' fingerprints (0: an empty slot; a fingerprint is never 0). */
    private final long[][] slots;

    private SerializedKeys(KeyGroupRange range, long[][] slots) {
        this.range = range;
        this.slots = slots;
    }

    /**
     * The keys of {@code keys} in key groups {@code range} (Flink's assignment of each key's hash over
     * {@code maxParallelism} key groups), as {@code serializer} writes them.
     */
    static SerializedKeys of(Collection<?> keys, TypeSerializer<Object> serializer, int maxParallelism,
            KeyGroupRange range) throws IOException {
        List<List<Object>> byGroup = new ArrayList<>();
        for (int i = 0; i < range.getNumberOfKeyGroups(); i++) {
            byGroup.add(new ArrayList<>());
        }
        for (Object key : keys) {
            int keyGroup = KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
            if (range.contains(keyGroup)) {
                byGroup.get(keyGroup - range.getStartKeyGroup()).add(key);
            }
        }
        long[][] slots = new long[byGroup.size()][];
        DataOutputSerializer out = new DataOutputSerializer(64);
        for (int i = 0; i < slots.length; i++) {
            List<Object> group = byGroup.get(i);
            if (group.isEmpty()) {
                slots[i] = NONE;
                continue;
            }
            // a power of two, at least twice the keys: probes stay short
            slots[i] = new long[Integer.highestOneBit(2 * group.size() - 1) << 1];
            for (Object key : group) {
                out.clear();
                serializer.serialize(key, out);
                add(slots[i], fingerprint(out.getSharedBuffer(), 0, out.length()));
            }
        }
        return new SerializedKeys(range, slots);
    }

    private static void add(long[] table, long fingerprint) {
        int mask = table.length - 1;
        int slot = (int) fingerprint & mask;
        while (table[slot] != 0 && table[slot] != fingerprint) {
            slot = (slot + 1) & mask;
        }
        table[slot] = fingerprint;
    }

    /**
     * Whether the key serialized in {@code bytes[from..to)}, of key group {@code keyGroup}, may be in the
     * set (false: it is not).
     */
    boolean mayHold(int keyGroup, byte[] bytes, int from, int to) {
        if (!range.contains(keyGroup)) {
            return false;
        }
        long[] table = slots[keyGroup - range.getStartKeyGroup()];
        if (table == NONE) {
            return false;
        }
        long fingerprint = fingerprint(bytes, from, to);
        int mask = table.length - 1;
        for (int slot = (int) fingerprint & mask; table[slot] != 0; slot = (slot + 1) & mask) {
            if (table[slot] == fingerprint) {
                return true;
            }
        }
        return false;
    }

    /**
     * The bytes eight at a time (little-endian), each word folded in with one multiply (as FxHash does),
     * then MurmurHash3's finalizer; never 0. Not for keys an adversary picks: a collision costs a decode.
     */
    static long fingerprint(byte[] bytes, int from, int to) {
        long h = to - from;
        int i = from;
        for (; i + Long.BYTES <= to; i += Long.BYTES) {
            h = (Long.rotateLeft(h, 5) ^ (long) LONGS.get(bytes, i)) * 0x9e3779b97f4a7c15L;
        }
        long tail = 0;
        for (int shift = 0; i < to; i++, shift += Byte.SIZE) {
            tail |= (bytes[i] & 0xffL) << shift;
        }
        h = (Long.rotateLeft(h, 5) ^ tail) * 0x9e3779b97f4a7c15L;
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return h == 0 ? 1 : h;
    }
}
