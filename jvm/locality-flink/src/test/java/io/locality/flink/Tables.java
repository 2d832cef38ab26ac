package io.locality.flink;

import io.locality.routing.RoutingConfiguration;

/** Routing configurations for the tests, parsed from the JSON document a store version holds. */
public final class Tables {
    private Tables() {}

    /**
     * Two operators, {@code user} (Long keys) and {@code tag} (String keys), 3 subtasks each on 3 servers,
     * {@code flink} fallbacks with 16 key groups (uneven ranges: 6, 5, 5); {@code tag} splits {@code hot}.
     */
    public static final String FLINK = """
            {"fallbacks": {"user": {"engine": "flink", "n_instances": 3,
                                    "parameters": {"max_parallelism": 16, "int_type": "long"}},
                           "tag": {"engine": "flink", "n_instances": 3,
                                   "parameters": {"max_parallelism": 16, "int_type": "long"}}},
             "format_version": 2, "parameters": {},
             "splits": {"tag": [["hot", [2, 0, 1]]]},
             "tables": {"tag": [["jobs", 2], ["tbt", 0], ["paris", 1], ["hot", 1], ["é🙂", 2]],
                        "user": [[42, 2], [-7, 0], [9000000000, 1]]},
             "topology": {"servers": ["s0", "s1", "s2"], "capacities": {"s0": 1.0, "s1": 1.0, "s2": 1.0},
                          "operators": ["user", "tag"],
                          "placement": {"user": ["s0", "s1", "s2"], "tag": ["s0", "s1", "s2"]}}}
            """;

    /** {@code json} as a configuration (version 1). */
    public static RoutingConfiguration parse(String json) {
        return RoutingConfiguration.fromJson(1, json); // text: the same method in the drop-in jar
    }

    /** {@link #FLINK} with every {@code from} replaced by {@code to}. */
    public static RoutingConfiguration flinkWith(String from, String to) {
        return parse(FLINK.replace(from, to));
    }
}
