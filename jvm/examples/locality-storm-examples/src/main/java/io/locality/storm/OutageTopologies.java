package io.locality.storm;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.apache.storm.Config;
import org.apache.storm.DaemonConfig;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.metricstore.NoOpMetricStore;
import org.apache.storm.topology.TopologyBuilder;

/**
 * Topologies deployed on a {@link LocalCluster} before and during an outage of their store, for the test that
 * stops the store's server ({@code tests/storm/test_storm_outage.py}).
 *
 * <p>{@code OutageTopologies RECORDS OUT STORE FIRST SECOND PARALLELISM RATE PINNED}, each topology a spout of
 * the records, a bolt counting by {@code FIRST} and one counting by {@code SECOND} that logs every tuple
 * ({@code OUT/NAME/routes/task-N.jsonl}), both grouped by {@link LocalityGrouping} on {@code STORE}:
 *
 * <ol>
 *   <li>{@code steady}, on the store's current version, its spout at {@code RATE} records per second so that it
 *       still streams while the store is down; once its last bolt logged a tuple, {@code OUT/control/steady-running}
 *       tells the test to stop the store;
 *   <li>once the test wrote {@code OUT/control/store-down}: {@code redeployed}, on the current version again,
 *       which this JVM read for {@code steady}: it starts on that version without reading the store; and
 *       {@code pinned}, on version {@code PINNED}, which this JVM never loaded: it waits for the store and starts
 *       once the test brings it back.
 * </ol>
 *
 * <p>Every half second {@code OUT/progress.jsonl} gets a line with the time and the tuples each topology logged;
 * {@code OUT/summary.json} holds when each was submitted, logged its first tuple and its last. Exit status 0 when
 * every topology logged every record in time, 1 otherwise (2 for bad arguments).
 */
public final class OutageTopologies {
    private static final long TIMEOUT_MS = 360_000;
    /** How long a grouping prepared during the outage waits for the store (the outage lasts about 30 s). */
    private static final Duration STORE_WAIT = Duration.ofSeconds(90);
    private static final List<String> NAMES = List.of("steady", "redeployed", "pinned");

    private OutageTopologies() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println("usage: OutageTopologies RECORDS OUT STORE FIRST SECOND PARALLELISM RATE PINNED");
            System.exit(2);
        }
        Path records = Path.of(args[0]);
        Path out = Path.of(args[1]);
        String store = args[2];
        String first = args[3];
        String second = args[4];
        int parallelism = Integer.parseInt(args[5]);
        double rate = Double.parseDouble(args[6]);
        long pinned = Long.parseLong(args[7]);
        Path control = Files.createDirectories(out.resolve("control"));
        long expected;
        try (Stream<String> lines = Files.lines(records)) {
            expected = lines.count();
        }
        Map<String, Path> routes = new LinkedHashMap<>();
        for (String name : NAMES) {
            routes.put(name, Files.createDirectories(out.resolve(name).resolve("routes")));
        }
        Map<String, ObjectNode> summary = new LinkedHashMap<>();
        ObjectMapper json = new ObjectMapper();
        NAMES.forEach(name -> summary.put(name, json.createObjectNode()));
        boolean done;
        try (LocalCluster cluster = new LocalCluster.Builder()
                .withSupervisors(NAMES.size())
                .withPortsPerSupervisor(1)
                .withDaemonConf(DaemonConfig.NIMBUS_TASK_TIMEOUT_SECS, 300)
                .withDaemonConf(Config.SUPERVISOR_WORKER_TIMEOUT_SECS, 300)
                .withDaemonConf(DaemonConfig.STORM_METRIC_STORE_CLASS, NoOpMetricStore.class.getName())
                .build();
                Writer progress = Files.newBufferedWriter(out.resolve("progress.jsonl"), StandardCharsets.UTF_8)) {
            long started = System.currentTimeMillis();
            Chain chain = new Chain(records, store, parallelism, first, second);
            submit(cluster, "steady", chain.build(routes.get("steady"), rate, grouping -> grouping), summary);
            boolean submittedRest = false;
            while (true) {
                long now = System.currentTimeMillis();
                Map<String, Long> logged = new LinkedHashMap<>();
                ObjectNode line = json.createObjectNode().put("at_ms", now);
                for (String name : NAMES) {
                    long lines = KeyedChainTopology.countLines(routes.get(name));
                    logged.put(name, lines);
                    line.put(name, lines);
                    ObjectNode times = summary.get(name);
                    if (lines > 0 && !times.has("first_tuple_ms")) {
                        times.put("first_tuple_ms", now);
                    }
                    if (lines >= expected && !times.has("done_ms")) {
                        times.put("done_ms", now);
                    }
                }
                progress.write(json.writeValueAsString(line) + "\n");
                progress.flush();
                if (logged.get("steady") > 0 && !Files.exists(control.resolve("steady-running"))) {
                    Files.writeString(control.resolve("steady-running"), Long.toString(now));
                }
                if (!submittedRest && Files.exists(control.resolve("store-down"))) {
                    submit(cluster, "redeployed", chain.build(routes.get("redeployed"), 0, grouping -> grouping),
                            summary);
                    submit(cluster, "pinned", chain.build(routes.get("pinned"), 0, grouping -> grouping.atVersion(pinned)),
                            summary);
                    submittedRest = true;
                }
                done = summary.values().stream().allMatch(times -> times.has("done_ms"));
                if (done || now - started > TIMEOUT_MS) {
                    break;
                }
                Thread.sleep(500);
            }
            json.writerWithDefaultPrettyPrinter().writeValue(out.resolve("summary.json").toFile(), summary);
        }
        System.exit(done ? 0 : 1); // LocalCluster leaves non-daemon threads behind
    }

    private static void submit(LocalCluster cluster, String name, StormTopology topology, Map<String, ObjectNode> summary)
            throws Exception {
        Config conf = new Config();
        conf.setNumWorkers(1);
        conf.setNumAckers(0); // tuples are not anchored: no acker tasks beside the bolts'
        cluster.submitTopology(name, conf, topology);
        summary.get(name).put("submitted_ms", System.currentTimeMillis());
    }

    /** The topology's shape: a spout of the records, a bolt counting by the first key, one by the second. */
    private record Chain(Path records, String store, int parallelism, String first, String second) {
        /**
         * The chain whose last bolt logs to {@code routes}, its spout at {@code rate} records per second (0: at
         * once), each bolt grouped by the locality grouping of its operator as {@code pinning} makes it (the
         * same, or pinned to a version), waiting for the store at most {@link #STORE_WAIT}.
         */
        StormTopology build(Path routes, double rate, UnaryOperator<LocalityGrouping> pinning) {
            List<String> spoutFields = List.of("seq", first, second);
            KeyCountBolt firstBolt = new KeyCountBolt(spoutFields, first);
            TopologyBuilder builder = new TopologyBuilder();
            builder.setSpout("records", new RecordSpout(records.toString(), spoutFields, rate), 1);
            builder.setBolt("count-" + first, firstBolt, parallelism).customGrouping("records",
                    pinning.apply(new LocalityGrouping(store, first, first).waitingForStore(STORE_WAIT)));
            builder.setBolt("count-" + second, new RouteLogBolt(firstBolt.outputFields(), second, routes.toString()),
                    parallelism).customGrouping("count-" + first,
                            pinning.apply(new LocalityGrouping(store, second, second).waitingForStore(STORE_WAIT)));
            return builder.createTopology();
        }
    }
}
