package io.locality.kafka;

import io.locality.routing.LocalityStore;
import io.locality.routing.RoutingConfiguration;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.stream.Stream;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;

/**
 * One application instance of {@link TwoStageCounts}, for the server it runs on:
 * {@code java io.locality.kafka.TwoStageCountsApp --bootstrap-servers HOST:PORT --store DIR --server NAME
 * --input TOPIC --output TOPIC [--application-id ID] [--state-dir DIR] [--processed-log FILE]}.
 *
 * <p>Start one instance per server of the tables' topology, each with its own {@code --server}: the
 * {@link ServerTaskAssignor} gives each the tasks of the partitions its server holds. The tables are the
 * store's current version. Each time the instance (re)starts processing it prints the tasks it runs
 * ({@code server s3 runs tasks [0_3, 1_3]}) on stdout; with {@code --processed-log} it writes a line per
 * record each stage counted ({@link ProcessedLog}). It runs until stopped (SIGTERM closes it cleanly).
 * Exit status 2 when an option, the store or the server is wrong (the message names it), 1 when Kafka
 * Streams fails.
 */
public final class TwoStageCountsApp {
    private static final List<String> REQUIRED = List.of("bootstrap-servers", "store", "server", "input", "output");
    private static final List<String> OPTIONAL = List.of("application-id", "state-dir", "processed-log");

    private TwoStageCountsApp() {}

    public static void main(String[] args) throws InterruptedException {
        Map<String, String> options;
        RoutingConfiguration tables;
        ProcessedRecords processed = ProcessedRecords.NONE;
        try {
            options = options(args);
            tables = new LocalityStore(Path.of(options.get("store"))).load();
            String server = options.get("server");
            if (!tables.topology().servers().contains(server)) {
                throw new IllegalArgumentException("--server " + server + " is not a server of the tables (version "
                        + tables.version() + "): " + tables.topology().servers());
            }
            if (options.containsKey("processed-log")) {
                processed = new ProcessedLog(Path.of(options.get("processed-log")), server);
            }
        } catch (IOException | IllegalArgumentException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(2);
            return;
        }
        KafkaStreams streams = new KafkaStreams(
                TwoStageCounts.build(options.get("input"), options.get("output"), () -> tables, processed),
                streamsConfig(options));
        System.exit(run(streams, options.get("server"), processed));
    }

    /**
     * The Kafka Streams settings of the instance on {@code --server}: one stream thread, the server as a
     * client tag, and {@link ServerTaskAssignor} reading {@code --store}.
     */
    static Properties streamsConfig(Map<String, String> options) {
        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, options.getOrDefault("application-id", "locality-two-stage-counts"));
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("bootstrap-servers"));
        config.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        config.put(StreamsConfig.clientTagPrefix(ServerTaskAssignor.SERVER_TAG), options.get("server"));
        config.put(StreamsConfig.TASK_ASSIGNOR_CLASS_CONFIG, ServerTaskAssignor.class.getName());
        config.put(ServerTaskAssignor.STORE_CONFIG, options.get("store"));
        config.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "classic"); // task assignors run in the classic protocol
        if (options.containsKey("state-dir")) {
            config.put(StreamsConfig.STATE_DIR_CONFIG, options.get("state-dir"));
        }
        return config;
    }

    /** Runs {@code streams} until it stops; its exit status. */
    private static int run(KafkaStreams streams, String server, ProcessedRecords processed) throws InterruptedException {
        BlockingQueue<KafkaStreams.State> states = new LinkedBlockingQueue<>();
        streams.setStateListener((now, before) -> states.add(now));
        streams.setUncaughtExceptionHandler(error -> {
            System.err.println("error: Kafka Streams failed on server " + server + ": " + error);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            if (processed instanceof ProcessedLog log) {
                try {
                    log.close();
                } catch (IOException e) {
                    System.err.println("error: " + e.getMessage());
                }
            }
        }));
        streams.start();
        while (true) { // ends when the instance stops: closed (SIGTERM) or failed
            KafkaStreams.State state = states.take();
            if (state == KafkaStreams.State.RUNNING) {
                System.out.println("server " + server + " runs tasks " + activeTasks(streams));
                System.out.flush();
            } else if (state == KafkaStreams.State.ERROR) {
                return 1;
            } else if (state == KafkaStreams.State.NOT_RUNNING) {
                return 0;
            }
        }
    }

    private static List<String> activeTasks(KafkaStreams streams) {
        List<String> tasks = new ArrayList<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            thread.activeTasks().forEach(task -> tasks.add(task.taskId().toString()));
        }
        tasks.sort(null);
        return tasks;
    }

    /** {@code --name value} pairs; every required option present, no unknown one. */
    static Map<String, String> options(String[] args) {
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            String name = args[i].startsWith("--") ? args[i].substring(2) : "";
            if (!REQUIRED.contains(name) && !OPTIONAL.contains(name)) {
                throw new IllegalArgumentException("unknown option '" + args[i] + "'; options: --"
                        + String.join(", --", Stream.concat(REQUIRED.stream(), OPTIONAL.stream()).toList()));
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException("option --" + name + " needs a value");
            }
            options.put(name, args[i + 1]);
        }
        List<String> missing = REQUIRED.stream().filter(name -> !options.containsKey(name)).toList();
        if (!missing.isEmpty()) {
            throw new IllegalArgumentException("missing option(s) --" + String.join(", --", missing));
        }
        return options;
    }
}
