package io.locality.flink.state;

import io.locality.flink.FlinkRoutingKeys;
import io.locality.flink.KeyType;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Rewrites a savepoint of a job keyed by the tables of one version so that a job on another version
 * restores every real key's state where its records will now go.
 *
 * <p>A job keyed by {@code RoutingKeySelector} keeps each real key's state in the {@code MapState} of its
 * routing key (a table key's surrogate, any other key itself), and the routing key's key group decides
 * the subtask. A new version changes the routing key of the keys its migration plan moves (and of the
 * keys whose entry it drops because Flink's hash puts them there anyway). The rewrite is a Flink job on the
 * savepoint's files, in Flink's unified savepoint format, in two steps over the subtasks of each keyed
 * operator named ({@link RealKeyOperator}): each subtask's file is read once, each entry's routing key
 * checked against the old version's, and the entries whose routing key changes are re-keyed and sent to the
 * subtask that will hold them ({@link SendMovedEntries}); then each subtask's new file is its old one with
 * those entries left out and the ones moved to it merged in, every other entry copied byte for byte
 * ({@link WriteSubtasks}). One last task writes the new savepoint's metadata ({@link WriteSavepoint}). No
 * state backend restores or snapshots anything: the job's time follows the savepoint's bytes, not a
 * backend's per-key work, and its tasks spread over the cluster's slots. Every other operator (the sources'
 * positions, sinks, stateless and other stateful operators) is kept as it is, its files copied beside the
 * new savepoint.
 *
 * <p>Not supported (refused with a message): split keys (a split key's partial states would have to be
 * combined), timers, other keyed state in the same operator, raw keyed state, a savepoint in a backend's
 * native format, a change of parallelism or max parallelism between the versions (a redeployment: restart
 * on the new version without state, or rescale first).
 */
public final class SavepointRewrite {
    private static final Logger LOG = LoggerFactory.getLogger(SavepointRewrite.class);

    private final RoutingConfiguration from;
    private final RoutingConfiguration to;
    private final List<RewrittenOperator> steps;

    private SavepointRewrite(RoutingConfiguration from, RoutingConfiguration to, List<RewrittenOperator> steps) {
        this.from = from;
        this.to = to;
        this.steps = steps;
    }

    /**
     * The rewrite of {@code operators} from version {@code from} to version {@code to}.
     *
     * @throws IllegalArgumentException when an operator is not in both versions, its tables do not fall
     *     back to {@code flink}, split keys, or change parallelism or max parallelism
     */
    public static SavepointRewrite of(RoutingConfiguration from, RoutingConfiguration to,
            List<RealKeyOperator> operators) {
        if (operators.isEmpty()) {
            throw new IllegalArgumentException("name at least one keyed operator to rewrite (--operator)");
        }
        List<RewrittenOperator> steps = new ArrayList<>();
        for (RealKeyOperator operator : operators) {
            RoutingTable before = from.table(operator.operator());
            RoutingTable after = to.table(operator.operator());
            KeyType keyType = operator.keyType() != null ? operator.keyType()
                    : KeyType.of(before.entries().isEmpty() && before.splits().isEmpty() ? after : before);
            for (RoutingTable table : List.of(before, after)) {
                if (!table.splits().isEmpty()) {
                    throw new IllegalArgumentException("the table of '" + operator.operator() + "' in one of versions "
                            + from.version() + " and " + to.version() + " splits " + table.splits().size()
                            + " keys; a rewrite cannot combine their partial states");
                }
            }
            RewrittenOperator step = new RewrittenOperator(operator, FlinkRoutingKeys.of(before, keyType), FlinkRoutingKeys.of(after, keyType));
            if (step.before().parallelism() != step.after().parallelism()
                    || step.before().maxParallelism() != step.after().maxParallelism()) {
                throw new IllegalArgumentException("the tables of '" + operator.operator() + "' are for parallelism "
                        + step.before().parallelism() + " / max parallelism " + step.before().maxParallelism()
                        + " in version " + from.version() + " but " + step.after().parallelism() + " / "
                        + step.after().maxParallelism() + " in version " + to.version()
                        + ": that is a redeployment, not a switch");
            }
            steps.add(step);
        }
        return new SavepointRewrite(from, to, steps);
    }

    /** The parallelism of the keyed operators (the largest, when they differ): the rewrite's own default. */
    public int parallelism() {
        return steps.stream().mapToInt(step -> step.after().parallelism()).max().orElseThrow();
    }

    /** The operators (store names) the rewrite covers, in the order given. */
    public List<String> operators() {
        return steps.stream().map(step -> step.operator().operator()).toList();
    }

    /**
     * Adds the rewrite of {@code savepoint} into {@code output} to {@code env}: {@code env.execute()} then
     * writes the new savepoint (its {@code _metadata} last, so a failed run leaves no restorable savepoint),
     * in tasks at the environment's parallelism.
     *
     * @throws IllegalArgumentException when the savepoint is unreadable, lacks an operator, holds it at
     *     another parallelism or max parallelism than the tables, or holds other keyed or raw keyed state
     */
    public void addTo(StreamExecutionEnvironment env, String savepoint, String output) {
        SavepointOperators operators = SavepointOperators.load(savepoint);
        List<Tuple2<Integer, Integer>> tasks = new ArrayList<>();
        for (int index = 0; index < steps.size(); index++) {
            RewrittenOperator step = steps.get(index);
            RealKeyOperator operator = step.operator();
            OperatorState state = operators.operator(operator.uid());
            if (state.getMaxParallelism() != step.before().maxParallelism()
                    || state.getParallelism() != step.before().parallelism()) {
                throw new IllegalArgumentException("operator '" + operator.uid() + "' ran at parallelism "
                        + state.getParallelism() + " / max parallelism " + state.getMaxParallelism() + " in "
                        + savepoint + " but the tables of '" + operator.operator() + "' are for "
                        + step.before().parallelism() + " / " + step.before().maxParallelism());
            }
            if (state.getStates().stream().anyMatch(subtask -> !subtask.getRawKeyedState().isEmpty())) {
                throw new IllegalArgumentException("operator '" + operator.uid() + "' holds raw keyed state in "
                        + savepoint + "; a rewrite cannot tell which real key it belongs to");
            }
            if (SavepointOperators.hasKeyedState(state)) {
                operators.checkOnlyState(operator.uid(), operator.stateName());
            } else {
                LOG.info("operator '{}' holds no keyed state in {}: nothing to move", operator.uid(), savepoint);
            }
            for (int subtask = 0; subtask < state.getParallelism(); subtask++) {
                tasks.add(Tuple2.of(index, subtask));
            }
        }
        TypeInformation<Tuple2<Integer, Integer>> task = Types.TUPLE(Types.INT, Types.INT);
        List<String> uids = steps.stream().map(step -> step.operator().uid()).toList();
        env.fromData(tasks, task).name("subtasks of " + operators()).rebalance()
                .flatMap(new SendMovedEntries(savepoint, from.version(), steps))
                .returns(MovedEntry.class).name("send moved entries")
                .partitionCustom((target, writers) -> target % writers, entry -> entry.target)
                .transform("write subtasks", TypeInformation.of(RewrittenSubtask.class),
                        new WriteSubtasks(savepoint, output, RewrittenOperator.layouts(steps)))
                .transform("write " + output, Types.VOID, new WriteSavepoint(savepoint, output, uids))
                .forceNonParallel()
                .sinkTo(new DiscardingSink<>()).name("done");
    }
}
