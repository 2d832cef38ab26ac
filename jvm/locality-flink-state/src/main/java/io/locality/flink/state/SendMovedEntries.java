package io.locality.flink.state;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.util.Collector;

/**
 * The rewrite's first step, one {@code (operator, subtask)} at a time: reads the subtask's savepoint file
 * once and sends every entry whose real key gets another routing key, re-keyed, to the subtask that will
 * hold it ({@link WriteSubtasks}), then the positions of those entries in the file to the subtask itself.
 * Entries that keep their routing key are not sent: the subtask's writer copies them from the file, leaving
 * out those positions without decoding any entry.
 *
 * <p>Checks that each entry sits under the routing key the old version gives its real key: otherwise the
 * savepoint was not taken by a job on that version, and it sends a refusal instead, naming the first such
 * key and how many there were (as it does for timers and other keyed state). Counts what moves
 * ({@link RewriteSummary}).
 */
final class SendMovedEntries extends RichFlatMapFunction<Tuple2<Integer, Integer>, MovedEntry> {
    private static final long serialVersionUID = 1L;

    private final String savepoint;
    private final long fromVersion;
    private final List<RewrittenOperator> operators;
    private transient SavepointOperators metadata;
    private transient List<Counters> counters;

    SendMovedEntries(String savepoint, long fromVersion, List<RewrittenOperator> operators) {
        this.savepoint = savepoint;
        this.fromVersion = fromVersion;
        this.operators = List.copyOf(operators);
    }

    @Override
    public void open(OpenContext openContext) {
        metadata = SavepointOperators.load(savepoint);
        counters = new ArrayList<>();
        for (RewrittenOperator operator : operators) {
            counters.add(new Counters(operator.operator().operator()));
        }
    }

    @Override
    public void flatMap(Tuple2<Integer, Integer> task, Collector<MovedEntry> out) throws Exception {
        RewrittenOperator operator = operators.get(task.f0);
        Counters counts = counters.get(task.f0);
        String name = operator.operator().operator();
        int firstTarget = KeyedLayout.target(RewrittenOperator.layouts(operators), task.f0, 0);
        long[] refused = {0};
        String[] first = {null};
        BitSet leftOut = new BitSet();
        int[] position = {0};
        try {
            KeyGroupsStateHandle file = metadata.keyedFile(operator.operator().uid(), task.f1);
            if (file == null) {
                return;
            }
            try (KeyGroupsReader reader = KeyGroupsReader.open(file, getRuntimeContext().getUserCodeClassLoader())) {
                EntryRoutes routes = new EntryRoutes(operator, reader.header(), file.getKeyGroupRange());
                reader.forEach((keyGroup, stateId, key, value) -> {
                    int entry = position[0]++;
                    boolean changes = routes.read(keyGroup, stateId, key);
                    if (!routes.expected().equals(routes.routingKey())) {
                        if (refused[0]++ == 0) {
                            first[0] = "the state of key " + RealKeyStateReader.printable(routes.realKey()) + " of '"
                                    + name + "' is under routing key " + RealKeyStateReader.printable(routes.routingKey())
                                    + ", but version " + fromVersion + " keys it on "
                                    + RealKeyStateReader.printable(routes.expected());
                        }
                        return;
                    }
                    long size = routes.size(value);
                    counts.entries.add(1L);
                    counts.bytes.add(size);
                    if (!changes) {
                        return;
                    }
                    leftOut.set(entry);
                    out.collect(routes.moved(firstTarget, key, value));
                    if (routes.movesSubtask()) {
                        counts.moved.add(1L);
                        counts.movedBytes.add(size);
                    } else {
                        counts.rekeyed.add(1L);
                    }
                });
            }
        } catch (RewriteRefused e) {
            // sent on, not thrown: the last task refuses before any metadata, and a task failing here could
            // race the source's coordinator, whose next event to it may become the job's reported cause
            out.collect(MovedEntry.refusal(e.getMessage()));
            return;
        }
        if (refused[0] > 0) {
            String more = refused[0] > 1 ? " (and " + (refused[0] - 1) + " more keys of this subtask)" : "";
            out.collect(MovedEntry.refusal(first[0] + more + ": the savepoint was not taken by a job on version "
                    + fromVersion));
        } else if (!leftOut.isEmpty()) {
            out.collect(MovedEntry.leftOut(firstTarget + task.f1, leftOut));
        }
    }

    /** One operator's counters ({@link RewriteSummary}), summed over the rewrite's tasks. */
    private final class Counters {
        final LongCounter entries;
        final LongCounter bytes;
        final LongCounter moved;
        final LongCounter movedBytes;
        final LongCounter rekeyed;

        Counters(String operator) {
            entries = counter(operator, RewriteSummary.ENTRIES);
            bytes = counter(operator, RewriteSummary.BYTES);
            moved = counter(operator, RewriteSummary.MOVED);
            movedBytes = counter(operator, RewriteSummary.MOVED_BYTES);
            rekeyed = counter(operator, RewriteSummary.REKEYED);
        }

        private LongCounter counter(String operator, String field) {
            LongCounter counter = new LongCounter();
            getRuntimeContext().addAccumulator(RewriteSummary.accumulator(operator, field), counter);
            return counter;
        }
    }
}
