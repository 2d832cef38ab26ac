package io.locality.flink.job;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * The job's logic: records keyed by the first operator's key, counted, then keyed by the second
 * operator's key, counted ({@link CountingStage}), each keyed operator with its own parallelism and max
 * parallelism (Flink's key groups are an operator's, so the tables hold whatever the job's default).
 *
 * @param first the first keyed operator
 * @param second the second keyed operator
 */
public record TwoStagePipeline(Stage first, Stage second) {

    /** The records after both operators, each carrying the subtasks that processed it. */
    public DataStream<TraceRecord> apply(DataStream<TraceRecord> records) {
        TypeInformation<TraceRecord> type = TypeInformation.of(TraceRecord.class);
        DataStream<TraceRecord> counted = records.keyBy(first.key())
                .process(new CountingStage(first, first.parallelism()), type)
                .name("count per " + first.operator())
                .uid(first.uid())
                .setParallelism(first.parallelism())
                .setMaxParallelism(first.maxParallelism());
        return counted.keyBy(second.key())
                .process(new CountingStage(second, first.parallelism()), type)
                .name("count per " + second.operator())
                .uid(second.uid())
                .setParallelism(second.parallelism())
                .setMaxParallelism(second.maxParallelism());
    }
}
