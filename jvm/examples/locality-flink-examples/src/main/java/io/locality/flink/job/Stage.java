package io.locality.flink.job;

import io.locality.flink.RoutingKeySelector;
import io.locality.routing.RoutingTable;
import java.io.Serializable;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

/**
 * One keyed operator of the two-stage job: its name, parallelism, max parallelism, and what it keys a
 * record on.
 *
 * @param position 0 for the first operator (keyed by {@link TraceRecord#first}), 1 for the second
 * @param key the routing key ({@link Mode#TABLES}) or the raw key ({@link Mode#RAW}) of a record
 */
public record Stage(String operator, int position, int parallelism, int maxParallelism,
        KeySelector<TraceRecord, String> key) implements Serializable {

    /**
     * The operator's uid in the job graph, also the name of its {@code MapState}: {@code count-per-OPERATOR}.
     * A savepoint keeps the operator's state under it, and a rewrite names the operator by it.
     */
    public String uid() {
        return "count-per-" + operator;
    }

    /** The real key of a record at {@code position}. */
    static KeySelector<TraceRecord, String> realKey(int position) {
        return position == 0 ? record -> record.first : record -> record.second;
    }

    /**
     * The stage of {@code table}'s operator.
     *
     * @param parallelism the parallelism asked for, or null for the table's; with {@link Mode#TABLES} it
     *     must be the table's
     * @param maxParallelism likewise (null: the table's {@code max_parallelism}, else Flink's default)
     * @throws IllegalArgumentException naming the option that contradicts the tables
     */
    public static Stage of(RoutingTable table, int position, Mode mode, Integer parallelism, Integer maxParallelism) {
        int tableParallelism = table.numInstances();
        int p = parallelism != null ? parallelism : tableParallelism;
        int tableMax = table.fallbackSpec().intParameter("max_parallelism",
                KeyGroupRangeAssignment.computeDefaultMaxParallelism(p));
        int m = maxParallelism != null ? maxParallelism : tableMax;
        if (mode == Mode.TABLES && (p != tableParallelism || m != tableMax)) {
            throw new IllegalArgumentException("the tables of '" + table.operator() + "' are for parallelism "
                    + tableParallelism + " and max parallelism " + tableMax + "; --parallelism " + p
                    + " and --max-parallelism " + m + " would put their keys elsewhere (learn tables for them, "
                    + "or run --mode raw)");
        }
        if (p < 1 || m < p || m > KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM) {
            throw new IllegalArgumentException("--parallelism " + p + " and --max-parallelism " + m + " must satisfy "
                    + "1 <= parallelism <= max parallelism <= " + KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM);
        }
        KeySelector<TraceRecord, String> key = mode == Mode.TABLES
                ? RoutingKeySelector.of(table, String.class, realKey(position))
                : realKey(position);
        return new Stage(table.operator(), position, p, m, key);
    }
}
