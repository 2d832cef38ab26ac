package io.locality.flink.job;

import io.locality.flink.KeyPairSketcher;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.streaming.api.datastream.DataStream;

/**
 * The job's logic: records keyed by the first operator's key, counted, then keyed by the second
 * operator's key, counted ({@link CountingStage}), each keyed operator with its own parallelism and max
 * parallelism (Flink's key groups are an operator's, so the tables hold whatever the job's default).
 * With a sketcher, the records pass through it between the two, chained to the first operator (uid
 * {@code sketch-FIRST-SECOND}).
 *
 * @param first the first keyed operator
 * @param second the second keyed operator
 * @param sketcher the {@link KeyPairSketcher} between them; null for none
 */
public record TwoStagePipeline(Stage first, Stage second, KeyPairSketcher<TraceRecord> sketcher) {

    /** The pipeline without a sketcher. */
    public TwoStagePipeline(Stage first, Stage second) {
        this(first, second, null);
    }

    /** The records after both operators, each carrying the subtasks that processed it. */
    public DataStream<TraceRecord> apply(DataStream<TraceRecord> records) {
        TypeInformation<TraceRecord> type = TypeInformation.of(TraceRecord.class);
        DataStream<TraceRecord> counted = records.keyBy(first.key())
                .process(new CountingStage(first, first.parallelism()), type)
                .name("count per " + first.operator())
                .uid(first.uid())
                .setParallelism(first.parallelism())
                .setMaxParallelism(first.maxParallelism());
        if (sketcher != null) {
            counted = counted.map(sketcher, type)
                    .name("sketch " + first.operator() + " -> " + second.operator())
                    .uid("sketch-" + first.operator() + "-" + second.operator())
                    .setParallelism(first.parallelism())
                    .setMaxParallelism(first.maxParallelism());
        }
        return counted.keyBy(second.key())
                .process(new CountingStage(second, first.parallelism()), type)
                .name("count per " + second.operator())
                .uid(second.uid())
                .setParallelism(second.parallelism())
                .setMaxParallelism(second.maxParallelism());
    }
}
