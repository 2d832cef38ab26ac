package io.locality.kafka;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.routing.RoutingConfiguration;
import java.time.Duration;
import java.util.List;
import java.util.function.Supplier;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorSupplier;

/**
 * The two-stage job whose locality the routing tables raise: count by the first key, re-key by the second
 * key through its routing table, count by the second key.
 *
 * <p>Records are JSON objects (strings), keyed by the first operator's key; the second key is the value's
 * field named after the second operator (for tables over {@code location -> hashtag}, the input topic is
 * keyed by location and each value has a {@code "hashtag"} field). The input topic is produced with the
 * first operator's table ({@code TablePartitioner} in Python, {@link TablePartitioner} in a
 * job). Sub-topology 0 counts by the first key in task {@code 0_i} for partition {@code i}; the repartition
 * topic {@code <application.id>-<second>-repartition} and the output topic are partitioned by the second
 * operator's table, so sub-topology 1 counts by the second key in task {@code 1_j}, where the table put it.
 * With {@link ServerTaskAssignor}, tasks {@code 0_i} and {@code 1_j} share an application instance exactly
 * when the tables put instance {@code i} of the first operator and {@code j} of the second on one server.
 */
public final class TwoStageCounts {
    private static final ObjectMapper JSON = new ObjectMapper();

    private TwoStageCounts() {}

    /**
     * The topology of the job.
     *
     * @param inputTopic topic of the records, keyed by the first key, as many partitions as the first
     *     operator has instances
     * @param outputTopic topic the records go to keyed by the second key, as many partitions as the second
     *     operator has instances
     * @param tables the configuration in force (asked again at every re-keyed record, so a job that swaps
     *     versions routes by the new tables)
     * @param processed told of every record each stage counts
     */
    public static Topology build(String inputTopic, String outputTopic, Supplier<RoutingConfiguration> tables,
            ProcessedRecords processed) {
        return build(inputTopic, outputTopic, tables, processed, null);
    }

    /**
     * The topology of the job, with {@code sketcher} (unless null) between the two stages: in the first stage's
     * sub-topology, after its count, before the re-keying ({@link #sketcher}, or a {@link PhasedSketcher} of it).
     */
    public static Topology build(String inputTopic, String outputTopic, Supplier<RoutingConfiguration> tables,
            ProcessedRecords processed, FixedKeyProcessorSupplier<String, String, String> sketcher) {
        RoutingConfiguration now = tables.get();
        List<String> operators = operators(now);
        String first = operators.get(0);
        String second = operators.get(1);
        TablePartitioner<String, String> bySecond = new TablePartitioner<>(() -> tables.get().table(second));
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> counted = builder.stream(inputTopic, Consumed.with(Serdes.String(), Serdes.String()))
                .process(CountByKey.<String, String>supplier(first, Serdes.String(), processed), Named.as(first));
        if (sketcher != null) { // a FixedKeyProcessor: the key stays, no repartition topic is added
            counted = counted.processValues(sketcher, Named.as("sketch-" + first + "-" + second));
        }
        counted.selectKey((key, value) -> field(value, second), Named.as("key-by-" + second))
                .repartition(Repartitioned.<String, String>as(second)
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.String())
                        .withNumberOfPartitions(now.table(second).numInstances())
                        .withStreamPartitioner(bySecond))
                .process(CountByKey.<String, String>supplier(second, Serdes.String(), processed), Named.as(second))
                .to(outputTopic, Produced.with(Serdes.String(), Serdes.String()).withStreamPartitioner(bySecond));
        return builder.build();
    }

    /**
     * A sketcher of the (first key, second key) pairs between the two stages: the first key is the record's key,
     * the second its value's field; its locality metric follows {@code tables}, as the re-keyed records do.
     *
     * @param store the store the sketches go to
     * @param interval the wall-clock time each sketch covers
     * @param capacity the counters of each sketch
     * @param updatesPerSecond the budget of sketch updates a second per task, above which records are sampled
     */
    public static KeyPairSketcher<String, String> sketcher(String store, Duration interval, int capacity,
            int updatesPerSecond, Supplier<RoutingConfiguration> tables) {
        List<String> operators = operators(tables.get());
        String second = operators.get(1);
        return KeyPairSketcher.<String, String>builder(operators.get(0), (key, value) -> key, second,
                        (key, value) -> field(value, second))
                .store(store)                       // a directory or s3://bucket/prefix
                .interval(interval)                 // each sketch covers this much wall-clock time, cut on the epoch
                .capacity(capacity)                 // counters per sketch
                .updatesPerSecond(updatesPerSecond) // per task; above it, a weighted sample
                .routing(tables)                    // the tables the records are re-keyed by: for the metric
                .build();
    }

    /**
     * The two operators of {@code tables}, in pipeline order.
     *
     * @throws IllegalArgumentException when the tables are not for two operators
     */
    static List<String> operators(RoutingConfiguration tables) {
        List<String> operators = tables.topology().operators();
        if (operators.size() != 2) {
            throw new IllegalArgumentException("the two-stage job needs tables for two operators; version "
                    + tables.version() + " has " + operators);
        }
        return operators;
    }

    /**
     * The text of field {@code name} of a JSON object, or null when the object lacks it.
     *
     * @throws IllegalArgumentException when {@code value} is not a JSON object
     */
    static String field(String value, String name) {
        JsonNode node;
        try {
            node = JSON.readTree(value);
        } catch (JsonProcessingException e) {
            node = null;
        }
        if (node == null || !node.isObject()) {
            String start = value == null ? "null" : value.substring(0, Math.min(value.length(), 80));
            throw new IllegalArgumentException("a record's value must be a JSON object with a '" + name + "' field; got "
                    + start);
        }
        JsonNode found = node.get(name);
        return found == null || found.isNull() ? null : found.asText();
    }
}
