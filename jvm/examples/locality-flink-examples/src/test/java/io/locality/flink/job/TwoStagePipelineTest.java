package io.locality.flink.job;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.flink.FlinkRoutingKeys;
import io.locality.flink.Tables;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.PojoTypeInfo;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The two-stage pipeline on a Flink MiniCluster (one TaskManager, 3 slots): records of table keys reach
 * the subtasks the tables name, other keys Flink's own subtask, each real key keeps its own count in the
 * MapState although table keys share surrogates, and the job's hop counts are the records' hops.
 */
class TwoStagePipelineTest {
    private static final int PARALLELISM = 3;

    @RegisterExtension
    static final MiniClusterExtension MINI_CLUSTER = new MiniClusterExtension(
            new MiniClusterResourceConfiguration.Builder().setNumberTaskManagers(1)
                    .setNumberSlotsPerTaskManager(PARALLELISM).build());

    /** Both operators keyed by strings: the test tables' {@code tag} table, also used for the locations. */
    private static final RoutingConfiguration TABLES = Tables.parse(Tables.FLINK
            .replace("\"splits\": {\"tag\": [[\"hot\", [2, 0, 1]]]},", "")
            .replace("[[42, 2], [-7, 0], [9000000000, 1]]", "[[\"rome\", 0], [\"oslo\", 0], [\"lima\", 0], [\"kyiv\", 2]]")
            .replace("\"user\"", "\"location\""));

    @Test
    void recordsGoWhereTheTablesSayAndEachRealKeyKeepsItsState() throws Exception {
        List<TraceRecord> input = new ArrayList<>();
        String[] locations = {"rome", "oslo", "lima", "kyiv", "bern", "nice", "graz"};
        String[] tags = {"jobs", "tbt", "paris", "hot", "é🙂", "cats", "dogs", "news"};
        for (long seq = 0; seq < 400; seq++) {
            input.add(new TraceRecord(seq, locations[(int) (seq * 7 % locations.length)], tags[(int) (seq * seq % tags.length)]));
        }
        TwoStagePipeline pipeline = new TwoStagePipeline(stage("location", 0), stage("tag", 1));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(PARALLELISM);
        List<TraceRecord> out = new ArrayList<>();
        JobExecutionResult result;
        try (CloseableIterator<TraceRecord> collected = pipeline.apply(env.fromData(input)).collectAsync()) {
            result = env.execute("pipeline test");
            collected.forEachRemaining(out::add);
        }
        assertEquals(input.size(), out.size());

        Map<String, List<Long>> counts = new HashMap<>();
        long[] hops = new long[PARALLELISM * PARALLELISM];
        for (TraceRecord record : out) {
            assertEquals(TABLES.route("location", record.first), record.firstSubtask, record.first);
            assertEquals(TABLES.route("tag", record.second), record.secondSubtask, record.second);
            counts.computeIfAbsent("location/" + record.first, k -> new ArrayList<>()).add(record.firstCount);
            counts.computeIfAbsent("tag/" + record.second, k -> new ArrayList<>()).add(record.secondCount);
            hops[record.firstSubtask * PARALLELISM + record.secondSubtask]++;
        }
        counts.forEach((key, seen) -> {
            seen.sort(null);
            for (int i = 0; i < seen.size(); i++) {
                assertEquals(i + 1, seen.get(i), key + " counts 1..n in its own MapState entry");
            }
        });

        JobSummary summary = JobSummary.of(pipeline, result);
        assertEquals(input.size(), summary.records());
        assertArrayEquals(hops, summary.hops(), "the job's hop counts are the records' hops");
        for (String operator : List.of("location", "tag")) {
            Set<String> slots = new HashSet<>();
            summary.placements().stream().filter(p -> p.operator().equals(operator)).forEach(p -> slots.add(p.slot()));
            assertEquals(PARALLELISM, slots.size(), operator + "'s subtasks ran in distinct slots");
        }
    }

    @Test
    void recordsTravelAsPojosNotGenericKryoObjects() {
        assertInstanceOf(PojoTypeInfo.class, TypeInformation.of(TraceRecord.class));
    }

    @Test
    void tableKeysOfOneSubtaskShareSurrogatesSoTheMapStateMatters() {
        FlinkRoutingKeys locations = FlinkRoutingKeys.of(TABLES.table("location"));
        Set<Object> surrogates = new HashSet<>(locations.routes().values());
        assertTrue(surrogates.size() < locations.routes().size(), "three keys on subtask 0's key groups share one");
    }

    private static Stage stage(String operator, int position) {
        RoutingTable table = TABLES.table(operator);
        return Stage.of(table, position, Mode.TABLES, null, null);
    }
}
