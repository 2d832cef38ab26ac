package io.locality.kafka;

import io.locality.kafka.switching.HeaderPartitioner;
import io.locality.kafka.switching.MarkSwitchPoints;
import io.locality.kafka.switching.RouteByPoint;
import io.locality.kafka.switching.SwitchEvents;
import io.locality.kafka.switching.SwitchPlans;
import io.locality.kafka.switching.SwitchingCountByKey;
import io.locality.routing.RoutingConfiguration;
import io.locality.store.ScheduleFollower;
import java.time.Duration;
import java.util.List;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.Topology;

/**
 * {@link TwoStageCounts} that follows the store's switch schedule: each record is counted by both stages
 * with the tables of the version in force at its point (its timestamp), and at every switch the state of the
 * keys that move goes to their new owner before their records are counted there (docs/engines/kafka.md,
 * "Switching versions").
 *
 * <p>Three sub-topologies: 0 reads the input topic (any partitioning), sends the switch markers
 * ({@link MarkSwitchPoints}) and routes each record by the first operator's table at its point into the
 * first stage's routed topic; 1 is the first stage ({@link SwitchingCountByKey}, task {@code 1_i} for
 * instance {@code i}), which re-keys by the second key and routes by the second operator's table into the
 * second stage's routed topic, markers following; 2 is the second stage (task {@code 2_j}), which writes to
 * the output topic by the second operator's table at each record's point. Each stage also reads and writes
 * its handover topic. The routed and handover topics are named by {@link SwitchTopics}.
 */
public final class SwitchingTwoStageCounts {
    private SwitchingTwoStageCounts() {}

    /** The operator of each sub-topology, for {@link ServerTaskAssignor#OPERATORS_CONFIG}: the source routes none. */
    public static String subtopologyOperators(RoutingConfiguration tables) {
        return ServerTaskAssignor.UNROUTED + "," + String.join(",", tables.topology().operators());
    }

    /**
     * The topology of the job.
     *
     * @param applicationId the application's id: names its routed and handover topics
     * @param inputPartitions the input topic's partition count: how many source tasks send markers
     * @param tables the operators and their instance counts (the same in every version of the schedule)
     * @param maxHold how long a stage may hold a record before its task fails
     */
    public static Topology build(String applicationId, String inputTopic, int inputPartitions, String outputTopic,
            RoutingConfiguration tables, ScheduleFollower schedule, Duration maxHold, ProcessedRecords processed,
            SwitchEvents events) {
        List<String> operators = TwoStageCounts.operators(tables);
        String first = operators.get(0);
        String second = operators.get(1);
        SwitchPlans firstTables = new SwitchPlans(first, schedule);
        SwitchPlans secondTables = new SwitchPlans(second, schedule);
        Topology topology = new Topology();
        topology.addSource("input", new StringDeserializer(), new StringDeserializer(), inputTopic);
        topology.addProcessor("mark-switches", () -> new MarkSwitchPoints<String, String>(schedule, inputPartitions),
                "input");
        topology.addProcessor("route-" + first, () -> new RouteByPoint<String, String, String>(firstTables,
                (key, value) -> key), "mark-switches");
        topology.addSink("to-" + first, SwitchTopics.routed(applicationId, first), new StringSerializer(),
                new StringSerializer(), new HeaderPartitioner<String, String>(), "route-" + first);

        Stages stages = new Stages(topology, applicationId, maxHold, processed, events);
        stages.add(firstTables, tables.table(first).numInstances(), "route-" + second, true);
        topology.addProcessor("route-" + second, () -> new RouteByPoint<String, String, String>(secondTables,
                (key, value) -> TwoStageCounts.field(value, second)), first);
        topology.addSink("to-" + second, SwitchTopics.routed(applicationId, second), new StringSerializer(),
                new StringSerializer(), new HeaderPartitioner<String, String>(), "route-" + second);

        stages.add(secondTables, tables.table(second).numInstances(), "route-output", false);
        topology.addProcessor("route-output", () -> new RouteByPoint<String, String, String>(secondTables,
                (key, value) -> key), second);
        topology.addSink("output", outputTopic, new StringSerializer(), new StringSerializer(),
                new HeaderPartitioner<String, String>(), "route-output");
        return topology;
    }

    /** Adds switching stages: the sources of a stage's two topics, the stage, and its handover sink. */
    private record Stages(Topology topology, String applicationId, Duration maxHold, ProcessedRecords processed,
            SwitchEvents events) {
        void add(SwitchPlans tables, int instances, String next, boolean propagatesMarkers) {
            String operator = tables.operator();
            String routed = operator + "-routed";
            String handover = operator + "-handover";
            topology.addSource(routed, new StringDeserializer(), new StringDeserializer(),
                    SwitchTopics.routed(applicationId, operator));
            topology.addSource(handover, new ByteArrayDeserializer(), new ByteArrayDeserializer(),
                    SwitchTopics.handover(applicationId, operator));
            SwitchingCountByKey.Stage<String, String> stage = new SwitchingCountByKey.Stage<>(Serdes.String(),
                    Serdes.String(), instances, next, "to-" + handover, propagatesMarkers, maxHold, processed, events);
            topology.addProcessor(operator, SwitchingCountByKey.supplier(tables, stage), routed, handover);
            topology.addSink("to-" + handover, SwitchTopics.handover(applicationId, operator),
                    new ByteArraySerializer(), new ByteArraySerializer(), new HeaderPartitioner<byte[], byte[]>(),
                    operator);
        }
    }
}
