package io.locality.flink.bench;

import io.locality.flink.JobVersion;
import io.locality.flink.KeyPairSketcher;
import io.locality.flink.RoutingKeySelector;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import io.locality.sketch.SketcherOptions;
import io.locality.store.ConfigStore;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.datastream.DataStreamUtils;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;



/**
 * The testbed's throughput job: a trace replayed at full speed ({@link TraceReplaySource}) through two
 * keyed counting operators ({@link CountPerKey}), keyed by a store's tables (locality-flink's
 * {@link RoutingKeySelector}, tables learned with {@code --hash flink}) or by the raw keys (Flink's
 * hash), into a sink that counts them ({@link CountingSink}, files in {@code --sink-dir}).
 *
 * <pre>
 * flink run -d -c io.locality.flink.bench.ReplayJob locality-flink-bench-0.1.0-job.jar --store STORE \
 *     --mode tables|hash --trace keys.tsv --padding 4096 --sink-dir counts/ [--passes 0] [--version N] \
 *     [--end finish|wait] [--sketches STORE [--sketch-interval SECONDS] [--sketch-capacity COUNTERS] \
 *     [--sketch-updates-per-second N] [--sketch-phases SECONDS]]
 * </pre>
 *
 * <p>{@code STORE} is a directory or an {@code s3://bucket/prefix} URI; after a switch each source subtask
 * reads the old version's tables from it itself, so it must be reachable from every TaskManager.
 *
 * <p>It is switchable ({@code locality switch flink}, docs/engines/flink.md "Switching versions"): it declares
 * its version, its operators have uids ({@value #FIRST_UID}, {@value #SECOND_UID}, each counting in a
 * {@code MapState} named "count"), and its source resumes from a savepoint exactly, on the new version's
 * partition. With {@code --end wait} the source idles after {@code --passes} instead of finishing, so the
 * job's final counts can be saved and read ({@code ReadRealKeyState}).
 *
 * <p>With {@code --sketches}, a {@link KeyPairSketcher} between the two operators (chained to the first, uid
 * {@value #SKETCH_UID}) sketches the records' key pairs and keys and publishes them into that store every
 * {@code --sketch-interval} seconds (default {@value #SKETCH_INTERVAL_SECONDS}), sketches of
 * {@code --sketch-capacity} counters (default {@value #SKETCH_CAPACITY}), sampling a subtask's records above
 * {@code --sketch-updates-per-second} (default the sketcher's, {@value SketcherOptions#DEFAULT_UPDATES_PER_SECOND};
 * {@value SketcherOptions#EVERY_RECORD} for none). With {@code --sketch-phases SECONDS} the sketcher works in every
 * other phase of that many seconds only, aligned on the epoch ({@link PhasedSketcher}): how {@code bench_testbed.py
 * --experiment sketch} measures what it costs the job.
 *
 * <p>Both modes run with the tables' parallelism and max parallelism, so the same servers run the same
 * subtasks. Every operator shares one co-location group: subtask i of each runs in the same slot, so
 * instance i of both operators sits on one server, as the tables' topology places them; with one slot
 * per TaskManager, server i is a TaskManager.
 */
public final class ReplayJob {
    /** How often each sink subtask writes its count (the resolution of the measured throughput). */
    static final long SINK_REPORT_MILLIS = 200;
    /** The uids of the two counting operators (a switch names them; their {@code MapState} is "count"). */
    public static final String FIRST_UID = "count-first";
    public static final String SECOND_UID = "count-second";
    /** The sketcher's uid, and its defaults. */
    public static final String SKETCH_UID = "sketch";
    static final long SKETCH_INTERVAL_SECONDS = 10;
    static final int SKETCH_CAPACITY = 100_000;

    private ReplayJob() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        Path trace = Path.of(required(options, "trace"));
        int padding = Integer.parseInt(options.getOrDefault("padding", "0"));
        long passes = Long.parseLong(options.getOrDefault("passes", "0"));
        String end = options.getOrDefault("end", "finish");
        if (!end.equals("finish") && !end.equals("wait")) {
            throw new IllegalArgumentException("--end is finish or wait, not " + end);
        }
        Path sinkDir = Path.of(required(options, "sink-dir"));
        String mode = required(options, "mode");
        if (!mode.equals("tables") && !mode.equals("hash")) {
            throw new IllegalArgumentException("--mode is tables or hash, not " + mode);
        }
        ConfigStore store = ConfigStore.open(required(options, "store"));
        RoutingConfiguration configuration = options.containsKey("version")
                ? store.load(Long.parseLong(options.get("version"))) : store.load();
        RoutingTable firstTable = configuration.table(configuration.topology().operators().get(0));
        RoutingTable secondTable = configuration.table(configuration.topology().operators().get(1));
        int parallelism = firstTable.numInstances();
        int maxParallelism = firstTable.fallbackSpec().intParameter("max_parallelism",
                KeyGroupRangeAssignment.computeDefaultMaxParallelism(parallelism));
        VersionRoutes routes = VersionRoutes.of(store.uri(), mode);
        KeySelector<Tuple3<String, String, byte[]>, String> first = routes.first(configuration.version());
        KeySelector<Tuple3<String, String, byte[]>, String> second = mode.equals("tables")
                ? RoutingKeySelector.of(secondTable, String.class, new FieldKey(1)) : new FieldKey(1);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.getConfig().enableObjectReuse(); // chained operators pass the record on instead of copying its padding
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);
        JobVersion.declare(env, configuration.version());
        String together = "server";

        SingleOutputStreamOperator<Tuple3<String, String, byte[]>> replayed = env.fromSource(
                new TraceReplaySource(trace, routes, configuration.version(), maxParallelism, parallelism, padding,
                        passes, end.equals("wait")),
                WatermarkStrategy.noWatermarks(), "replay").uid("replay");
        SingleOutputStreamOperator<Tuple3<String, String, byte[]>> firstCounted = DataStreamUtils
                .reinterpretAsKeyedStream(replayed, first, Types.STRING)
                .process(new CountPerKey(0), TraceReplaySource.RECORD)
                .name("count first key").uid(FIRST_UID);
        SingleOutputStreamOperator<Tuple3<String, String, byte[]>> passed = firstCounted;
        if (options.containsKey("sketches")) {
            List<String> operators = configuration.topology().operators();
            KeyPairSketcher<Tuple3<String, String, byte[]>> sketcher = KeyPairSketcher
                    .builder(operators.get(0), new FieldKey(0), operators.get(1), new FieldKey(1))
                    .store(options.get("sketches"))
                    .interval(Duration.ofSeconds(Long.parseLong(
                            options.getOrDefault("sketch-interval", String.valueOf(SKETCH_INTERVAL_SECONDS)))))
                    .capacity(Integer.parseInt(
                            options.getOrDefault("sketch-capacity", String.valueOf(SKETCH_CAPACITY))))
                    .updatesPerSecond(Integer.parseInt(options.getOrDefault("sketch-updates-per-second",
                            String.valueOf(SketcherOptions.DEFAULT_UPDATES_PER_SECOND))))
                    .routing(second, parallelism, maxParallelism)
                    .version(configuration.version())
                    .build();
            long phases = Long.parseLong(options.getOrDefault("sketch-phases", "0")) * 1000;
            passed = firstCounted.map(phases > 0 ? new PhasedSketcher<>(sketcher, phases) : sketcher,
                    TraceReplaySource.RECORD).name("sketch").uid(SKETCH_UID);
            passed.getTransformation().setCoLocationGroupKey(together);
        }
        SingleOutputStreamOperator<Tuple3<String, String, byte[]>> secondCounted = passed
                .keyBy(second, Types.STRING)
                .process(new CountPerKey(1), TraceReplaySource.RECORD)
                .name("count second key").uid(SECOND_UID);
        replayed.getTransformation().setCoLocationGroupKey(together);
        firstCounted.getTransformation().setCoLocationGroupKey(together);
        secondCounted.getTransformation().setCoLocationGroupKey(together);
        secondCounted.sinkTo(new CountingSink<>(sinkDir, SINK_REPORT_MILLIS)).name("sink").uid("sink");
        env.execute("locality testbed replay: " + mode + ", padding " + padding);
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --option value pairs, got " + String.join(" ", args));
            }
            options.put(args[i].substring(2), args[i + 1]);
        }
        return options;
    }

    private static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }
}
