import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.functions.python.KeyByKeySelector;
import org.apache.flink.types.Row;

/**
 * Checks locality's Flink routing files against Flink's own key-group assignment.
 *
 * <p>Each argument is a JSON-lines file in the format of locality's {@code write_routing_file}: a
 * header (engine, key_type, max_parallelism, parallelism), then one object per line with the routing
 * key in {@code surrogate} (or, for a key that keeps its own value, in {@code key}) and where locality
 * says Flink puts it ({@code subtask}, {@code key_group}). The routing key is typed as the header
 * says (String, Long, Integer); for engine {@code pyflink} it first goes through flink-python's own
 * {@link KeyByKeySelector}, as PyFlink's key_by does. Prints one JSON line per file: lines checked,
 * lines where {@link KeyGroupRangeAssignment} agrees (key group, subtask, and the key group inside the
 * subtask's range), and the first disagreement.
 */
public final class SurrogateHarness {

    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        KeyByKeySelector pyflinkKeyBy = new KeyByKeySelector();
        for (String file : args) {
            List<String> lines = Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8);
            JsonNode header = json.readTree(lines.get(0));
            int maxParallelism = header.get("max_parallelism").asInt();
            int parallelism = header.get("parallelism").asInt();
            boolean pyflink = header.get("engine").asText().equals("pyflink");
            String keyType = header.get("key_type").asText();
            long checked = 0;
            long agree = 0;
            String firstMismatch = null;
            for (String line : lines.subList(1, lines.size())) {
                if (line.isEmpty()) {
                    continue;
                }
                JsonNode entry = json.readTree(line);
                JsonNode routing = entry.has("surrogate") ? entry.get("surrogate") : entry.get("key");
                Object value = switch (keyType) {
                    case "string" -> routing.asText();
                    case "long" -> Long.valueOf(routing.asLong());
                    case "int" -> Integer.valueOf(routing.asInt());
                    default -> throw new IllegalArgumentException(file + ": key_type " + keyType);
                };
                Object key = pyflink ? pyflinkKeyBy.getKey(Row.of(value, "record")) : value;
                int group = KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
                int subtask = KeyGroupRangeAssignment.assignKeyToParallelOperator(key, maxParallelism, parallelism);
                boolean inRange = KeyGroupRangeAssignment
                        .computeKeyGroupRangeForOperatorIndex(maxParallelism, parallelism, subtask)
                        .contains(group);
                checked++;
                if (inRange && group == entry.get("key_group").asInt() && subtask == entry.get("subtask").asInt()) {
                    agree++;
                } else if (firstMismatch == null) {
                    firstMismatch = line + " -> Flink: key group " + group + ", subtask " + subtask;
                }
            }
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("file", file);
            result.put("checked", checked);
            result.put("agree", agree);
            result.put("first_mismatch", firstMismatch);
            System.out.println(json.writeValueAsString(result));
        }
    }
}
