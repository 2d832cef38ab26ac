package io.locality.flink.job;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.api.common.functions.MapFunction;

/**
 * Reads one input line, a JSON object such as {@code {"seq": 7, "location": "US/Ohio", "hashtag": "tbt"}}:
 * a string field per operator (named as the store's topology names it) and an optional integer
 * {@code seq}; other fields are ignored. A line that is not such an object fails the job with a message
 * naming the field and quoting the line.
 */
public final class ParseRecord implements MapFunction<String, TraceRecord> {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String firstField;
    private final String secondField;

    public ParseRecord(String firstField, String secondField) {
        this.firstField = firstField;
        this.secondField = secondField;
    }

    @Override
    public TraceRecord map(String line) {
        JsonNode node;
        try {
            node = JSON.readTree(line);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("an input line is not JSON: " + quote(line));
        }
        if (node == null || !node.isObject()) {
            throw new IllegalArgumentException("an input line is not a JSON object: " + quote(line));
        }
        JsonNode seq = node.path("seq");
        if (!seq.isMissingNode() && !seq.isNull() && !(seq.isIntegralNumber() && seq.canConvertToLong())) {
            throw new IllegalArgumentException("field 'seq' must be an integer; got " + seq + " in " + quote(line));
        }
        return new TraceRecord(seq.isIntegralNumber() ? seq.asLong() : null, key(node, firstField, line),
                key(node, secondField, line));
    }

    private static String key(JsonNode node, String field, String line) {
        JsonNode key = node.path(field);
        if (!key.isTextual()) {
            throw new IllegalArgumentException((key.isMissingNode() ? "no field '" + field + "'"
                    : "field '" + field + "' must be a string key; got " + key) + " in the input line " + quote(line));
        }
        return key.asText();
    }

    private static String quote(String line) {
        return "'" + (line.length() > 200 ? line.substring(0, 200) + "..." : line) + "'";
    }
}
