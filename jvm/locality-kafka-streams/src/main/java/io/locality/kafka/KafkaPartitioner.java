package io.locality.kafka;

import io.locality.hashing.FallbackHash;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.serialization.IntegerSerializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's default partition of a keyed record, computed by Kafka's own code: the fallback of tables learned
 * with {@code --hash kafka}.
 *
 * <p>The producer (and Kafka Streams' default partitioner) places a record by its serialized key:
 * {@code BuiltInPartitioner.partitionForKey(keyBytes, numPartitions)}, that is
 * {@code toPositive(murmur2(keyBytes)) % numPartitions}. The bytes are what the job's key serializer writes,
 * which the table's header names: {@code StringSerializer} (UTF-8) for strings, {@code LongSerializer}
 * (8 bytes, big-endian) for integral keys, or {@code IntegerSerializer} (4 bytes) when the table says
 * {@code int_type: int}. The Python {@code KafkaPartitioner} computes the same partition for every key.
 */
public final class KafkaPartitioner implements FallbackHash {
    private final Serializer<String> strings = new StringSerializer();
    private final Serializer<Long> longs = new LongSerializer();
    private final Serializer<Integer> ints = new IntegerSerializer();
    private final int numPartitions;
    private final boolean intKeys;

    /**
     * Partitions of a topic with {@code numPartitions} partitions.
     *
     * @param intType the Java type of integral keys: {@code "long"} ({@code LongSerializer}) or {@code "int"}
     *     ({@code IntegerSerializer})
     */
    public KafkaPartitioner(int numPartitions, String intType) {
        if (numPartitions < 1) {
            throw new IllegalArgumentException("a topic has at least 1 partition; got " + numPartitions);
        }
        if (!"long".equals(intType) && !"int".equals(intType)) {
            throw new IllegalArgumentException("int_type of a Kafka table must be 'long' or 'int'; got '" + intType + "'");
        }
        this.numPartitions = numPartitions;
        this.intKeys = "int".equals(intType);
    }

    /**
     * The partition Kafka's producer gives {@code key}.
     *
     * @param key a {@code String}, or a {@code Long} ({@code int_type: long}) or {@code Integer}
     *     ({@code int_type: int}): the type the job's key serde takes
     * @throws IllegalArgumentException for any other key type, naming the type the table expects
     */
    @Override
    public int instanceOf(Object key) {
        return BuiltInPartitioner.partitionForKey(serialize(key), numPartitions);
    }

    /** The bytes the job's key serializer writes for {@code key}. */
    private byte[] serialize(Object key) {
        if (key instanceof String s) {
            return strings.serialize(null, s);
        }
        if (key instanceof Long value && !intKeys) {
            return longs.serialize(null, value);
        }
        if (key instanceof Integer value && intKeys) {
            return ints.serialize(null, value);
        }
        String expected = intKeys ? "Integer (the table says int_type: int)" : "Long (the table says int_type: long)";
        throw new IllegalArgumentException("a key of a Kafka table must be a String or a " + expected + "; got "
                + (key == null ? "null" : key.getClass().getName() + " " + key));
    }
}
