package io.locality.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.routing.RoutingTable;
import java.util.List;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.junit.jupiter.api.Test;

/** The {@code flink} fallback, found through the ServiceLoader, is Flink's own assignment. */
class FlinkKeyGroupsProviderTest {

    @Test
    void keysWithoutAnEntryGoWhereFlinkPutsThem() {
        RoutingTable tags = Tables.parse(Tables.FLINK).table("tag");
        RoutingTable users = Tables.parse(Tables.FLINK).table("user");
        for (String key : List.of("abc", "", "US/Ohio", "中文", "x".repeat(300))) {
            assertEquals(KeyGroupRangeAssignment.assignKeyToParallelOperator(key, 16, 3), tags.route(key), key);
        }
        for (long key = -1000; key < 1000; key += 7) {
            assertEquals(KeyGroupRangeAssignment.assignKeyToParallelOperator(key, 16, 3), users.route(key));
        }
        assertEquals(2, tags.route("jobs"), "an entry wins over the hash");
    }

    @Test
    void anIntTableHashesIntegersAndItsDefaultMaxParallelismIsFlinks() {
        RoutingTable users = Tables.flinkWith("\"max_parallelism\": 16, \"int_type\": \"long\"", "\"int_type\": \"int\"")
                .table("user");
        assertEquals(128, FlinkKeyGroupsProvider.maxParallelism(users.fallbackSpec()));
        int differ = 0;
        for (int key = -500; key < 500; key++) {
            int instance = users.fallback().instanceOf(key);
            assertEquals(KeyGroupRangeAssignment.assignKeyToParallelOperator(key, 128, 3), instance);
            differ += instance != KeyGroupRangeAssignment.assignKeyToParallelOperator((long) key, 128, 3) ? 1 : 0;
        }
        assertTrue(differ > 0, "Integer and Long keys hash differently, so the key's type matters");
    }

    @Test
    void aMaxParallelismBelowTheParallelismIsRefused() {
        RoutingTable tags = Tables.flinkWith("\"max_parallelism\": 16", "\"max_parallelism\": 2").table("tag");
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> tags.route("abc"));
        assertTrue(refused.getMessage().contains("max_parallelism 2"), refused.getMessage());
    }

    @Test
    void pyflinkTablesHaveNoJavaFallback() {
        RoutingTable tags = Tables.flinkWith("\"flink\"", "\"pyflink\"").table("tag");
        IllegalStateException refused = assertThrows(IllegalStateException.class, () -> tags.route("abc"));
        assertTrue(refused.getMessage().contains("no fallback hash for engine 'pyflink'"), refused.getMessage());
    }
}
