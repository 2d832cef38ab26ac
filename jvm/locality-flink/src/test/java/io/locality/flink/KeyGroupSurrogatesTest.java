package io.locality.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Every surrogate lands in its key group in Flink's own assignment, and is the first candidate that does. */
class KeyGroupSurrogatesTest {

    @ParameterizedTest
    @CsvSource({"7, STRING", "128, STRING", "1000, STRING", "128, LONG", "1000, LONG", "128, INT", "32768, INT"})
    void eachKeyGroupGetsTheFirstCandidateThatFlinkPutsThere(int maxParallelism, KeyType type) {
        Object[] surrogates = KeyGroupSurrogates.of(maxParallelism, type);
        assertEquals(maxParallelism, surrogates.length);
        long last = 0;
        for (int group = 0; group < maxParallelism; group++) {
            assertEquals(group, KeyGroupRangeAssignment.assignToKeyGroup(surrogates[group], maxParallelism));
            assertTrue(type.isReserved(surrogates[group]));
            assertEquals(type.javaClass(), surrogates[group].getClass());
            last = Math.max(last, candidateNumber(surrogates[group], type));
        }
        // the candidates before the last one used all fall in groups that got a smaller candidate
        for (long n = 0; n < last; n++) {
            Object candidate = type.candidate(n);
            int group = KeyGroupRangeAssignment.assignToKeyGroup(candidate, maxParallelism);
            assertTrue(candidateNumber(surrogates[group], type) <= n);
        }
    }

    @Test
    void theSurrogatesOfPythonsRoutingFileExample() {
        // docs/engines/flink.md: a flink table with M = 128 keys "jobs" on "\u0000locality:176" (key group 7)
        // and "tbt" on "\u0000locality:116" (key group 36)
        Object[] surrogates = KeyGroupSurrogates.of(128, KeyType.STRING);
        assertEquals("\u0000locality:176", surrogates[7]);
        assertEquals("\u0000locality:116", surrogates[36]);
    }

    @Test
    void reservedFormsAreExactlyTheCandidateRanges() {
        assertTrue(KeyType.LONG.isReserved(Long.MIN_VALUE));
        assertTrue(KeyType.LONG.isReserved(Long.MIN_VALUE + (1L << 32) - 1));
        assertFalse(KeyType.LONG.isReserved(Long.MIN_VALUE + (1L << 32)));
        assertFalse(KeyType.LONG.isReserved(Long.MAX_VALUE));
        assertFalse(KeyType.LONG.isReserved(0L));
        assertTrue(KeyType.INT.isReserved(Integer.MIN_VALUE + (1 << 20) - 1));
        assertFalse(KeyType.INT.isReserved(Integer.MIN_VALUE + (1 << 20)));
        assertFalse(KeyType.INT.isReserved(Integer.MAX_VALUE));
        assertTrue(KeyType.STRING.isReserved("\u0000locality:x"));
        assertFalse(KeyType.STRING.isReserved("locality:1"));
        assertFalse(KeyType.LONG.isReserved(Integer.MIN_VALUE), "an Integer is not a Long key");
    }

    private static long candidateNumber(Object surrogate, KeyType type) {
        return switch (type) {
            case STRING -> Long.parseLong(((String) surrogate).substring(KeyType.SURROGATE_PREFIX.length()));
            case LONG -> (Long) surrogate - Long.MIN_VALUE;
            case INT -> (long) (Integer) surrogate - Integer.MIN_VALUE;
        };
    }
}
