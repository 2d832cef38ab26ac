package io.locality.hashing;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The hash a table falls back on for keys without an entry, as the table's header describes it:
 * {@code {"engine": "kafka", "n_instances": 6, "parameters": {"int_type": "long"}}}.
 *
 * @param engine the engine whose own hash places the keys (kafka, flink, storm, ring, ...)
 * @param numInstances the operator's number of instances (partitions, subtasks, tasks)
 * @param parameters the engine's parameters (max_parallelism, int_type, virtual_nodes, ...)
 */
public record FallbackSpec(String engine, int numInstances, JsonNode parameters) {

    /** Parses the {@code fallbacks} entry of {@code operator} in a routing configuration. */
    public static FallbackSpec fromJson(String operator, JsonNode node) {
        if (!node.path("engine").isTextual() || !node.path("n_instances").canConvertToInt()
                || node.path("n_instances").asInt() < 1) {
            throw new IllegalArgumentException("the fallback of operator '" + operator
                    + "' needs an 'engine' and 'n_instances' >= 1; got " + node);
        }
        return new FallbackSpec(node.get("engine").asText(), node.get("n_instances").asInt(), node.path("parameters"));
    }

    /** An integer parameter, or {@code otherwise} when the spec has none. */
    public int intParameter(String name, int otherwise) {
        JsonNode value = parameters.path(name);
        return value.canConvertToInt() ? value.asInt() : otherwise;
    }

    /** Java type of the job's integral keys: {@code "long"} (default) or {@code "int"}. */
    public String intType() {
        return parameters.path("int_type").asText("long");
    }
}
