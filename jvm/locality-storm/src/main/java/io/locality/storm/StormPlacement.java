package io.locality.storm;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.storm.generated.ExecutorInfo;
import org.apache.storm.generated.ExecutorSummary;
import org.apache.storm.generated.TopologyInfo;

/**
 * Where Storm runs each task of a topology's keyed bolts, written as the topology file of
 * {@code locality optimize --topology}: the tables are then learned for the placement Storm actually chose.
 *
 * <p>A server is a worker, named {@code host:port} as the Storm UI names it; task {@code i} of a bolt (its
 * {@code i}-th task by id, the index a fields grouping and the tables use) is instance {@code i} of the
 * operator the bolt keys. Read it from Nimbus ({@code getTopologyInfoByName}) once the topology runs, learn the
 * tables for it, and redeploy the topology with {@link LocalityGrouping}; describe it again after the redeployment
 * to check that Storm put the same tasks together (its default scheduler does, for a topology of the same shape
 * on the same cluster; the workers' names may differ).
 */
public final class StormPlacement {
    private static final ObjectMapper JSON = new ObjectMapper();

    private StormPlacement() {}

    /**
     * The topology document ({@code servers}, {@code operators}, {@code placement}) of the bolts named in
     * {@code boltOfOperator}, operators in pipeline order, as the JSON text of the file (a string, not a JSON
     * tree: the drop-in jar's own Jackson is relocated, so no Jackson type crosses its API).
     *
     * @param info what Nimbus reports of the running topology
     * @param boltOfOperator per operator, in pipeline order, the id of the bolt keyed by it
     * @throws IllegalArgumentException when a bolt is not in the topology
     * @throws IllegalStateException when a task is not assigned to a worker yet
     */
    public static String describe(TopologyInfo info, Map<String, String> boltOfOperator) {
        Map<String, TreeMap<Integer, String>> workerOfTask = new TreeMap<>();
        for (ExecutorSummary executor : info.get_executors()) {
            boolean assigned = executor.get_host() != null && !executor.get_host().isEmpty();
            String worker = assigned ? executor.get_host() + ":" + executor.get_port() : null;
            TreeMap<Integer, String> tasks = workerOfTask.computeIfAbsent(executor.get_component_id(), c -> new TreeMap<>());
            ExecutorInfo range = executor.get_executor_info();
            for (int task = range.get_task_start(); task <= range.get_task_end(); task++) {
                tasks.put(task, worker);
            }
        }
        ObjectNode placement = JSON.createObjectNode();
        TreeSet<String> workers = new TreeSet<>(StormPlacement::compareWorkers);
        for (Map.Entry<String, String> operator : boltOfOperator.entrySet()) {
            TreeMap<Integer, String> tasks = workerOfTask.get(operator.getValue());
            if (tasks == null) {
                throw new IllegalArgumentException("the topology " + info.get_name() + " has no bolt '" + operator.getValue()
                        + "' (operator '" + operator.getKey() + "'); its components are " + workerOfTask.keySet());
            }
            ArrayNode servers = placement.putArray(operator.getKey());
            for (Map.Entry<Integer, String> task : tasks.entrySet()) {
                if (task.getValue() == null) {
                    throw new IllegalStateException("task " + task.getKey() + " of bolt '" + operator.getValue()
                            + "' is not running in a worker yet: describe the topology once it runs");
                }
                servers.add(task.getValue());
                workers.add(task.getValue());
            }
        }
        ObjectNode topology = JSON.createObjectNode();
        workers.forEach(topology.putArray("servers")::add);
        boltOfOperator.keySet().forEach(topology.putArray("operators")::add);
        topology.set("placement", placement);
        try {
            return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(topology);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("a topology document could not be written as JSON", e);
        }
    }

    /** Workers by host, then by port as a number (so that 1024 comes before 10240). */
    private static int compareWorkers(String a, String b) {
        int colonA = a.lastIndexOf(':');
        int colonB = b.lastIndexOf(':');
        int byHost = a.substring(0, colonA).compareTo(b.substring(0, colonB));
        return byHost != 0 ? byHost
                : Integer.compare(Integer.parseInt(a.substring(colonA + 1)), Integer.parseInt(b.substring(colonB + 1)));
    }
}
