package io.locality.routing;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Servers, the chain of stateful operators, and the server each operator's instances run on.
 *
 * @param servers server names; a server's position is what split plans are indexed by
 * @param operators operators in pipeline order
 * @param placement per operator, the server of each instance (instance i runs on placement.get(op).get(i))
 */
public record Topology(List<String> servers, List<String> operators, Map<String, List<String>> placement) {

    static Topology fromJson(JsonNode node) {
        List<String> servers = strings(node.path("servers"), "topology.servers");
        List<String> operators = strings(node.path("operators"), "topology.operators");
        Map<String, List<String>> placement = new LinkedHashMap<>();
        for (String operator : operators) {
            List<String> onServers = strings(node.path("placement").path(operator), "topology.placement." + operator);
            for (String server : onServers) {
                if (!servers.contains(server)) {
                    throw new IllegalArgumentException("topology.placement." + operator + " names server '" + server
                            + "', which is not in topology.servers " + servers);
                }
            }
            placement.put(operator, onServers);
        }
        return new Topology(List.copyOf(servers), List.copyOf(operators), Map.copyOf(placement));
    }

    /** Number of instances of {@code operator}. */
    public int numInstances(String operator) {
        return instances(operator).size();
    }

    /** Name of the server instance {@code instance} of {@code operator} runs on. */
    public String serverOf(String operator, int instance) {
        return instances(operator).get(instance);
    }

    /** Position (in {@link #servers()}) of the server instance {@code instance} of {@code operator} runs on. */
    public int serverIndexOf(String operator, int instance) {
        return servers.indexOf(serverOf(operator, instance));
    }

    private List<String> instances(String operator) {
        List<String> instances = placement.get(operator);
        if (instances == null) {
            throw new IllegalArgumentException("unknown operator '" + operator + "'; the topology has " + operators);
        }
        return instances;
    }

    private static List<String> strings(JsonNode node, String field) {
        if (!node.isArray() || node.isEmpty()) {
            throw new IllegalArgumentException(field + " must be a non-empty list of names; got " + node);
        }
        List<String> names = new ArrayList<>(node.size());
        node.forEach(name -> names.add(name.asText()));
        return names;
    }
}
