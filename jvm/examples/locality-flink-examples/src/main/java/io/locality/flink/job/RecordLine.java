package io.locality.flink.job;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.api.common.functions.MapFunction;

/**
 * A record after both operators as one JSON line, fields named after the operators, and the store version
 * whose tables the job ran on:
 * {@code {"seq": 7, "location": "US/Ohio", "location_subtask": 2, "location_count": 5, "hashtag": "tbt",
 * "hashtag_subtask": 4, "hashtag_count": 1, "version": 3}} ({@code seq} only when the input had it).
 */
public final class RecordLine implements MapFunction<TraceRecord, String> {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String firstOperator;
    private final String secondOperator;
    private final long version;

    public RecordLine(String firstOperator, String secondOperator, long version) {
        this.firstOperator = firstOperator;
        this.secondOperator = secondOperator;
        this.version = version;
    }

    @Override
    public String map(TraceRecord record) throws JsonProcessingException {
        ObjectNode line = JSON.createObjectNode();
        if (record.seq != null) {
            line.put("seq", record.seq);
        }
        line.put(firstOperator, record.first);
        line.put(firstOperator + "_subtask", record.firstSubtask);
        line.put(firstOperator + "_count", record.firstCount);
        line.put(secondOperator, record.second);
        line.put(secondOperator + "_subtask", record.secondSubtask);
        line.put(secondOperator + "_count", record.secondCount);
        line.put("version", version);
        return JSON.writeValueAsString(line);
    }
}
