package io.locality.kafka;

import java.time.Duration;
import java.util.Set;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorSupplier;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.StoreBuilder;

/**
 * A {@link KeyPairSketcher} that works in every other phase of {@code phase} of wall-clock time, aligned on the
 * epoch (the even phases), and forwards records untouched in the others: how the testbed measures what the sketcher
 * costs an application ({@code benchmarks/bench_testbed_kafka.py}), the same application with and without it
 * alternating every few seconds.
 *
 * <p>Two applications measured apart, or side by side, differ by more than the 5% to be told apart (the same job's
 * throughput varies 2x between runs on the shared testbed machine, two identical jobs at once differed by up to 52%:
 * each one's code is compiled anew by the JIT). Phases of one application share its compiled code, its tasks and the
 * machine's slow minutes; its throughput in the phases with the sketcher over the adjacent phases without is the
 * cost. Each task's sketcher is initialized and closed as the task is, whatever the phase; its punctuator ends its
 * intervals in every phase (an interval of the phases without publishes nothing). The phase of a record is read on
 * the stream thread's clock ({@code currentSystemTimeMs()}), as the sketcher reads it.
 *
 * @param <K> the key type of the stream between the stages
 * @param <V> the value type
 */
public final class PhasedSketcher<K, V> implements FixedKeyProcessorSupplier<K, V, V> {
    private final FixedKeyProcessorSupplier<K, V, V> sketcher;
    private final long phaseMillis;

    /**
     * {@code sketcher} working in the even phases of {@code phase} only.
     *
     * @throws IllegalArgumentException when {@code phase} is shorter than a millisecond
     */
    public PhasedSketcher(KeyPairSketcher<K, V> sketcher, Duration phase) {
        this(sketcher, phase.toMillis());
    }

    /** Any processor of {@code sketcher} in the even phases of {@code phaseMillis} ms (for the tests). */
    PhasedSketcher(FixedKeyProcessorSupplier<K, V, V> sketcher, long phaseMillis) {
        if (phaseMillis < 1) {
            throw new IllegalArgumentException("the phases of a PhasedSketcher must last 1 ms or more; got "
                    + phaseMillis + " ms");
        }
        this.sketcher = sketcher;
        this.phaseMillis = phaseMillis;
    }

    /** The length of a phase, in ms. */
    public long phaseMillis() {
        return phaseMillis;
    }

    /** Whether the sketcher works at {@code epochMillis}: in the even phases since the epoch. */
    boolean works(long epochMillis) {
        return Math.floorDiv(epochMillis, phaseMillis) % 2 == 0;
    }

    @Override
    public FixedKeyProcessor<K, V, V> get() {
        FixedKeyProcessor<K, V, V> sketching = sketcher.get();
        return new FixedKeyProcessor<>() {
            private FixedKeyProcessorContext<K, V> context;

            @Override
            public void init(FixedKeyProcessorContext<K, V> taskContext) {
                context = taskContext;
                sketching.init(taskContext);
            }

            @Override
            public void process(FixedKeyRecord<K, V> record) {
                if (works(context.currentSystemTimeMs())) {
                    sketching.process(record);
                } else {
                    context.forward(record);
                }
            }

            @Override
            public void close() {
                sketching.close();
            }
        };
    }

    @Override
    public Set<StoreBuilder<?>> stores() {
        return sketcher.stores();
    }
}
