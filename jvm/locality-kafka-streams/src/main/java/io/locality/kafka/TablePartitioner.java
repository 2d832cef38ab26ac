package io.locality.kafka;

import io.locality.routing.RoutingTable;
import java.util.Optional;
import java.util.Set;
import java.util.function.Supplier;
import org.apache.kafka.streams.processor.StreamPartitioner;

/**
 * A Kafka Streams partitioner for repartition and sink topics that follows one operator's routing table:
 * a key with an entry goes to the partition its table names, every other key exactly where Kafka's default
 * partitioner puts it.
 *
 * <p>Partition <i>i</i> of a topic between two stages is instance <i>i</i> of the stage that consumes it
 * (task {@code <subtopology>_<i>} reads it), so the table's instance is the record's partition. The table
 * comes from a supplier asked at every record, so a job that swaps versions (a new store version) routes
 * the next record by the new table; a fixed table is {@code new TablePartitioner<>(table)}. Use it in
 * {@code KStream.repartition(Repartitioned.streamPartitioner(p))} and
 * {@code KStream.to(topic, Produced.streamPartitioner(p))} (KIP-837's {@code partitions(...)}).
 *
 * <p>Split keys go whole to their home partition (their entry, else Kafka's default). Records without a key
 * carry no state: they get the producer's own partitioning ({@code Optional.empty()}).
 *
 * @param <K> the key type: {@code String}, or {@code Long} / {@code Integer} as the table's {@code int_type} says
 * @param <V> the value type (not looked at)
 */
public final class TablePartitioner<K, V> implements StreamPartitioner<K, V> {
    private final Supplier<RoutingTable> tables;
    private volatile RoutingTable checked;

    /** Follows {@code table}. */
    public TablePartitioner(RoutingTable table) {
        this(() -> table);
    }

    /**
     * Follows the table {@code tables} gives at each record.
     *
     * @throws IllegalArgumentException when the table falls back on another engine's hash than Kafka's
     */
    public TablePartitioner(Supplier<RoutingTable> tables) {
        this.tables = tables;
        inForce();
    }

    /**
     * The record's partition: the table's instance for its key.
     *
     * @throws IllegalStateException when the topic has another number of partitions than the table instances
     */
    @Override
    public Optional<Set<Integer>> partitions(String topic, K key, V value, int numPartitions) {
        RoutingTable table = inForce();
        if (numPartitions != table.numInstances()) {
            throw new IllegalStateException("topic '" + topic + "' has " + numPartitions + " partitions but the "
                    + "routing table of '" + table.operator() + "' has " + table.numInstances() + " instances; "
                    + "partition i is instance i, so they must be equal");
        }
        if (key == null) {
            return Optional.empty();
        }
        return Optional.of(Set.of(table.route(key)));
    }

    /** The table in force, checked once per table. */
    private RoutingTable inForce() {
        RoutingTable table = tables.get();
        if (table != checked) {
            String engine = table.fallbackSpec().engine();
            if (!"kafka".equals(engine)) {
                throw new IllegalArgumentException("the routing table of '" + table.operator() + "' falls back to '"
                        + engine + "', not Kafka's partitioner: its keys without an entry would go elsewhere than "
                        + "the table assumes; publish tables built with --hash kafka");
            }
            checked = table;
        }
        return table;
    }
}
