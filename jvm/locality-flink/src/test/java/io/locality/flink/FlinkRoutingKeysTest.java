package io.locality.flink;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.util.Map;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.junit.jupiter.api.Test;

/** Routing keys of a table: a table key's surrogate lands on its subtask, every other key is itself. */
class FlinkRoutingKeysTest {
    private final RoutingConfiguration tables = Tables.parse(Tables.FLINK);

    @Test
    void everyTableKeyIsKeyedOnASurrogateOfItsSubtasksOwnKeyGroupSlot() {
        for (RoutingTable table : tables.tables().values()) {
            FlinkRoutingKeys routes = FlinkRoutingKeys.of(table);
            for (Map.Entry<Object, Integer> entry : table.entries().entrySet()) {
                Object routingKey = routes.routingKey(entry.getKey());
                int subtask = entry.getValue();
                assertEquals(subtask, KeyGroupRangeAssignment.assignKeyToParallelOperator(routingKey, 16, 3));
                KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(16, 3, subtask);
                int own = KeyGroupRangeAssignment.assignToKeyGroup(entry.getKey(), 16);
                assertEquals(range.getStartKeyGroup() + own % range.getNumberOfKeyGroups(),
                        KeyGroupRangeAssignment.assignToKeyGroup(routingKey, 16), "the key's slot among its groups");
                assertTrue(routes.keyType().isReserved(routingKey));
            }
        }
    }

    @Test
    void otherKeysAreThemselvesAndBadKeysAreRefused() {
        FlinkRoutingKeys tags = FlinkRoutingKeys.of(tables.table("tag"));
        FlinkRoutingKeys users = FlinkRoutingKeys.of(tables.table("user"));
        String other = "not in the table";
        assertSame(other, tags.routingKey(other));
        assertEquals(5L, users.routingKey(5L));
        assertEquals(KeyType.LONG, users.keyType());
        assertThrows(IllegalArgumentException.class, () -> tags.routingKey("\u0000locality:3"));
        assertThrows(IllegalArgumentException.class, () -> users.routingKey(Long.MIN_VALUE + 5));
        IllegalArgumentException wrongType = assertThrows(IllegalArgumentException.class, () -> users.routingKey(5));
        assertTrue(wrongType.getMessage().contains("Java Long values; got Integer"), wrongType.getMessage());
    }

    @Test
    void aSplitKeyGoesToItsPartOnTheSelectingServer() {
        FlinkRoutingKeys tags = FlinkRoutingKeys.of(tables.table("tag"));
        int[] plan = {2, 0, 1};
        assertTrue(tags.isSplit("hot"));
        for (int server = 0; server < plan.length; server++) {
            Object part = tags.routingKey("hot", server);
            assertEquals(plan[server], KeyGroupRangeAssignment.assignKeyToParallelOperator(part, 16, 3));
            // "hot" has an entry, so every part (its home subtask's too) is a surrogate
            assertEquals(tags.surrogateOf("hot", plan[server]), part);
        }
        assertEquals(tags.routingKey("hot"), tags.routingKey("hot", 2), "home: the entry's subtask 1");
        assertThrows(IllegalArgumentException.class, () -> tags.routingKey("hot", 3));
        assertEquals(tags.routingKey("paris"), tags.routingKey("paris", 0), "a key not split ignores the server");
    }

    @Test
    void aSplitKeyWithoutAnEntryKeepsItsOwnValueOnItsHashSubtask() {
        int home = KeyGroupRangeAssignment.assignKeyToParallelOperator("cold", 16, 3);
        String plan = "[" + home + ", " + (home + 1) % 3 + ", " + home + "]";
        FlinkRoutingKeys tags = FlinkRoutingKeys.of(
                Tables.flinkWith("[\"hot\", [2, 0, 1]]", "[\"cold\", " + plan + "]").table("tag"));
        assertEquals("cold", tags.routingKey("cold", 0));
        assertEquals("cold", tags.routingKey("cold", 2));
        assertNotEquals("cold", tags.routingKey("cold", 1));
        assertEquals((home + 1) % 3, KeyGroupRangeAssignment.assignKeyToParallelOperator(tags.routingKey("cold", 1), 16, 3));
    }

    @Test
    void integerJobsGetIntegerSurrogates() {
        RoutingTable users = Tables.flinkWith("\"int_type\": \"long\"", "\"int_type\": \"int\"").table("user");
        IllegalArgumentException tooBig = assertThrows(IllegalArgumentException.class, () -> FlinkRoutingKeys.of(users));
        assertTrue(tooBig.getMessage().contains("9000000000"), tooBig.getMessage());
        RoutingTable small = Tables.parse(Tables.FLINK.replace("\"int_type\": \"long\"", "\"int_type\": \"int\"")
                .replace("[9000000000, 1]", "[900, 1]")).table("user");
        FlinkRoutingKeys routes = FlinkRoutingKeys.of(small);
        assertEquals(KeyType.INT, routes.keyType());
        Object routingKey = routes.routingKey(42);
        assertEquals(Integer.class, routingKey.getClass());
        assertEquals(2, KeyGroupRangeAssignment.assignKeyToParallelOperator(routingKey, 16, 3));
        assertThrows(IllegalArgumentException.class, () -> FlinkRoutingKeys.of(small, KeyType.LONG));
    }

    @Test
    void tablesOfOtherEnginesAndReservedKeysAreRefused() {
        IllegalArgumentException pyflink = assertThrows(IllegalArgumentException.class,
                () -> FlinkRoutingKeys.of(Tables.flinkWith("\"flink\"", "\"pyflink\"").table("tag")));
        assertTrue(pyflink.getMessage().contains("--hash flink"), pyflink.getMessage());
        IllegalArgumentException reserved = assertThrows(IllegalArgumentException.class,
                () -> FlinkRoutingKeys.of(Tables.flinkWith("\"tbt\"", "\"\\u0000locality:9\"").table("tag")));
        assertTrue(reserved.getMessage().contains("reserved for Flink surrogates"), reserved.getMessage());
    }

    @Test
    void theRoutesTravelInsideAJobGraphAndEveryTaskOfAJvmSharesOneCopy() throws Exception {
        for (RoutingTable table : tables.tables().values()) {
            FlinkRoutingKeys routes = FlinkRoutingKeys.of(table);
            FlinkRoutingKeys copy = deserialized(serialized(routes));
            assertSame(copy, deserialized(serialized(routes)), table.operator()); // two tasks, one copy
            assertEquals(routes.routes(), copy.routes(), table.operator());
            assertEquals(routes.maxParallelism(), copy.maxParallelism());
            assertEquals(routes.parallelism(), copy.parallelism());
            assertEquals(routes.keyType(), copy.keyType());
            for (Object key : table.splits().keySet()) {
                for (int server = 0; server < 3; server++) {
                    assertEquals(routes.routingKey(key, server), copy.routingKey(key, server));
                }
            }
        }
        FlinkRoutingKeys tags = FlinkRoutingKeys.of(tables.table("tag"));
        for (String key : new String[] {"jobs", "tbt", "paris", "hot", "é🙂", "other"}) {
            assertEquals(tags.routingKey(key), deserialized(serialized(tags)).routingKey(key));
        }
        // other routes are other copies
        FlinkRoutingKeys moved = FlinkRoutingKeys.of(Tables.flinkWith("[\"tbt\", 0]", "[\"tbt\", 1]").table("tag"));
        FlinkRoutingKeys movedCopy = deserialized(serialized(moved));
        assertNotSame(movedCopy, deserialized(serialized(tags)));
        assertEquals(1, movedCopy.subtaskOf(movedCopy.routingKey("tbt")));
    }

    @Test
    void routesReadFromAJobGraphTravelOnAsTheyCame() throws Exception {
        // a JobManager reads a job's routes and writes them again for each task, routing no key itself
        FlinkRoutingKeys routes = FlinkRoutingKeys.of(tables.table("tag"));
        byte[] sent = serialized(routes);
        FlinkRoutingKeys read = deserialized(sent);
        assertArrayEquals(sent, serialized(read));
        assertArrayEquals(routes.image(), FlinkRoutingKeys.fromImage(routes.image()).image());
        FlinkRoutingKeys task = FlinkRoutingKeys.fromImage(read.image());
        assertEquals(routes.routes(), task.routes());
        assertEquals(routes.routingKey("hot", 0), task.routingKey("hot", 0));
    }

    @Test
    void aLargeTableTravelsWholeInFewerBytesThanItsKeys() throws Exception {
        StringBuilder rows = new StringBuilder("[\"" + "long".repeat(50) + "\", 1]");
        long keyBytes = 200;
        for (int i = 0; i < 5000; i++) {
            String key = "#tag-" + i;
            rows.append(", [\"").append(key).append("\", ").append(i % 3).append("]");
            keyBytes += key.length();
        }
        FlinkRoutingKeys routes = FlinkRoutingKeys.of(Tables.flinkWith(
                "[[\"jobs\", 2], [\"tbt\", 0], [\"paris\", 1], [\"hot\", 1], [\"é🙂\", 2]]", "[" + rows + "]")
                .table("tag"));
        byte[] bytes = serialized(routes);
        FlinkRoutingKeys copy = deserialized(bytes);
        assertEquals(routes.routes(), copy.routes());
        assertEquals(5001, copy.routes().size());
        assertEquals(1, copy.subtaskOf(copy.routingKey("long".repeat(50))));
        // a job graph carries the routes once per task configuration: they travel deflated
        assertTrue(bytes.length < keyBytes / 2, bytes.length + " bytes for " + keyBytes + " bytes of keys");
    }

    private static byte[] serialized(Object value) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
            out.writeObject(value);
        }
        return bytes.toByteArray();
    }

    private static FlinkRoutingKeys deserialized(byte[] bytes) throws Exception {
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes))) {
            return (FlinkRoutingKeys) in.readObject();
        }
    }
}
