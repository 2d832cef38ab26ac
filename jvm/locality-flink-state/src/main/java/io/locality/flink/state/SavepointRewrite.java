package io.locality.flink.state;

import io.locality.flink.FlinkRoutingKeys;
import io.locality.flink.KeyType;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.TupleTypeInfo;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.OperatorTransformation;
import org.apache.flink.state.api.SavepointReader;
import org.apache.flink.state.api.SavepointWriter;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Rewrites a savepoint of a job keyed by the tables of one version so that a job on another version
 * restores every real key's state where its records will now go.
 *
 * <p>A job keyed by {@code RoutingKeySelector} keeps each real key's state in the {@code MapState} of its
 * routing key (a table key's surrogate, any other key itself), and the routing key's key group decides
 * the subtask. A new version changes the routing key of the keys its migration plan moves (and of the
 * keys whose entry it drops because Flink's hash puts them there anyway). For each keyed operator named
 * ({@link RealKeyOperator}), the rewrite reads every {@code (routing key, real key, state)} of the savepoint
 * with Flink's State Processor API ({@code SavepointReader.readKeyedState}), checks that the routing key is
 * the old version's for that key, gives the entry the new version's routing key ({@link Rekey}), and
 * writes the operator's state anew keyed by it ({@code SavepointWriter} with a
 * {@code KeyedStateBootstrapFunction}). Every other operator (the sources' positions, sinks, stateless
 * and other stateful operators) is kept as it is: {@code SavepointWriter.fromExistingSavepoint} carries
 * its state over untouched.
 *
 * <p>Not supported (refused with a message): split keys (a split key's partial states would have to be
 * combined), timers, other keyed state in the same operator, a change of parallelism or max parallelism
 * between the versions (a redeployment: restart on the new version without state, or rescale first).
 */
public final class SavepointRewrite {
    private static final Logger LOG = LoggerFactory.getLogger(SavepointRewrite.class);

    private final RoutingConfiguration from;
    private final RoutingConfiguration to;
    private final List<Step> steps;

    /** One operator: its state and the routes that keyed it before and key it after. */
    private record Step(RealKeyOperator operator, FlinkRoutingKeys before, FlinkRoutingKeys after) {}

    private SavepointRewrite(RoutingConfiguration from, RoutingConfiguration to, List<Step> steps) {
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
        List<Step> steps = new ArrayList<>();
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
            Step step = new Step(operator, FlinkRoutingKeys.of(before, keyType), FlinkRoutingKeys.of(after, keyType));
            if (step.before.parallelism() != step.after.parallelism()
                    || step.before.maxParallelism() != step.after.maxParallelism()) {
                throw new IllegalArgumentException("the tables of '" + operator.operator() + "' are for parallelism "
                        + step.before.parallelism() + " / max parallelism " + step.before.maxParallelism()
                        + " in version " + from.version() + " but " + step.after.parallelism() + " / "
                        + step.after.maxParallelism() + " in version " + to.version()
                        + ": that is a redeployment, not a switch");
            }
            steps.add(step);
        }
        return new SavepointRewrite(from, to, steps);
    }

    /** The parallelism of the keyed operators (the largest, when they differ): the rewrite's own default. */
    public int parallelism() {
        return steps.stream().mapToInt(step -> step.after.parallelism()).max().orElseThrow();
    }

    /** The operators (store names) the rewrite covers, in the order given. */
    public List<String> operators() {
        return steps.stream().map(step -> step.operator().operator()).toList();
    }

    /**
     * Adds the rewrite of {@code savepoint} into {@code output} to {@code env}: {@code env.execute()} then
     * writes the new savepoint (its {@code _metadata} last, so a failed run leaves no restorable savepoint).
     * The keyed state is read and written in {@code backend}, or, when null, in the one {@code env} is
     * configured with.
     *
     * @throws IllegalArgumentException when the savepoint is unreadable, lacks an operator, holds it at
     *     another parallelism or max parallelism than the tables, or holds other keyed state
     */
    public void addTo(StreamExecutionEnvironment env, String savepoint, String output, StateBackend backend)
            throws IOException {
        SavepointOperators operators = SavepointOperators.load(savepoint);
        SavepointReader reader = backend == null ? SavepointReader.read(env, savepoint)
                : SavepointReader.read(env, savepoint, backend);
        SavepointWriter writer = backend == null ? SavepointWriter.fromExistingSavepoint(env, savepoint)
                : SavepointWriter.fromExistingSavepoint(env, savepoint, backend);
        for (Step step : steps) {
            RealKeyOperator operator = step.operator();
            OperatorState state = operators.operator(operator.uid());
            if (state.getMaxParallelism() != step.before.maxParallelism()
                    || state.getParallelism() != step.before.parallelism()) {
                throw new IllegalArgumentException("operator '" + operator.uid() + "' ran at parallelism "
                        + state.getParallelism() + " / max parallelism " + state.getMaxParallelism() + " in "
                        + savepoint + " but the tables of '" + operator.operator() + "' are for "
                        + step.before.parallelism() + " / " + step.before.maxParallelism());
            }
            if (!SavepointOperators.hasKeyedState(state)) {
                LOG.info("operator '{}' holds no keyed state in {}: kept as it is", operator.uid(), savepoint);
                continue;
            }
            operators.checkOnlyState(operator.uid(), operator.stateName());
            rewrite(step, reader, writer, operators.checkpointId());
        }
        writer.write(output);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private void rewrite(Step step, SavepointReader reader, SavepointWriter writer, long checkpointId)
            throws IOException {
        RealKeyOperator operator = step.operator();
        OperatorIdentifier id = OperatorIdentifier.forUid(operator.uid());
        TypeInformation key = TypeInformation.of(step.before.keyType().javaClass());
        TypeInformation value = operator.valueType();
        TypeInformation<Tuple3> entry = new TupleTypeInfo<>(key, key, value);
        DataStream<Tuple3> read = reader.readKeyedState(id,
                new RealKeyStateReader(operator.uid(), operator.stateName(), key, value), key, entry);
        DataStream<Tuple3> rekeyed = read.map(new Rekey(operator.operator(), from.version(), step.before,
                step.after, key, value)).returns(entry).name("rekey " + operator.operator());
        var bootstrap = OperatorTransformation.bootstrapWith(rekeyed, checkpointId)
                .setMaxParallelism(step.after.maxParallelism())
                .keyBy(e -> e.f0, key)
                .transform(new RealKeyStateWriter(operator.stateName(), key, value));
        writer.removeOperator(id).withOperator(id, bootstrap);
    }
}
