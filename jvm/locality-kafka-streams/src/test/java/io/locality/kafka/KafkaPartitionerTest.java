package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.hashing.FallbackHashes;
import io.locality.hashing.FallbackSpec;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Kafka's partition of each key is the one Python's {@code KafkaPartitioner} gives (values printed by locality 0.1.0). */
class KafkaPartitionerTest {
    private static final List<Object> STRINGS = List.of("", "hello", "paris", "GB/England", "é中🙂x", "#tag".repeat(10));

    @Test
    void placesStringsAsPythonDoes() {
        assertEquals(List.of(9, 9, 11, 9, 11, 1), STRINGS.stream().map(new KafkaPartitioner(12, "long")::instanceOf).toList());
        assertEquals(List.of(3, 3, 5, 3, 5, 1), STRINGS.stream().map(new KafkaPartitioner(6, "long")::instanceOf).toList());
    }

    @Test
    void placesLongsAndIntsAsTheirSerializersWriteThem() {
        List<Object> longs = List.of(0L, 1L, -1L, 42L, Long.MAX_VALUE, Long.MIN_VALUE, 123456789012L);
        assertEquals(List.of(11, 0, 5, 4, 8, 4, 0), longs.stream().map(new KafkaPartitioner(12, "long")::instanceOf).toList());
        List<Object> ints = List.of(0, 1, -1, 42, Integer.MAX_VALUE, Integer.MIN_VALUE);
        assertEquals(List.of(4, 0, 5, 0, 3, 6), ints.stream().map(new KafkaPartitioner(12, "int")::instanceOf).toList());
    }

    @Test
    void refusesAKeyOfAnotherTypeThanTheTablesSerializer() {
        IllegalArgumentException wrongWidth = assertThrows(IllegalArgumentException.class,
                () -> new KafkaPartitioner(12, "long").instanceOf(42));
        assertTrue(wrongWidth.getMessage().contains("int_type: long"), wrongWidth.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new KafkaPartitioner(12, "int").instanceOf(42L));
        assertThrows(IllegalArgumentException.class, () -> new KafkaPartitioner(12, "long").instanceOf(1.5));
        assertThrows(IllegalArgumentException.class, () -> new KafkaPartitioner(0, "long"));
        assertThrows(IllegalArgumentException.class, () -> new KafkaPartitioner(6, "short"));
    }

    @Test
    void isTheFallbackOfKafkaTablesThroughTheServiceLoader() throws Exception {
        FallbackSpec spec = new FallbackSpec("kafka", 12, new ObjectMapper().readTree("{\"int_type\": \"int\"}"));
        assertEquals(4, FallbackHashes.of(spec).instanceOf(0));
        assertEquals(9, FallbackHashes.of(spec).instanceOf("hello"));
    }
}
