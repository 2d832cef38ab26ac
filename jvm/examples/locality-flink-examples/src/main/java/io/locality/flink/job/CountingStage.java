package io.locality.flink.job;

import io.locality.flink.RealKeyedProcessFunction;
import org.apache.flink.api.common.accumulators.ListAccumulator;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.util.Collector;

/**
 * A stateful operator of the two-stage job: counts the records of each real key (its state, in the
 * {@code MapState} of {@link RealKeyedProcessFunction}) and records on each record its subtask and that
 * count.
 *
 * <p>Each subtask reports where it runs ({@link Placement}, accumulator {@value #PLACEMENTS}); the second
 * operator also counts every hop from the first one's subtask to its own ({@link HopCounts}, accumulator
 * {@value #HOPS}). Both are read from the job's result: they are what the running job observed.
 */
public final class CountingStage extends RealKeyedProcessFunction<String, TraceRecord, Long, TraceRecord> {
    private static final long serialVersionUID = 1L;
    /** The accumulator of every subtask's {@link Placement}. */
    public static final String PLACEMENTS = "locality-placements";
    /** The accumulator of the {@link HopCounts} between the two operators. */
    public static final String HOPS = "locality-hops";

    // the stage's name, position and parallelism, not the stage: its key selector carries the routes, and
    // a function holding it would put one more copy of them in the job graph
    private final String operator;
    private final int position;
    private final int parallelism;
    private final int upstreamParallelism;
    private transient int subtask;
    private transient HopCounts hops;

    /**
     * @param upstreamParallelism the first operator's parallelism (read by the second operator's hop counts)
     */
    public CountingStage(Stage stage, int upstreamParallelism) {
        super(stage.uid(), Stage.realKey(stage.position()), Types.STRING, Types.LONG);
        this.operator = stage.operator();
        this.position = stage.position();
        this.parallelism = stage.parallelism();
        this.upstreamParallelism = upstreamParallelism;
    }

    @Override
    public void open(OpenContext openContext) throws Exception {
        super.open(openContext);
        subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        ListAccumulator<Placement> placements = new ListAccumulator<>();
        placements.add(Placement.of(operator, getRuntimeContext()));
        getRuntimeContext().addAccumulator(PLACEMENTS, placements);
        if (position == 1) {
            hops = new HopCounts(upstreamParallelism, parallelism);
            getRuntimeContext().addAccumulator(HOPS, hops);
        }
    }

    @Override
    protected Long process(String key, Long count, TraceRecord record, Context ctx, Collector<TraceRecord> out) {
        long seen = count == null ? 1 : count + 1;
        if (position == 0) {
            record.firstSubtask = subtask;
            record.firstCount = seen;
        } else {
            record.secondSubtask = subtask;
            record.secondCount = seen;
            hops.count(record.firstSubtask, subtask);
        }
        out.collect(record);
        return seen;
    }
}
