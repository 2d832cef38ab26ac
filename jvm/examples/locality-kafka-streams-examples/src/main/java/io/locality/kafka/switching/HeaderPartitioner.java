package io.locality.kafka.switching;

import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.streams.processor.StreamPartitioner;

/**
 * Sends each record to the partition its {@value SwitchHeaders#PARTITION} header names, or to every
 * partition when it carries {@value SwitchHeaders#BROADCAST} (KIP-837's multicast).
 *
 * <p>Why the partition travels in a header: a record is routed by the version in force at its point (its
 * timestamp), and a {@code StreamPartitioner} is not given the timestamp. So the processor before the sink
 * ({@link RouteByPoint}, or a switching stage for its handover messages), which has it, decides, and this
 * partitioner obeys. It takes the headers-aware {@code partitions(...)} of Kafka Streams 4.4
 * (KAFKA-20197). A keyed record without either header is a bug in the topology and fails the task; a record
 * without key or partition gets the producer's own partitioning.
 *
 * @param <K> key type (not looked at)
 * @param <V> value type (not looked at)
 */
public final class HeaderPartitioner<K, V> implements StreamPartitioner<K, V> {

    @Override
    public Optional<Set<Integer>> partitions(String topic, K key, V value, Headers headers, int numPartitions) {
        if (SwitchHeaders.isBroadcast(headers)) {
            return Optional.of(IntStream.range(0, numPartitions).boxed().collect(Collectors.toUnmodifiableSet()));
        }
        OptionalLong partition = SwitchHeaders.partition(headers);
        if (partition.isEmpty()) {
            if (key == null) {
                return Optional.empty();
            }
            throw new IllegalStateException("a record for topic '" + topic + "' carries no '" + SwitchHeaders.PARTITION
                    + "' header: route it by point (RouteByPoint) before the sink");
        }
        long chosen = partition.getAsLong();
        if (chosen < 0 || chosen >= numPartitions) {
            throw new IllegalStateException("a record is routed to partition " + chosen + " of topic '" + topic
                    + "', which has " + numPartitions + " partitions: the topic must have as many partitions as "
                    + "its operator has instances");
        }
        return Optional.of(Set.of((int) chosen));
    }

    /** Kafka Streams 4.4 calls the headers-aware variant; this one sees no headers, hence no partition. */
    @Override
    @SuppressWarnings("deprecation")
    public Optional<Set<Integer>> partitions(String topic, K key, V value, int numPartitions) {
        return partitions(topic, key, value, new RecordHeaders(), numPartitions);
    }
}
