package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.routing.Topology;
import io.locality.store.ConfigStore;
import io.locality.store.LastGoodVersions;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.streams.errors.TaskAssignmentException;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

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

    @Test
    void theStoreIsADirectoryOrAnS3UriAndAnotherSchemeIsAConfigurationError() {
        new ServerTaskAssignor().configure(Map.of(ServerTaskAssignor.STORE_CONFIG, "s3://locality/nightly"));
        ConfigException e = assertThrows(ConfigException.class, () -> new ServerTaskAssignor().configure(
                Map.of(ServerTaskAssignor.STORE_CONFIG, "hdfs://namenode/store")));
        assertTrue(e.getMessage().contains("locality.store") && e.getMessage().contains("s3://"), e.getMessage());
    }

    /** An instance of the group as the assignor sees it: its id, its server tag, the tasks it ran before. */
    private static KafkaStreamsState client(ProcessId id, String server, TaskId... ran) {
        SortedSet<TaskId> before = new TreeSet<>(List.of(ran));
        return (KafkaStreamsState) Proxy.newProxyInstance(KafkaStreamsState.class.getClassLoader(),
                new Class<?>[] {KafkaStreamsState.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "processId" -> id;
                    case "clientTags" -> Map.of(ServerTaskAssignor.SERVER_TAG, server);
                    case "previousActiveTasks" -> before;
                    default -> throw new UnsupportedOperationException(method.getName());
                });
    }

    /** A rebalance of {@code clients} over every task of 2 sub-topologies x 6 partitions. */
    private static ApplicationState rebalance(KafkaStreamsState... clients) {
        Map<ProcessId, KafkaStreamsState> states = new TreeMap<>();
        for (KafkaStreamsState client : clients) {
            states.put(client.processId(), client);
        }
        Map<TaskId, TaskInfo> all = new TreeMap<>();
        tasks(2, 6).forEach(task -> all.put(task, null)); // the assignor reads the tasks' ids only
        return (ApplicationState) Proxy.newProxyInstance(ApplicationState.class.getClassLoader(),
                new Class<?>[] {ApplicationState.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "kafkaStreamsStates" -> states;
                    case "allTasks" -> all;
                    default -> throw new UnsupportedOperationException(method.getName());
                });
    }

    private static Map<ProcessId, Set<TaskId>> active(TaskAssignor.TaskAssignment assignment) {
        Map<ProcessId, Set<TaskId>> active = new TreeMap<>();
        for (KafkaStreamsAssignment client : assignment.assignment()) {
            active.put(client.processId(), new TreeSet<>(client.tasks().keySet()));
        }
        return active;
    }

    private static ServerTaskAssignor assignorOf(String store) {
        ServerTaskAssignor assignor = new ServerTaskAssignor();
        assignor.configure(Map.of(ServerTaskAssignor.STORE_CONFIG, store));
        return assignor;
    }

    @Test
    void aStoreThatCannotBeReadKeepsTheTopologyLastReadInThisJvm(@TempDir Path unreadable) throws Exception {
        String store = unreadable.resolve("gone").toString(); // no such store: it cannot be read
        LastGoodVersions.remember(ConfigStore.open(store), Tables.twoStages(6, "kafka", "[]"));
        // b left the group: its tasks go elsewhere, every other task where the topology places it
        Map<ProcessId, Set<TaskId>> placed = active(assignorOf(store).assign(rebalance(client(P1, "a"),
                client(P3, "c"))));
        assertTrue(placed.get(P1).containsAll(Set.of(new TaskId(0, 0), new TaskId(0, 3), new TaskId(1, 0),
                new TaskId(1, 3))), placed.toString());
        assertTrue(placed.get(P3).containsAll(Set.of(new TaskId(0, 2), new TaskId(0, 5), new TaskId(1, 2),
                new TaskId(1, 5))), placed.toString());
        assertEquals(12, placed.get(P1).size() + placed.get(P3).size());
    }

    @Test
    void aLeaderThatNeverReadTheStoreKeepsEveryTaskWhereItRan(@TempDir Path unreadable) {
        String store = unreadable.resolve("never-read").toString();
        Map<ProcessId, Set<TaskId>> placed = active(assignorOf(store).assign(rebalance(
                client(P1, "a", new TaskId(0, 0), new TaskId(1, 0)),
                client(P2, "b", new TaskId(0, 1), new TaskId(1, 1), new TaskId(0, 4)),
                client(P3, "c"))));
        assertTrue(placed.get(P1).containsAll(Set.of(new TaskId(0, 0), new TaskId(1, 0))), placed.toString());
        assertTrue(placed.get(P2).containsAll(Set.of(new TaskId(0, 1), new TaskId(1, 1), new TaskId(0, 4))),
                placed.toString());
        // the 7 tasks nobody ran go to the least loaded, the new instance first
        assertEquals(List.of(4, 4, 4), List.of(placed.get(P1).size(), placed.get(P2).size(), placed.get(P3).size()));
    }
}
