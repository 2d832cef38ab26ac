package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.routing.RoutingTable;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class TablePartitionerTest {

    @Test
    void sendsTableKeysToTheirEntryAndEveryOtherKeyWhereKafkaDoes() throws Exception {
        RoutingTable table = Tables.twoStages(6, "kafka", "[[\"hello\", 0], [\"#a\", 5]]").table("hashtag");
        TablePartitioner<String, String> partitioner = new TablePartitioner<>(table);
        KafkaPartitioner kafka = new KafkaPartitioner(6, "long");
        assertEquals(3, kafka.instanceOf("hello")); // the entry moves it
        assertEquals(Optional.of(Set.of(0)), partitioner.partitions("t", "hello", "v", 6));
        assertEquals(Optional.of(Set.of(5)), partitioner.partitions("t", "#a", "v", 6));
        for (String key : new String[] {"paris", "GB/England", "", "é中🙂x"}) {
            assertEquals(Optional.of(Set.of(kafka.instanceOf(key))), partitioner.partitions("t", key, "v", 6), key);
        }
        assertEquals(Optional.empty(), partitioner.partitions("t", null, "v", 6));
    }

    @Test
    void followsTheTableItsSupplierGivesFromTheNextRecord() throws Exception {
        AtomicReference<RoutingTable> inForce = new AtomicReference<>(
                Tables.twoStages(6, "kafka", "[[\"hello\", 0]]").table("hashtag"));
        TablePartitioner<String, String> partitioner = new TablePartitioner<>(inForce::get);
        assertEquals(Optional.of(Set.of(0)), partitioner.partitions("t", "hello", "v", 6));
        inForce.set(Tables.twoStages(6, "kafka", "[[\"hello\", 4]]").table("hashtag"));
        assertEquals(Optional.of(Set.of(4)), partitioner.partitions("t", "hello", "v", 6));
    }

    @Test
    void refusesATopicOfAnotherSizeAndATableOfAnotherEngine() throws Exception {
        RoutingTable table = Tables.twoStages(6, "kafka", "[]").table("hashtag");
        IllegalStateException wrongSize = assertThrows(IllegalStateException.class,
                () -> new TablePartitioner<String, String>(table).partitions("counts", "k", "v", 12));
        assertTrue(wrongSize.getMessage().contains("'counts' has 12 partitions"), wrongSize.getMessage());
        RoutingTable ring = Tables.twoStages(6, "ring", "[]").table("hashtag");
        IllegalArgumentException wrongEngine = assertThrows(IllegalArgumentException.class,
                () -> new TablePartitioner<String, String>(ring));
        assertTrue(wrongEngine.getMessage().contains("--hash kafka"), wrongEngine.getMessage());
    }
}
