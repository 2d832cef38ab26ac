package io.locality.flink.job;

import java.util.Arrays;
import org.apache.flink.api.common.accumulators.Accumulator;

/**
 * A Flink accumulator counting the records of each hop between two operators: how many records went
 * from subtask {@code i} of the first to subtask {@code j} of the second.
 *
 * <p>Each subtask of the second operator counts the hops it receives; Flink merges the counts of all
 * subtasks into the job's result. With the {@link Placement}s of both operators' subtasks they give the
 * share of records whose two subtasks ran in the same slot (or on the same TaskManager).
 */
public final class HopCounts implements Accumulator<Integer, long[]> {
    private static final long serialVersionUID = 1L;

    private final int downstream;
    private final long[] counts;

    /** Counts for {@code upstream} x {@code downstream} subtasks. */
    public HopCounts(int upstream, int downstream) {
        this.downstream = downstream;
        this.counts = new long[upstream * downstream];
    }

    /** One record from subtask {@code from} of the first operator to subtask {@code to} of the second. */
    public void count(int from, int to) {
        counts[from * downstream + to]++;
    }

    /** One record in cell {@code from * downstream + to}. */
    @Override
    public void add(Integer cell) {
        counts[cell]++;
    }

    /** Records per hop, row {@code from}, column {@code to}, row-major. */
    @Override
    public long[] getLocalValue() {
        return counts.clone();
    }

    @Override
    public void resetLocal() {
        Arrays.fill(counts, 0);
    }

    @Override
    public void merge(Accumulator<Integer, long[]> other) {
        long[] theirs = other.getLocalValue();
        if (theirs.length != counts.length) {
            throw new IllegalStateException("cannot merge hop counts of " + theirs.length + " hops into "
                    + counts.length);
        }
        for (int cell = 0; cell < counts.length; cell++) {
            counts[cell] += theirs[cell];
        }
    }

    @Override
    public HopCounts clone() {
        HopCounts copy = new HopCounts(counts.length / downstream, downstream);
        System.arraycopy(counts, 0, copy.counts, 0, counts.length);
        return copy;
    }
}
