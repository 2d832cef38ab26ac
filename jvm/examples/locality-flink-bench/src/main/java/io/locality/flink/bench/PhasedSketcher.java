package io.locality.flink.bench;

import io.locality.flink.KeyPairSketcher;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;

/**
 * A {@link KeyPairSketcher} that works in every other phase of {@code phaseMillis} of wall-clock time, aligned on
 * the epoch (the even phases), and passes records untouched in the others: how the testbed measures what the
 * sketcher costs a job, the same job with and without it alternating every few seconds.
 *
 * <p>Two jobs measured apart, or side by side on one cluster, differ by more than the 5% to be told apart: two
 * identical replay jobs run at once on the testbed differed by 2-52% in throughput (each job's code is compiled
 * anew by the JIT, the machine is shared). Phases of one job share its compiled code, its slots and the machine's
 * slow minutes; its throughput in the phases with the sketcher over the adjacent phases without is the cost. The
 * phases without still pass through this operator: what a chained pass-through map costs was measured apart
 * (nothing that two runs on a MiniCluster side by side could tell from no operator).
 *
 * @param <T> the record type
 */
final class PhasedSketcher<T> extends RichMapFunction<T, T> {
    private static final long serialVersionUID = 1L;

    private final KeyPairSketcher<T> sketcher;
    private final long phaseMillis;

    PhasedSketcher(KeyPairSketcher<T> sketcher, long phaseMillis) {
        this.sketcher = sketcher;
        this.phaseMillis = phaseMillis;
    }

    @Override
    public void open(OpenContext openContext) throws Exception {
        sketcher.setRuntimeContext(getRuntimeContext());
        sketcher.open(openContext);
    }

    @Override
    public T map(T record) throws Exception {
        return System.currentTimeMillis() / phaseMillis % 2 == 0 ? sketcher.map(record) : record;
    }

    @Override
    public void close() throws Exception {
        sketcher.close();
    }
}
