package io.locality.flink.state;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.junit.jupiter.api.Test;

/** A file's listed keys, asked about by their serialized bytes: every member found, others almost never. */
class SerializedKeysTest {
    private static final int MAX_PARALLELISM = 128;
    private static final KeyGroupRange RANGE = new KeyGroupRange(32, 63);

    @Test
    void everyListedKeyOfTheRangeIsFoundAndOtherKeysAlmostNever() throws Exception {
        List<Object> listed = new ArrayList<>();
        for (int i = 0; i < 20_000; i++) {
            listed.add("#listed-" + i + "-" + "x".repeat(i % 70)); // lengths across the 8-byte words
        }
        SerializedKeys keys = SerializedKeys.of(listed, serializer(StringSerializer.INSTANCE), MAX_PARALLELISM, RANGE);
        int inRange = 0;
        for (Object key : listed) {
            int keyGroup = KeyGroupRangeAssignment.assignToKeyGroup(key, MAX_PARALLELISM);
            byte[] bytes = bytes(StringSerializer.INSTANCE, key, 3);
            if (RANGE.contains(keyGroup)) {
                inRange++;
                assertTrue(keys.mayHold(keyGroup, bytes, 3, bytes.length - 2), key.toString());
            } else {
                assertFalse(keys.mayHold(keyGroup, bytes, 3, bytes.length - 2), "out of the file's range: " + key);
            }
        }
        assertTrue(inRange > 4000, inRange + " listed keys in the range");
        int found = 0;
        for (int i = 0; i < 200_000; i++) {
            String other = "#other-" + i;
            byte[] bytes = bytes(StringSerializer.INSTANCE, other, 0);
            if (keys.mayHold(KeyGroupRangeAssignment.assignToKeyGroup(other, MAX_PARALLELISM), bytes, 0, bytes.length - 2)) {
                found++;
            }
        }
        assertTrue(found <= 1, found + " of 200,000 keys not listed were taken for listed ones");
    }

    @Test
    void aKeyGroupWithoutListedKeysHoldsNothing() throws Exception {
        SerializedKeys keys = SerializedKeys.of(List.of(7L), serializer(LongSerializer.INSTANCE), MAX_PARALLELISM,
                new KeyGroupRange(0, MAX_PARALLELISM - 1));
        int keyGroup = KeyGroupRangeAssignment.assignToKeyGroup(7L, MAX_PARALLELISM);
        byte[] seven = bytes(LongSerializer.INSTANCE, 7L, 0);
        assertTrue(keys.mayHold(keyGroup, seven, 0, seven.length - 2));
        assertFalse(keys.mayHold((keyGroup + 1) % MAX_PARALLELISM, seven, 0, seven.length - 2));
        byte[] eight = bytes(LongSerializer.INSTANCE, 8L, 0);
        assertFalse(keys.mayHold(keyGroup, eight, 0, eight.length - 2));
    }

    @Test
    void fingerprintsDependOnEveryByteAndOnTheLength() {
        byte[] bytes = new byte[24];
        long empty = SerializedKeys.fingerprint(bytes, 0, 0);
        assertNotEquals(0L, empty);
        assertNotEquals(empty, SerializedKeys.fingerprint(bytes, 0, 1), "a zero byte more");
        long whole = SerializedKeys.fingerprint(bytes, 0, bytes.length);
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = 1;
            assertNotEquals(whole, SerializedKeys.fingerprint(bytes, 0, bytes.length), "byte " + i);
            bytes[i] = 0;
        }
    }

    @SuppressWarnings("unchecked")
    private static TypeSerializer<Object> serializer(TypeSerializer<?> serializer) {
        return (TypeSerializer<Object>) serializer;
    }

    /** {@code key} serialized inside other bytes: {@code before} bytes before it, two after. */
    private static <T> byte[] bytes(TypeSerializer<T> serializer, Object key, int before) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(64);
        out.write(new byte[before]);
        serializer(serializer).serialize(key, out);
        out.write(new byte[] {9, 9});
        return out.getCopyOfBuffer();
    }
}
