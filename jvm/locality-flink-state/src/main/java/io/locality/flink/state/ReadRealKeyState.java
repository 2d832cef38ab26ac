package io.locality.flink.state;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.locality.flink.KeyType;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.typeutils.TupleTypeInfo;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.runtime.state.StateBackendLoader;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.SavepointReader;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.DynamicCodeLoadingException;

/**
 * Lists where each real key's state is in a savepoint of a job keyed by the tables:
 *
 * <pre>
 * ReadRealKeyState --savepoint PATH --operator OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE] [--operator ...]
 *                  [--output FILE] [--state-backend hashmap|rocksdb]
 * </pre>
 *
 * <p>One JSON line per real key: {@code {"operator": "hashtag", "key": "tbt", "state": 12, "routing_key":
 * "\u0000locality:116", "subtask": 1}}, {@code subtask} being the subtask that restores the routing key's
 * key group (Flink's own assignment, with the parallelism and max parallelism the operator ran at), to
 * {@code --output} or stdout. Needs no store: it shows what a savepoint holds, whatever version wrote it.
 * {@code --state-backend} is the backend each subtask's state is restored into to be read (default: Flink's,
 * {@code hashmap}, which holds it on the heap; {@code rocksdb} holds it on disk, for states larger than the
 * heap). Runs on a local MiniCluster, with the file systems of {@code FLINK_CONF_DIR} and {@code FLINK_PLUGINS_DIR}
 * ({@link LocalFileSystems}: a savepoint in S3 through Flink's S3 plugin). Exit status 2 names a wrong option,
 * operator or savepoint.
 */
public final class ReadRealKeyState {
    private ReadRealKeyState() {}

    public static void main(String[] args) throws Exception {
        try {
            ToolArguments options = ToolArguments.parse(args, Set.of("--savepoint", "--output", "--state-backend"),
                    Set.of("--operator"),
                    Set.of("--savepoint", "--operator"));
            List<RealKeyOperator> operators = options.all("--operator").stream().map(RealKeyOperator::parse).toList();
            String output = options.get("--output");
            try (Writer writer = output == null
                    ? new OutputStreamWriter(System.out, StandardCharsets.UTF_8)
                    : Files.newBufferedWriter(Path.of(output), StandardCharsets.UTF_8);
                    PrintWriter lines = new PrintWriter(new BufferedWriter(writer))) {
                StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
                LocalFileSystems.initialize(env);
                String backend = options.get("--state-backend");
                long count = read(options.get("--savepoint"), operators, env, backend == null ? null
                        : stateBackend(backend), lines);
                System.err.printf("locality: %,d real keys with state%n", count);
            }
        } catch (IllegalArgumentException | IOException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(2);
        }
    }

    /**
     * Writes one JSON line per real key of {@code operators} in {@code savepoint}, its state restored into
     * {@code backend} (null: the one {@code env} is configured with); how many.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static long read(String savepoint, List<RealKeyOperator> operators, StreamExecutionEnvironment env,
            StateBackend backend, PrintWriter out) throws Exception {
        SavepointOperators metadata = SavepointOperators.load(savepoint);
        SavepointReader reader = backend == null ? SavepointReader.read(env, savepoint)
                : SavepointReader.read(env, savepoint, backend);
        DataStream<String> lines = null;
        for (RealKeyOperator operator : operators) {
            OperatorState state = metadata.operator(operator.uid());
            if (!SavepointOperators.hasKeyedState(state)) {
                continue;
            }
            KeyType keyType = operator.keyType() == null ? KeyType.STRING : operator.keyType();
            TypeInformation key = TypeInformation.of(keyType.javaClass());
            TypeInformation<Tuple3> entry = new TupleTypeInfo<>(key, key, operator.valueType());
            DataStream<String> these = reader.readKeyedState(OperatorIdentifier.forUid(operator.uid()),
                            new RealKeyStateReader(operator.uid(), operator.stateName(), key, operator.valueType()),
                            key, entry)
                    .map(new AsLine(operator.operator(), state.getMaxParallelism(), state.getParallelism()))
                    .returns(Types.STRING);
            lines = lines == null ? these : lines.union(these);
        }
        if (lines == null) {
            return 0;
        }
        long count = 0;
        try (CloseableIterator<String> collected = lines.executeAndCollect("locality: read real-key state")) {
            while (collected.hasNext()) {
                out.println(collected.next());
                count++;
            }
        }
        return count;
    }

    /** Flink's state backend called {@code name} (Flink's own names). */
    static StateBackend stateBackend(String name) {
        Configuration config = new Configuration();
        config.set(StateBackendOptions.STATE_BACKEND, name);
        try {
            return StateBackendLoader.loadStateBackendFromConfig(config, ReadRealKeyState.class.getClassLoader(),
                    null);
        } catch (IllegalConfigurationException | DynamicCodeLoadingException | IOException e) {
            throw new IllegalArgumentException("--state-backend " + name + " is no state backend Flink can load ("
                    + StateBackendLoader.HASHMAP_STATE_BACKEND_NAME + ", "
                    + StateBackendLoader.ROCKSDB_STATE_BACKEND_NAME + "): " + e.getMessage());
        }
    }

    /** One entry as a JSON line, with the subtask that holds its routing key. */
    private record AsLine(String operator, int maxParallelism, int parallelism)
            implements MapFunction<Tuple3<Object, Object, Object>, String> {
        private static final ObjectMapper JSON = new ObjectMapper();

        @Override
        public String map(Tuple3<Object, Object, Object> entry) throws IOException {
            ObjectNode line = JSON.createObjectNode();
            line.put("operator", operator);
            line.set("key", JSON.valueToTree(entry.f1));
            line.set("state", JSON.valueToTree(entry.f2));
            line.set("routing_key", JSON.valueToTree(entry.f0));
            line.put("subtask", KeyGroupRangeAssignment.assignKeyToParallelOperator(entry.f0, maxParallelism,
                    parallelism));
            return JSON.writeValueAsString(line);
        }
    }
}
