package io.locality.flink.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The routing key of a record for one keyed operator: a table key's surrogate (so Flink's own key-group
 * assignment sends it to the subtask the table names), every other key itself (Flink's hash, the tables'
 * {@code flink} fallback). Without a table every key is itself: hash routing.
 *
 * <p>The table is the JSON-lines file of {@code locality.engines.flink.write_routing_file}: a header,
 * then one {@code {"key": ..., "surrogate": ...}} line per table key (docs/engines/flink.md).
 */
public final class RoutingKeys implements KeySelector<Tuple3<String, String, byte[]>, String> {
    private static final long serialVersionUID = 1L;

    private final int field;
    private final HashMap<String, String> surrogates;

    private RoutingKeys(int field, HashMap<String, String> surrogates) {
        this.field = field;
        this.surrogates = surrogates;
    }

    /** Hash routing on field {@code field} (0: the first operator's key, 1: the second's). */
    public static RoutingKeys hash(int field) {
        return new RoutingKeys(field, new HashMap<>());
    }

    /**
     * The table in {@code file} on field {@code field}.
     *
     * @throws IllegalArgumentException the file is not a {@code flink} table of string keys for
     *     {@code maxParallelism} key groups and {@code parallelism} subtasks (the message names the file)
     */
    public static RoutingKeys fromFile(Path file, int field, int maxParallelism, int parallelism) throws IOException {
        ObjectMapper json = new ObjectMapper();
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        if (lines.isEmpty()) {
            throw new IllegalArgumentException("routing file " + file + " is empty");
        }
        JsonNode header = json.readTree(lines.get(0));
        check(file, header, "format", "locality-flink-routing");
        check(file, header, "engine", "flink");
        check(file, header, "key_type", "string");
        check(file, header, "max_parallelism", Integer.toString(maxParallelism));
        check(file, header, "parallelism", Integer.toString(parallelism));
        HashMap<String, String> surrogates = new HashMap<>();
        for (String line : lines.subList(1, lines.size())) {
            JsonNode entry = json.readTree(line);
            surrogates.put(entry.get("key").asText(), entry.get("surrogate").asText());
        }
        return new RoutingKeys(field, surrogates);
    }

    private static void check(Path file, JsonNode header, String name, String expected) {
        JsonNode value = header.get(name);
        if (value == null || !value.asText().equals(expected)) {
            throw new IllegalArgumentException("routing file " + file + ": header '" + name + "' is " + value
                    + ", the job needs " + expected);
        }
    }

    /** Table keys (0 for hash routing). */
    public int entries() {
        return surrogates.size();
    }

    @Override
    public String getKey(Tuple3<String, String, byte[]> record) {
        String key = record.getField(field);
        return surrogates.getOrDefault(key, key);
    }

    /** The table itself, for tests. */
    Map<String, String> surrogates() {
        return Map.copyOf(surrogates);
    }
}
