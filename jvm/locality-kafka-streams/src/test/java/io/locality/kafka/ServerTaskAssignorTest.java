package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.locality.routing.Topology;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.kafka.streams.errors.TaskAssignmentException;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.junit.jupiter.api.Test;

class ServerTaskAssignorTest {
    private static final ProcessId P1 = new ProcessId(new UUID(0, 1));
    private static final ProcessId P2 = new ProcessId(new UUID(0, 2));
    private static final ProcessId P3 = new ProcessId(new UUID(0, 3));
    private static final ProcessId P4 = new ProcessId(new UUID(0, 4));

    private static Set<TaskId> tasks(int subtopologies, int partitions) {
        Set<TaskId> tasks = new TreeSet<>();
        for (int g = 0; g < subtopologies; g++) {
            for (int p = 0; p < partitions; p++) {
                tasks.add(new TaskId(g, p));
            }
        }
        return tasks;
    }

    private static Map<ProcessId, String> servers(Object... pairs) {
        Map<ProcessId, String> servers = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            servers.put((ProcessId) pairs[i], (String) pairs[i + 1]);
        }
        return servers;
    }

    @Test
    void theTasksOfAPartitionRunWhereTheTopologyPlacesItsInstances() throws Exception {
        Topology topology = Tables.twoStages(6, "kafka", "[]").topology();
        ServerTaskAssignor assignor = new ServerTaskAssignor();
        assignor.configure(Map.of(ServerTaskAssignor.STORE_CONFIG, "/unused"));
        Map<ProcessId, Set<TaskId>> placed = ServerTaskAssignor.place(tasks(2, 6), servers(P1, "a", P2, "b", P3, "c"),
                task -> assignor.serverOf(task, topology));
        assertEquals(Set.of(new TaskId(0, 0), new TaskId(0, 3), new TaskId(1, 0), new TaskId(1, 3)), placed.get(P1));
        assertEquals(Set.of(new TaskId(0, 1), new TaskId(0, 4), new TaskId(1, 1), new TaskId(1, 4)), placed.get(P2));
        assertEquals(Set.of(new TaskId(0, 2), new TaskId(0, 5), new TaskId(1, 2), new TaskId(1, 5)), placed.get(P3));
    }

    @Test
    void instancesOfOneServerShareItsTasksAndAMissingServersTasksRunElsewhere() {
        Map<ProcessId, Set<TaskId>> placed = ServerTaskAssignor.place(tasks(1, 6),
                servers(P1, "a", P2, "a", P3, "b", P4, null), task -> task.partition() < 4 ? "a" : "gone");
        assertEquals(Set.of(new TaskId(0, 0), new TaskId(0, 2)), placed.get(P1));
        assertEquals(Set.of(new TaskId(0, 1), new TaskId(0, 3)), placed.get(P2));
        assertEquals(1, placed.get(P3).size());
        assertEquals(1, placed.get(P4).size()); // the least loaded take the tasks of a server none runs on
    }

    @Test
    void subtopologiesFollowTheOperatorsConfiguredAndUnroutedOnesHaveNoServer() throws Exception {
        Topology topology = Tables.twoStages(6, "kafka", "[]").topology();
        ServerTaskAssignor assignor = new ServerTaskAssignor();
        assignor.configure(Map.of(ServerTaskAssignor.STORE_CONFIG, "/unused",
                ServerTaskAssignor.OPERATORS_CONFIG, "-, hashtag"));
        assertNull(assignor.serverOf(new TaskId(0, 1), topology));
        assertEquals("c", assignor.serverOf(new TaskId(1, 5), topology));
        assertNull(assignor.serverOf(new TaskId(2, 0), topology));
        assertThrows(TaskAssignmentException.class, () -> assignor.serverOf(new TaskId(1, 6), topology));
    }
}
