package io.locality.hashing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The ring places keys where Python's {@code ConsistentHashRing} does (values printed by locality 0.1.0). */
class ConsistentHashRingTest {
    private static final List<Object> STRINGS = List.of("", "a", "hello", "paris-é🙂", "abcdefghijklmnop", "abcdefghi");
    private static final List<Object> INTEGERS = List.of(0L, 1L, -1L, Long.MAX_VALUE, Long.MIN_VALUE, 123456789012L);

    @Test
    void placesStringsAsPythonDoes() {
        ConsistentHashRing ring = new ConsistentHashRing(7, 128);
        assertEquals(List.of(1, 0, 6, 0, 1, 0), STRINGS.stream().map(ring::instanceOf).toList());
        ConsistentHashRing sparse = new ConsistentHashRing(3, 1);
        assertEquals(List.of(0, 0, 0, 1, 0, 1), STRINGS.stream().map(sparse::instanceOf).toList());
    }

    @Test
    void placesIntegersAsPythonDoesWhateverTheirJavaType() {
        ConsistentHashRing ring = new ConsistentHashRing(7, 128);
        assertEquals(List.of(1, 1, 1, 3, 1, 2), INTEGERS.stream().map(ring::instanceOf).toList());
        assertEquals(ring.instanceOf(-1L), ring.instanceOf(-1));
    }

    @Test
    void growingMovesOnlyTheKeysTheNewInstanceTakes() {
        ConsistentHashRing six = new ConsistentHashRing(6, 128);
        ConsistentHashRing seven = new ConsistentHashRing(7, 128);
        int moved = 0;
        for (long key = 0; key < 20_000; key++) {
            int before = six.instanceOf(key);
            int after = seven.instanceOf(key);
            if (before != after) {
                assertEquals(6, after, "key " + key + " moved between two old instances");
                moved++;
            }
        }
        assertEquals(1.0 / 7, moved / 20_000.0, 0.03);
    }

    @Test
    void refusesAnEmptyRingAndOtherKeyTypes() {
        assertThrows(IllegalArgumentException.class, () -> new ConsistentHashRing(0, 128));
        assertThrows(IllegalArgumentException.class, () -> new ConsistentHashRing(3, 128).instanceOf(1.5));
    }
}
