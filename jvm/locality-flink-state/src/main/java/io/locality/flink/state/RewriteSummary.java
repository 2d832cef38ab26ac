package io.locality.flink.state;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What a savepoint rewrite did to each operator, from the counters its job kept (Flink accumulators named
 * {@code locality-rewrite/OPERATOR/FIELD}, so a job run through Flink's REST API reports them too):
 *
 * <ul>
 *   <li>{@value #ENTRIES}: real keys with state (MapState entries read and written back);
 *   <li>{@value #BYTES}: their serialized size (real key + state, as Flink's serializers write them);
 *   <li>{@value #MOVED} / {@value #MOVED_BYTES}: those whose state changed subtask, and their size;
 *   <li>{@value #REKEYED}: those that kept their subtask under another routing key.
 * </ul>
 *
 * @param operators operator -> field -> count
 */
public record RewriteSummary(Map<String, Map<String, Long>> operators) {
    public static final String PREFIX = "locality-rewrite/";
    public static final String ENTRIES = "entries";
    public static final String BYTES = "bytes";
    public static final String MOVED = "moved";
    public static final String MOVED_BYTES = "moved_bytes";
    public static final String REKEYED = "rekeyed";
    private static final List<String> FIELDS = List.of(ENTRIES, BYTES, MOVED, MOVED_BYTES, REKEYED);

    static String accumulator(String operator, String field) {
        return PREFIX + operator + "/" + field;
    }

    /**
     * The summary of a finished rewrite job's accumulators; every operator rewritten appears, with zeros
     * when it held no state.
     */
    public static RewriteSummary of(List<String> rewritten, Map<String, Object> accumulators) {
        Map<String, Map<String, Long>> operators = new TreeMap<>();
        for (String operator : rewritten) {
            Map<String, Long> fields = new TreeMap<>();
            for (String field : FIELDS) {
                Object value = accumulators.get(accumulator(operator, field));
                fields.put(field, value == null ? 0L : ((Number) value).longValue());
            }
            operators.put(operator, fields);
        }
        return new RewriteSummary(operators);
    }

    public ObjectNode toJson(ObjectMapper json) {
        ObjectNode doc = json.createObjectNode();
        operators.forEach((operator, fields) -> {
            ObjectNode node = doc.putObject(operator);
            fields.forEach(node::put);
        });
        return doc;
    }
}
