package io.locality.flink.state;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.flink.FlinkRoutingKeys;
import io.locality.flink.KeyType;
import io.locality.routing.RoutingConfiguration;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.OperatorTransformation;
import org.apache.flink.state.api.SavepointReader;
import org.apache.flink.state.api.SavepointWriter;
import org.apache.flink.state.api.functions.KeyedStateBootstrapFunction;
import org.apache.flink.state.api.functions.StateBootstrapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * A savepoint rewrite on a Flink MiniCluster: a savepoint of a keyed operator ({@code count-per-tag}, its
 * real keys' counts in a {@code MapState} under the routing keys of version 1) beside an operator with
 * operator state ({@code input}), rewritten for version 2: every real key under version 2's routing key with
 * its own count, the other operator's state as it was, the counts of what moved, in savepoints of the heap
 * and the RocksDB backend restored in either; a savepoint not taken on the version given is refused, and so
 * are timers and tables a rewrite cannot serve.
 */
class SavepointRewriteTest {
    private static final int PARALLELISM = 3;
    private static final int MAX_PARALLELISM = 16;
    private static final String UID = "count-per-tag";
    private static final RealKeyOperator TAG = RealKeyOperator.parse("tag=" + UID);
    private static final ObjectMapper JSON = new ObjectMapper();

    @RegisterExtension
    static final MiniClusterExtension MINI_CLUSTER = new MiniClusterExtension(
            new MiniClusterResourceConfiguration.Builder().setNumberTaskManagers(1)
                    .setNumberSlotsPerTaskManager(PARALLELISM).build());

    @TempDir
    static Path dir;

    private static RoutingConfiguration v1;
    private static RoutingConfiguration v2;
    private static final Map<String, Long> COUNTS = new LinkedHashMap<>();
    /** A savepoint of version 1 per state backend that wrote it. */
    private static final Map<String, String> SAVEPOINTS = new HashMap<>();
    private static String savepoint;

    /** Flink's own subtask of a key (the fallback). */
    private static int hash(String key) {
        return KeyGroupRangeAssignment.assignKeyToParallelOperator(key, MAX_PARALLELISM, PARALLELISM);
    }

    private static int other(String key, int shift) {
        return (hash(key) + shift) % PARALLELISM;
    }

    /** A one-operator configuration ({@code tag}, string keys) with these entries, on {@code servers} servers. */
    static RoutingConfiguration tables(int version, Map<String, Integer> entries, int servers, String splits) {
        String rows = entries.entrySet().stream().map(e -> "[\"" + e.getKey() + "\", " + e.getValue() + "]")
                .collect(Collectors.joining(", "));
        List<String> names = new ArrayList<>();
        for (int s = 0; s < servers; s++) {
            names.add("\"s" + s + "\"");
        }
        String json = "{\"fallbacks\": {\"tag\": {\"engine\": \"flink\", \"n_instances\": " + servers
                + ", \"parameters\": {\"max_parallelism\": " + MAX_PARALLELISM + ", \"int_type\": \"long\"}}},"
                + " \"format_version\": 2, \"parameters\": {}, \"splits\": {\"tag\": [" + splits + "]},"
                + " \"tables\": {\"tag\": [" + rows + "]},"
                + " \"topology\": {\"servers\": " + names + ", \"operators\": [\"tag\"],"
                + " \"placement\": {\"tag\": " + names + "}}}";
        try {
            return RoutingConfiguration.fromJson(version, JSON.readTree(json));
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
    }

    @BeforeAll
    static void writeSavepoint() throws Exception {
        // rome moves surrogate to surrogate, oslo stays, lima leaves its entry for its hash subtask, kyiv gets
        // an entry elsewhere, bern gets an entry on its own hash subtask (kept there, under a surrogate)
        v1 = tables(1, Map.of("rome", other("rome", 1), "oslo", other("oslo", 1), "lima", other("lima", 1)),
                PARALLELISM, "");
        v2 = tables(2, Map.of("rome", other("rome", 2), "oslo", other("oslo", 1), "kyiv", other("kyiv", 2),
                "bern", hash("bern")), PARALLELISM, "");
        for (String key : List.of("rome", "oslo", "lima", "kyiv", "bern")) {
            COUNTS.put(key, (long) key.length() * 10);
        }
        for (int i = 0; i < 200; i++) {
            COUNTS.put("k" + i, (long) i + 1);
        }
        for (String backend : List.of("hashmap", "rocksdb")) {
            SAVEPOINTS.put(backend, writeSavepoint(backend, "savepoint-v1-" + backend, new RealKeyStateWriter<>(UID,
                    Types.STRING, Types.LONG)));
        }
        savepoint = SAVEPOINTS.get("hashmap");
    }

    /** A savepoint of {@link #COUNTS} under version 1's routing keys, written in {@code backend} by {@code writer}. */
    private static String writeSavepoint(String backend, String name,
            KeyedStateBootstrapFunction<String, Tuple3<String, String, Long>> writer) throws Exception {
        FlinkRoutingKeys before = FlinkRoutingKeys.of(v1.table("tag"), KeyType.STRING);
        List<Tuple3<String, String, Long>> entries = new ArrayList<>();
        COUNTS.forEach((key, count) -> entries.add(Tuple3.of((String) before.routingKey(key), key, count)));
        StreamExecutionEnvironment env = env(backend);
        var keyed = OperatorTransformation.bootstrapWith(env.fromData(entries)).setMaxParallelism(MAX_PARALLELISM)
                .keyBy(e -> e.f0, Types.STRING)
                .transform(writer);
        var offsets = OperatorTransformation.bootstrapWith(env.fromData(1L, 2L, 3L)).transform(new Offsets());
        String path = dir.resolve(name).toUri().toString();
        SavepointWriter.newSavepoint(env, MAX_PARALLELISM).withOperator(OperatorIdentifier.forUid(UID), keyed)
                .withOperator(OperatorIdentifier.forUid("input"), offsets).write(path);
        env.execute("write a savepoint on version 1 in " + backend);
        return path;
    }

    /** The writer's state, and an event-time timer on each routing key: a rewrite cannot say whose it is. */
    static final class WithTimers extends KeyedStateBootstrapFunction<String, Tuple3<String, String, Long>> {
        private final RealKeyStateWriter<String, Long> state = new RealKeyStateWriter<>(UID, Types.STRING, Types.LONG);

        @Override
        public void open(OpenContext openContext) throws Exception {
            state.setRuntimeContext(getRuntimeContext());
            state.open(openContext);
        }

        @Override
        public void processElement(Tuple3<String, String, Long> entry, Context ctx) throws Exception {
            state.processElement(entry, ctx);
            ctx.timerService().registerEventTimeTimer(entry.f2);
        }
    }

    /** Operator (not keyed) state, as a source keeps its position: it must come through a rewrite as it was. */
    static final class Offsets extends StateBootstrapFunction<Long> {
        private transient ListState<Long> offsets;

        @Override
        public void processElement(Long value, Context ctx) throws Exception {
            offsets.add(value);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) {}

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            offsets = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("offsets", Types.LONG));
        }
    }

    private static StreamExecutionEnvironment env() {
        return env("hashmap");
    }

    /** An environment whose jobs keep (and read) keyed state in {@code backend}. */
    private static StreamExecutionEnvironment env(String backend) {
        Configuration config = new Configuration();
        config.set(StateBackendOptions.STATE_BACKEND, backend);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config);
        env.setParallelism(PARALLELISM);
        return env;
    }

    private static JobExecutionResult rewrite(RoutingConfiguration from, RoutingConfiguration to, String savepoint,
            String output) throws Exception {
        StreamExecutionEnvironment env = env();
        SavepointRewrite.of(from, to, List.of(TAG)).addTo(env, savepoint, output);
        return env.execute("rewrite " + from.version() + " -> " + to.version());
    }

    /** Every real key's line of ReadRealKeyState, by key. */
    private static Map<String, JsonNode> read(String path, String backend) throws Exception {
        StringWriter text = new StringWriter();
        try (PrintWriter out = new PrintWriter(text)) {
            ReadRealKeyState.read(path, List.of(TAG), env(), ReadRealKeyState.stateBackend(backend), out);
        }
        Map<String, JsonNode> byKey = new HashMap<>();
        for (String line : text.toString().split("\n")) {
            JsonNode node = JSON.readTree(line);
            byKey.put(node.get("key").asText(), node);
        }
        return byKey;
    }

    /** A savepoint written in one backend, its rewrite restored in the same or the other. */
    @ParameterizedTest
    @CsvSource({"hashmap, hashmap", "hashmap, rocksdb", "rocksdb, rocksdb", "rocksdb, hashmap"})
    void everyRealKeyJoinsItsNewRoutingKeyWithItsStateAndNothingElseChanges(String writtenIn, String readIn)
            throws Exception {
        String written = SAVEPOINTS.get(writtenIn);
        String output = dir.resolve("savepoint-v2-" + writtenIn + "-" + readIn).toUri().toString();
        JobExecutionResult result = rewrite(v1, v2, written, output);

        FlinkRoutingKeys after = FlinkRoutingKeys.of(v2.table("tag"), KeyType.STRING);
        Map<String, JsonNode> before = read(written, writtenIn);
        Map<String, JsonNode> now = read(output, readIn);
        assertEquals(COUNTS.keySet(), now.keySet());
        Set<String> moved = new HashSet<>();
        for (Map.Entry<String, Long> entry : COUNTS.entrySet()) {
            String key = entry.getKey();
            JsonNode line = now.get(key);
            assertEquals(entry.getValue(), line.get("state").asLong(), key);
            assertEquals(after.routingKey(key), line.get("routing_key").asText(), key);
            assertEquals(v2.route("tag", key), line.get("subtask").asInt(), key);
            assertEquals(v1.route("tag", key), before.get(key).get("subtask").asInt(), key);
            if (v1.route("tag", key) != v2.route("tag", key)) {
                moved.add(key);
            }
        }
        assertEquals(Set.of("rome", "lima", "kyiv"), moved);

        Map<String, Long> counts = RewriteSummary.of(List.of("tag"), result.getAllAccumulatorResults())
                .operators().get("tag");
        assertEquals(COUNTS.size(), counts.get(RewriteSummary.ENTRIES));
        assertEquals(3L, counts.get(RewriteSummary.MOVED));
        assertEquals(1L, counts.get(RewriteSummary.REKEYED)); // bern: same subtask, a surrogate now
        // a String key is a length byte + its chars here, a Long 8 bytes
        long bytes = COUNTS.keySet().stream().mapToLong(key -> 1 + key.length() + 8).sum();
        assertEquals(bytes, counts.get(RewriteSummary.BYTES));
        assertEquals(moved.stream().mapToLong(key -> 1 + key.length() + 8).sum(), counts.get(RewriteSummary.MOVED_BYTES));

        List<Long> offsets = new ArrayList<>();
        try (CloseableIterator<Long> kept = SavepointReader.read(env(readIn), output)
                .readListState(OperatorIdentifier.forUid("input"), "offsets", Types.LONG).executeAndCollect()) {
            kept.forEachRemaining(offsets::add);
        }
        assertEquals(List.of(1L, 2L, 3L), offsets.stream().sorted().toList());
        assertTrue(Files.isDirectory(Path.of(java.net.URI.create(written))), "the old savepoint stays");
    }

    @Test
    void aSavepointRewrittenAgainComesBackToWhereItWas() throws Exception {
        // the rewritten savepoint's subtasks restore from several files each (kept, and parts of moved ones)
        String there = dir.resolve("there").toUri().toString();
        String back = dir.resolve("back").toUri().toString();
        rewrite(v1, v2, savepoint, there);
        rewrite(v2, v1, there, back);
        Map<String, JsonNode> before = read(savepoint, "hashmap");
        Map<String, JsonNode> now = read(back, "rocksdb");
        assertEquals(before.keySet(), now.keySet());
        for (String key : COUNTS.keySet()) {
            assertEquals(before.get(key).toString(), now.get(key).toString(), key);
        }
    }

    /** The first message of {@code failure}'s chain that contains {@code text}, or a failed assertion. */
    private static void assertCauseSays(Exception failure, String text) {
        // Somewhere in the chain: Flink wraps a task's failure in its own exceptions.
        List<String> messages = new ArrayList<>();
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            messages.add(cause.getClass().getName() + ": " + cause.getMessage());
        }
        assertTrue(messages.stream().anyMatch(m -> m.contains(text)), String.join("\n", messages));
    }

    @Test
    void aSavepointNotTakenOnTheVersionGivenIsRefused() throws Exception {
        StreamExecutionEnvironment env = env();
        String output = dir.resolve("refused").toUri().toString();
        SavepointRewrite.of(v2, v1, List.of(TAG)).addTo(env, savepoint, output);
        Exception failure = assertThrows(Exception.class, () -> env.execute("rewrite from the wrong version"));
        assertCauseSays(failure, "the savepoint was not taken by a job on version 2");
        assertFalse(Files.exists(Path.of(java.net.URI.create(output)).resolve("_metadata")), "no restorable savepoint");
    }

    @Test
    void timersAreRefused() throws Exception {
        String timers = writeSavepoint("hashmap", "savepoint-v1-timers", new WithTimers());
        StreamExecutionEnvironment env = env();
        SavepointRewrite.of(v1, v2, List.of(TAG)).addTo(env, timers, dir.resolve("no-timers").toUri().toString());
        Exception failure = assertThrows(Exception.class, () -> env.execute("rewrite a savepoint with timers"));
        assertCauseSays(failure, "operator '" + UID + "' has timers");
    }

    @Test
    void aMissingOperatorOrStateIsNamedBeforeAnythingRuns() {
        var noSuchUid = assertThrows(IllegalArgumentException.class, () -> SavepointRewrite
                .of(v1, v2, List.of(RealKeyOperator.parse("tag=count-per-hashtag"))).addTo(env(), savepoint, "x"));
        assertTrue(noSuchUid.getMessage().contains("has no operator with uid 'count-per-hashtag'"), noSuchUid.getMessage());
        var noSuchState = assertThrows(IllegalArgumentException.class, () -> SavepointRewrite
                .of(v1, v2, List.of(RealKeyOperator.parse("tag=" + UID + ",state=counts"))).addTo(env(), savepoint, "x"));
        assertTrue(noSuchState.getMessage().contains("has no keyed state 'counts'"), noSuchState.getMessage());
        assertTrue(noSuchState.getMessage().contains(UID), noSuchState.getMessage());
    }

    @Test
    void tablesARewriteCannotServeAreRefused() {
        RoutingConfiguration split = tables(3, Map.of("rome", 1), PARALLELISM, "[\"hot\", [0, 1, 2]]");
        var splits = assertThrows(IllegalArgumentException.class, () -> SavepointRewrite.of(v1, split, List.of(TAG)));
        assertTrue(splits.getMessage().contains("splits 1 keys"), splits.getMessage());
        RoutingConfiguration wider = tables(4, Map.of("rome", 3), PARALLELISM + 1, "");
        var rescaled = assertThrows(IllegalArgumentException.class, () -> SavepointRewrite.of(v1, wider, List.of(TAG)));
        assertTrue(rescaled.getMessage().contains("that is a redeployment"), rescaled.getMessage());
    }

    @Test
    void operatorsAreParsedWithTheirDefaults() {
        assertEquals(new RealKeyOperator("tag", UID, UID, null, Types.LONG), TAG);
        RealKeyOperator full = RealKeyOperator.parse("user=counts,state=per-user,key=long,value=string");
        assertEquals(new RealKeyOperator("user", "counts", "per-user", KeyType.LONG, Types.STRING), full);
        for (String bad : List.of("tag", "=uid", "tag=uid,colour=red", "tag=uid,key=double", "tag=uid,value=no.Such")) {
            assertThrows(IllegalArgumentException.class, () -> RealKeyOperator.parse(bad), bad);
        }
        assertFalse(ToolArguments.parse(new String[] {"--operator", "a=b", "--operator", "c=d"}, Set.of(),
                Set.of("--operator"), Set.of()).all("--operator").isEmpty());
        assertThrows(IllegalArgumentException.class, () -> ToolArguments.parse(new String[] {"--to", "1", "--to", "2"},
                Set.of("--to"), Set.of(), Set.of()));
    }

    @Test
    void aStateBackendFlinkDoesNotKnowIsNamed() {
        var unknown = assertThrows(IllegalArgumentException.class, () -> ReadRealKeyState.stateBackend("rocks"));
        assertTrue(unknown.getMessage().startsWith("--state-backend rocks is no state backend"), unknown.getMessage());
    }
}
