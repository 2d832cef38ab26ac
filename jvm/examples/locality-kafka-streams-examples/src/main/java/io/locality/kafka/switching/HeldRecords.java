package io.locality.kafka.switching;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.NavigableMap;
import java.util.OptionalLong;
import java.util.TreeMap;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * The records a new owner holds until the state of their key arrives (the paper's buffering, Caneill et
 * al., Middleware 2016, section 3.4), in a state store of the task so that a restart loses none.
 *
 * <p>Each held record waits for one handover: the switch at {@code switchPoint} from the old owner
 * {@code from}. The store is keyed by an increasing sequence number, so records come back in the order
 * they were held (per key, the order they arrived). The store is small (the records of moved keys that
 * arrive during a handover) and in memory, backed by its changelog.
 */
final class HeldRecords {
    /**
     * One held record: the key and value as their serdes write them, and the record's own headers.
     *
     * @param heldAtMs wall-clock time it was held
     */
    record Held(long seq, long switchPoint, int from, long point, long heldAtMs, byte[] key, byte[] value,
            Headers headers) {}

    private final KeyValueStore<Long, byte[]> store;
    /** How many held records have each point: the earliest is asked for at every record during a switch. */
    private final NavigableMap<Long, Integer> points = new TreeMap<>();
    private long nextSeq;

    HeldRecords(KeyValueStore<Long, byte[]> store) {
        this.store = store;
        try (KeyValueIterator<Long, byte[]> all = store.all()) {
            while (all.hasNext()) {
                Held held = decode(all.next());
                points.merge(held.point(), 1, Integer::sum);
                nextSeq = held.seq() + 1;
            }
        }
    }

    /** The store of operator {@code operator}'s held records. */
    static StoreBuilder<KeyValueStore<Long, byte[]>> storeBuilder(String operator) {
        return Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(storeName(operator)), Serdes.Long(),
                Serdes.ByteArray());
    }

    static String storeName(String operator) {
        return operator + "-held";
    }

    /** Hold a record until the handover of the switch at {@code switchPoint} from task {@code from}. */
    void hold(long switchPoint, int from, long point, long nowMs, byte[] key, byte[] value, Headers headers) {
        store.put(nextSeq, encode(new Held(nextSeq, switchPoint, from, point, nowMs, key, value, headers)));
        points.merge(point, 1, Integer::sum);
        nextSeq++;
    }

    /** Remove and return, in the order they were held, the records waiting for ({@code switchPoint}, {@code from}). */
    List<Held> release(long switchPoint, int from) {
        List<Held> released = new ArrayList<>();
        try (KeyValueIterator<Long, byte[]> all = store.all()) {
            while (all.hasNext()) {
                Held held = decode(all.next());
                if (held.switchPoint() == switchPoint && held.from() == from) {
                    released.add(held);
                }
            }
        }
        for (Held held : released) {
            store.delete(held.seq());
            points.computeIfPresent(held.point(), (point, count) -> count == 1 ? null : count - 1);
        }
        return released;
    }

    /** The earliest point among the held records; empty when none is held. */
    OptionalLong earliestPoint() {
        return points.isEmpty() ? OptionalLong.empty() : OptionalLong.of(points.firstKey());
    }

    /** The record held longest (the first one held); null when none is held. */
    Held oldest() {
        try (KeyValueIterator<Long, byte[]> all = store.all()) {
            return all.hasNext() ? decode(all.next()) : null;
        }
    }

    private static byte[] encode(Held held) {
        Header[] headers = held.headers().toArray();
        int size = 8 + 4 + 8 + 8 + bytes(held.key()) + bytes(held.value()) + 4;
        for (Header header : headers) {
            size += bytes(header.key().getBytes(StandardCharsets.UTF_8)) + bytes(header.value());
        }
        ByteBuffer out = ByteBuffer.allocate(size)
                .putLong(held.switchPoint()).putInt(held.from()).putLong(held.point()).putLong(held.heldAtMs());
        put(out, held.key());
        put(out, held.value());
        out.putInt(headers.length);
        for (Header header : headers) {
            put(out, header.key().getBytes(StandardCharsets.UTF_8));
            put(out, header.value());
        }
        return out.array();
    }

    private static Held decode(KeyValue<Long, byte[]> entry) {
        ByteBuffer in = ByteBuffer.wrap(entry.value);
        long switchPoint = in.getLong();
        int from = in.getInt();
        long point = in.getLong();
        long heldAt = in.getLong();
        byte[] key = get(in);
        byte[] value = get(in);
        Headers headers = new RecordHeaders();
        for (int n = in.getInt(); n > 0; n--) {
            headers.add(new String(get(in), StandardCharsets.UTF_8), get(in));
        }
        return new Held(entry.key, switchPoint, from, point, heldAt, key, value, headers);
    }

    /** Space of a length-prefixed byte string; null is length -1. */
    private static int bytes(byte[] data) {
        return 4 + (data == null ? 0 : data.length);
    }

    private static void put(ByteBuffer out, byte[] data) {
        out.putInt(data == null ? -1 : data.length);
        if (data != null) {
            out.put(data);
        }
    }

    private static byte[] get(ByteBuffer in) {
        int length = in.getInt();
        if (length < 0) {
            return null;
        }
        byte[] data = new byte[length];
        in.get(data);
        return data;
    }
}
