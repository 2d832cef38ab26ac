package io.locality.storm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.storm.Config;
import org.apache.storm.DaemonConfig;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.Nimbus;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.metricstore.NoOpMetricStore;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.tuple.Fields;

/**
 * A Storm topology run on a {@link LocalCluster}: a spout emits a file of records, a bolt keyed by the first
 * key counts them, a bolt keyed by the second key counts them and logs where every tuple went.
 *
 * <p>{@code KeyedChainTopology RECORDS OUT WORKERS PARALLELISM FIRST SECOND [STORE VERSION]}: with
 * {@code STORE} both bolts are grouped by {@link LocalityGrouping} on version {@code VERSION} of that store's
 * tables, without it by Storm's own {@code fieldsGrouping}. The cluster has one supervisor with one worker slot per server. Writes
 * {@code OUT/routes/task-N.jsonl} (one line per tuple) and {@code OUT/placement.json} (where Storm ran each
 * bolt's tasks, by {@link StormPlacement}), then stops the cluster. Exit status 0 when every record
 * reached the last bolt in time, 1 otherwise.
 */
public final class KeyedChainTopology {
    private static final String NAME = "keyed-chain";
    private static final long TIMEOUT_MS = 240_000;

    private KeyedChainTopology() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 6 && args.length != 8) {
            System.err.println("usage: KeyedChainTopology RECORDS OUT WORKERS PARALLELISM FIRST SECOND [STORE VERSION]");
            System.exit(2);
        }
        Path records = Path.of(args[0]);
        Path out = Path.of(args[1]);
        int workers = Integer.parseInt(args[2]);
        int parallelism = Integer.parseInt(args[3]);
        String first = args[4];
        String second = args[5];
        String store = args.length == 8 ? args[6] : null;
        int version = args.length == 8 ? Integer.parseInt(args[7]) : 0;
        Path routes = Files.createDirectories(out.resolve("routes"));
        long expected;
        try (Stream<String> lines = Files.lines(records)) {
            expected = lines.count();
        }

        StormTopology topology = build(records, routes, parallelism, first, second, store, version);
        Config conf = new Config();
        conf.setNumWorkers(workers);
        conf.setNumAckers(0); // tuples are not anchored: no acker tasks beside the bolts'
        boolean done;
        try (LocalCluster cluster = new LocalCluster.Builder()
                .withSupervisors(workers)
                .withPortsPerSupervisor(1)
                // a busy machine must not make Nimbus think a worker died and move its tasks mid-run
                .withDaemonConf(DaemonConfig.NIMBUS_TASK_TIMEOUT_SECS, 300)
                .withDaemonConf(Config.SUPERVISOR_WORKER_TIMEOUT_SECS, 300)
                // Nimbus's metrics are not needed here: no RocksDB (70 MB of native jars, excluded in the pom)
                .withDaemonConf(DaemonConfig.STORM_METRIC_STORE_CLASS, NoOpMetricStore.class.getName())
                .build()) {
            long started = System.nanoTime();
            cluster.submitTopology(NAME, conf, topology);
            done = waitForLines(routes, expected, started);
            Nimbus.Iface nimbus = cluster; // a LocalCluster answers as Nimbus does
            Map<String, String> bolts = new LinkedHashMap<>(); // operator -> the bolt keyed by it, in pipeline order
            bolts.put(first, "count-" + first);
            bolts.put(second, "count-" + second);
            Files.writeString(out.resolve("placement.json"),
                    StormPlacement.describe(nimbus.getTopologyInfoByName(NAME), bolts));
        }
        System.exit(done ? 0 : 1); // LocalCluster leaves non-daemon threads behind
    }

    static StormTopology build(Path records, Path routes, int parallelism, String first, String second, String store,
            int version) {
        List<String> spoutFields = List.of("seq", first, second);
        KeyCountBolt firstBolt = new KeyCountBolt(spoutFields, first);
        List<String> firstFields = firstBolt.outputFields();
        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout("records", new RecordSpout(records.toString(), spoutFields), 1);
        if (store == null) {
            builder.setBolt("count-" + first, firstBolt, parallelism).fieldsGrouping("records", new Fields(first));
            builder.setBolt("count-" + second, new RouteLogBolt(firstFields, second, routes.toString()), parallelism)
                    .fieldsGrouping("count-" + first, new Fields(second));
        } else {
            builder.setBolt("count-" + first, firstBolt, parallelism)
                    .customGrouping("records", new LocalityGrouping(store, first, first).atVersion(version));
            builder.setBolt("count-" + second, new RouteLogBolt(firstFields, second, routes.toString()), parallelism)
                    .customGrouping("count-" + first, new LocalityGrouping(store, second, second).atVersion(version));
        }
        return builder.createTopology();
    }

    /** Waits until the last bolt logged {@code expected} tuples; progress on stderr every 10 s. */
    private static boolean waitForLines(Path routes, long expected, long started) throws IOException, InterruptedException {
        long logged = 0;
        long reported = 0;
        while (true) {
            logged = countLines(routes);
            long elapsedMs = (System.nanoTime() - started) / 1_000_000;
            if (logged >= expected || elapsedMs > TIMEOUT_MS) {
                System.err.printf("%,d of %,d tuples through the topology in %.1f s%n", logged, expected, elapsedMs / 1e3);
                return logged == expected;
            }
            if (elapsedMs - reported >= 10_000) {
                reported = elapsedMs;
                System.err.printf("%,d of %,d tuples after %.0f s%n", logged, expected, elapsedMs / 1e3);
            }
            Thread.sleep(500);
        }
    }

    /** The lines of every file in {@code folder}. */
    static long countLines(Path folder) throws IOException {
        long lines = 0;
        try (Stream<Path> files = Files.list(folder)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                for (byte b : Files.readAllBytes(file)) {
                    lines += b == '\n' ? 1 : 0;
                }
            }
        }
        return lines;
    }
}
