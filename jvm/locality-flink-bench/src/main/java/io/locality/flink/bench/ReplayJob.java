package io.locality.flink.bench;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamUtils;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * The testbed's throughput job: a trace replayed at full speed ({@link TraceReplaySource}) through two
 * keyed counting operators ({@link CountPerRealKey}), routed by the tables ({@code --routes-first} and
 * {@code --routes-second}, files of {@code locality.engines.flink.write_routing_file}) or by Flink's hash
 * (neither), into a sink that counts them ({@link CountingSink}, files in {@code --sink-dir}).
 *
 * <pre>
 * flink run -d -c io.locality.flink.bench.ReplayJob locality-flink-bench.jar --trace keys.tsv --padding 4096 \
 *     --parallelism 6 --max-parallelism 128 --sink-dir counts/ [--passes 0] \
 *     [--routes-first a.jsonl --routes-second b.jsonl]
 * </pre>
 *
 * <p>Every operator has the tables' parallelism and max parallelism, and all share one co-location group:
 * subtask i of each runs in the same slot, so instance i of both operators sits on one server, as the
 * tables' topology places them; with one slot per TaskManager, server i is a TaskManager.
 */
public final class ReplayJob {
    /** How often each sink subtask writes its count (the resolution of the measured throughput). */
    static final long SINK_REPORT_MILLIS = 200;

    private ReplayJob() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        Path trace = Path.of(required(options, "trace"));
        int padding = Integer.parseInt(options.getOrDefault("padding", "0"));
        int parallelism = Integer.parseInt(required(options, "parallelism"));
        int maxParallelism = Integer.parseInt(required(options, "max-parallelism"));
        long passes = Long.parseLong(options.getOrDefault("passes", "0"));
        Path sinkDir = Path.of(required(options, "sink-dir"));
        boolean tables = options.containsKey("routes-first");
        if (tables != options.containsKey("routes-second")) {
            throw new IllegalArgumentException("--routes-first and --routes-second go together (tables) or not at all");
        }
        RoutingKeys first = tables
                ? RoutingKeys.fromFile(Path.of(options.get("routes-first")), 0, maxParallelism, parallelism)
                : RoutingKeys.hash(0);
        RoutingKeys second = tables
                ? RoutingKeys.fromFile(Path.of(options.get("routes-second")), 1, maxParallelism, parallelism)
                : RoutingKeys.hash(1);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.getConfig().enableObjectReuse(); // chained operators pass the record on instead of copying its padding
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);
        String together = "server";

        DataStream<Tuple3<String, String, byte[]>> replayed = env.fromSource(
                new TraceReplaySource(trace, first, maxParallelism, parallelism, padding, passes),
                WatermarkStrategy.noWatermarks(), "replay");
        SingleOutputStreamOperator<Tuple3<String, String, byte[]>> firstCounted = DataStreamUtils
                .reinterpretAsKeyedStream(replayed, first, Types.STRING)
                .process(new CountPerRealKey(0), TraceReplaySource.RECORD)
                .name("count first key");
        SingleOutputStreamOperator<Tuple3<String, String, byte[]>> secondCounted = firstCounted
                .keyBy(second, Types.STRING)
                .process(new CountPerRealKey(1), TraceReplaySource.RECORD)
                .name("count second key");
        replayed.getTransformation().setCoLocationGroupKey(together);
        firstCounted.getTransformation().setCoLocationGroupKey(together);
        secondCounted.getTransformation().setCoLocationGroupKey(together);
        secondCounted.sinkTo(new CountingSink<>(sinkDir, SINK_REPORT_MILLIS)).name("sink");
        env.execute("locality testbed replay: " + (tables ? "tables" : "hash") + ", padding " + padding);
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
