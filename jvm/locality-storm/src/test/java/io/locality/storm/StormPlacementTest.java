package io.locality.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.storm.generated.ExecutorInfo;
import org.apache.storm.generated.ExecutorSummary;
import org.apache.storm.generated.TopologyInfo;
import org.junit.jupiter.api.Test;

/** Nimbus's executor summaries become the topology file of {@code locality optimize --topology}. */
class StormPlacementTest {
    private static final Map<String, String> BOLTS = bolts();

    /** Operators in pipeline order, each with the bolt keyed by it. */
    private static Map<String, String> bolts() {
        Map<String, String> bolts = new LinkedHashMap<>();
        bolts.put("location", "count-location");
        bolts.put("hashtag", "count-hashtag");
        return bolts;
    }

    private static TopologyInfo info(List<ExecutorSummary> executors) {
        TopologyInfo info = new TopologyInfo();
        info.set_name("tweets");
        info.set_executors(executors);
        return info;
    }

    private static ExecutorSummary executor(String component, int firstTask, int lastTask, String host, int port) {
        return new ExecutorSummary(new ExecutorInfo(firstTask, lastTask), component, host, port, 10);
    }

    @Test
    void describesEachBoltTaskByIndexOnItsWorker() throws Exception {
        List<ExecutorSummary> executors = new ArrayList<>(List.of(
                executor("records", 7, 7, "b", 6700),
                executor("count-hashtag", 1, 1, "b", 6700),
                executor("count-hashtag", 2, 3, "a", 10240), // an executor running two tasks
                executor("count-location", 6, 6, "a", 6701),
                executor("count-location", 4, 5, "b", 6700),
                executor("__acker", 8, 8, "a", 6701)));
        String expected = """
                {"servers": ["a:6701", "a:10240", "b:6700"], "operators": ["location", "hashtag"],
                 "placement": {"location": ["b:6700", "b:6700", "a:6701"], "hashtag": ["b:6700", "a:10240", "a:10240"]}}
                """;
        ObjectMapper json = new ObjectMapper();
        assertEquals(json.readTree(expected), json.readTree(StormPlacement.describe(info(executors), BOLTS)));
    }

    @Test
    void refusesAMissingBoltAndATaskWithoutWorker() {
        List<ExecutorSummary> executors = List.of(executor("count-location", 1, 1, "a", 6700));
        IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
                () -> StormPlacement.describe(info(executors), BOLTS));
        assertTrue(missing.getMessage().contains("no bolt 'count-hashtag' (operator 'hashtag')"), missing.getMessage());
        assertTrue(missing.getMessage().contains("[count-location]"), missing.getMessage());

        List<ExecutorSummary> waiting = List.of(executor("count-location", 1, 1, "a", 6700),
                executor("count-hashtag", 2, 2, "", 0));
        IllegalStateException unassigned = assertThrows(IllegalStateException.class,
                () -> StormPlacement.describe(info(waiting), BOLTS));
        assertTrue(unassigned.getMessage().contains("task 2 of bolt 'count-hashtag' is not running"),
                unassigned.getMessage());
    }
}
