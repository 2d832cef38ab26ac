package io.locality.kafka;

import io.locality.routing.RoutingConfiguration;
import io.locality.routing.Topology;
import io.locality.store.ConfigStore;
import io.locality.store.LastGoodVersions;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Function;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.streams.errors.TaskAssignmentException;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Places each Kafka Streams task on the application instance that runs on the server its routing tables
 * name (KIP-924's {@code task.assignor.class}, Kafka 3.8+).
 *
 * <p>Locality comes from where instances run: the tables put correlated keys of consecutive stages on
 * instances of one server, so task {@code g_i} (sub-topology {@code g}, partition {@code i}) must run where
 * the topology places instance {@code i} of the operator of sub-topology {@code g}. Kafka Streams' own
 * assignor balances tasks without knowing that, so this assignor replaces it. Each application instance
 * names its server with the client tag {@code client.tag.locality.server} (a server name of the topology,
 * at most 30 characters); the assignor, which runs in the group leader, reads the topology of the store
 * version in force ({@code locality.store}) at every rebalance.
 *
 * <p>Sub-topology {@code g} is the {@code g}-th operator of the topology (pipeline order), or of
 * {@code locality.subtopology.operators} when set (a comma-separated list, one operator per sub-topology,
 * {@code -} for a sub-topology no table routes). Among several instances on one server, and for tasks that
 * have no server (a sub-topology without an operator, or a server none of the instances runs on: it left
 * the group), the instance with the fewest tasks takes the task, so the group keeps working while a server
 * is missing. Standby tasks are not placed.
 *
 * <p>A rebalance never fails for want of the store. When the store cannot be read (its server is down or
 * unreachable, or its current version is damaged), the tasks are placed by the topology of the last version
 * this JVM read from it ({@link LastGoodVersions}); a leader that never read it (it just took over) keeps
 * every task on the instance that ran it before, and gives the others (a new instance's, a departed one's)
 * to the least loaded instances. Either way a warning says why, and the next rebalance reads the store again.
 */
public final class ServerTaskAssignor implements TaskAssignor {
    /**
     * The locality store whose current version places the tasks: a directory or an
     * {@code s3://bucket/prefix} URI ({@link ConfigStore#open(String)}), as the group leader reaches it.
     */
    public static final String STORE_CONFIG = "locality.store";
    /** The operator of each sub-topology, comma-separated; default: the topology's operators in order. */
    public static final String OPERATORS_CONFIG = "locality.subtopology.operators";
    /** The client tag key each application instance sets to the name of its server. */
    public static final String SERVER_TAG = "locality.server";
    /** In {@link #OPERATORS_CONFIG}, a sub-topology that no table routes. */
    public static final String UNROUTED = "-";

    private static final Logger log = LoggerFactory.getLogger(ServerTaskAssignor.class);

    private ConfigStore store;
    private List<String> operators = List.of();

    @Override
    public void configure(Map<String, ?> configs) {
        Object root = configs.get(STORE_CONFIG);
        if (root == null || root.toString().isBlank()) {
            throw new ConfigException(STORE_CONFIG, root, "ServerTaskAssignor needs the locality store (a directory "
                    + "or an s3://bucket/prefix URI)");
        }
        try {
            store = ConfigStore.open(root.toString());
        } catch (IllegalArgumentException e) {
            throw new ConfigException(STORE_CONFIG, root, e.getMessage());
        }
        Object named = configs.get(OPERATORS_CONFIG);
        if (named != null && !named.toString().isBlank()) {
            operators = Arrays.stream(named.toString().split(",")).map(String::strip).toList();
        }
    }

    @Override
    public TaskAssignment assign(ApplicationState state) {
        if (store == null) {
            throw new IllegalStateException("ServerTaskAssignor was not configured: set " + STORE_CONFIG);
        }
        Map<ProcessId, String> servers = new TreeMap<>();
        Map<ProcessId, Set<TaskId>> before = new TreeMap<>();
        for (KafkaStreamsState client : state.kafkaStreamsStates(false).values()) {
            servers.put(client.processId(), client.clientTags().get(SERVER_TAG));
            before.put(client.processId(), client.previousActiveTasks());
        }
        Set<TaskId> tasks = new TreeSet<>(state.allTasks().keySet());
        Optional<Topology> topology = topology();
        Map<ProcessId, Set<TaskId>> placed = topology.isPresent()
                ? place(tasks, servers, task -> serverOf(task, topology.get()))
                : asBefore(tasks, before);
        List<KafkaStreamsAssignment> assignment = new ArrayList<>();
        placed.forEach((client, itsTasks) -> {
            Set<AssignedTask> active = new HashSet<>();
            itsTasks.forEach(task -> active.add(new AssignedTask(task, AssignedTask.Type.ACTIVE)));
            assignment.add(KafkaStreamsAssignment.of(client, active));
        });
        return new TaskAssignment(assignment);
    }

    /**
     * The topology of the store's current version; when the store cannot be read, that of the last version
     * this JVM read from it; empty when it never read one.
     */
    private Optional<Topology> topology() {
        try {
            RoutingConfiguration current = store.load();
            LastGoodVersions.remember(store, current);
            return Optional.of(current.topology());
        } catch (IOException | RuntimeException e) {
            Optional<RoutingConfiguration> kept = LastGoodVersions.latest(store);
            if (kept.isPresent()) {
                log.warn("the locality store {} cannot be read now ({}): the tasks are placed by version {}, the "
                        + "last this instance read", store.uri(), e.getMessage(), kept.get().version());
                return Optional.of(kept.get().topology());
            }
            log.warn("the locality store {} cannot be read now ({}), and this instance never read it: every task "
                    + "stays on the instance that ran it, the others go to the least loaded", store.uri(),
                    e.getMessage());
            return Optional.empty();
        }
    }

    /**
     * Each task on the instance that ran it before, if it is still in the group; the others (tasks of an
     * instance that left, or new ones) on the least loaded instance.
     *
     * @param tasks every task, in order
     * @param before the tasks each instance of the group ran before this rebalance
     */
    static Map<ProcessId, Set<TaskId>> asBefore(Set<TaskId> tasks, Map<ProcessId, ? extends Set<TaskId>> before) {
        Map<ProcessId, Set<TaskId>> placed = new TreeMap<>();
        Map<TaskId, ProcessId> ranIt = new HashMap<>();
        before.forEach((client, ran) -> {
            placed.put(client, new TreeSet<>());
            ran.forEach(task -> ranIt.putIfAbsent(task, client));
        });
        Comparator<ProcessId> leastLoaded = Comparator.<ProcessId>comparingInt(c -> placed.get(c).size())
                .thenComparing(Comparator.naturalOrder());
        List<TaskId> homeless = new ArrayList<>();
        for (TaskId task : tasks) {
            ProcessId owner = ranIt.get(task);
            if (owner != null) {
                placed.get(owner).add(task);
            } else {
                homeless.add(task);
            }
        }
        for (TaskId task : homeless) {
            placed.keySet().stream().min(leastLoaded).ifPresent(client -> placed.get(client).add(task));
        }
        return placed;
    }

    /** The server the topology names for {@code task}, or null when no table routes its sub-topology. */
    String serverOf(TaskId task, Topology topology) {
        List<String> byGroup = operators.isEmpty() ? topology.operators() : operators;
        if (task.subtopology() >= byGroup.size() || UNROUTED.equals(byGroup.get(task.subtopology()))) {
            return null;
        }
        String operator = byGroup.get(task.subtopology());
        int instances = topology.numInstances(operator);
        if (task.partition() >= instances) {
            throw new TaskAssignmentException("task " + task + " reads partition " + task.partition() + " but operator '"
                    + operator + "' has " + instances + " instances: its topics must have " + instances + " partitions");
        }
        return topology.serverOf(operator, task.partition());
    }

    /**
     * Each task on an instance of its server, the least loaded one; tasks without one on the least loaded
     * instance of all.
     *
     * @param tasks every task, in order
     * @param servers the server of each instance (null for an instance that names none)
     * @param serverOf the server of a task, null when it has none
     */
    static Map<ProcessId, Set<TaskId>> place(Set<TaskId> tasks, Map<ProcessId, String> servers,
            Function<TaskId, String> serverOf) {
        Map<ProcessId, Set<TaskId>> placed = new TreeMap<>();
        Map<String, List<ProcessId>> onServer = new HashMap<>();
        servers.forEach((client, server) -> {
            placed.put(client, new TreeSet<>());
            onServer.computeIfAbsent(server, s -> new ArrayList<>()).add(client);
        });
        List<ProcessId> everyone = List.copyOf(placed.keySet());
        Comparator<ProcessId> leastLoaded = Comparator.<ProcessId>comparingInt(c -> placed.get(c).size())
                .thenComparing(Comparator.naturalOrder());
        Map<String, List<TaskId>> homeless = new TreeMap<>();
        for (TaskId task : tasks) {
            String server = serverOf.apply(task);
            List<ProcessId> candidates = server == null ? everyone : onServer.getOrDefault(server, List.of());
            if (candidates.isEmpty() && !everyone.isEmpty()) {
                homeless.computeIfAbsent(server, s -> new ArrayList<>()).add(task);
                candidates = everyone;
            }
            candidates.stream().min(leastLoaded).ifPresent(client -> placed.get(client).add(task));
        }
        homeless.forEach((server, moved) -> log.warn("no application instance runs on server '{}' (client tag "
                + "client.tag.{}): its tasks {} run elsewhere", server, SERVER_TAG, moved));
        return placed;
    }
}
