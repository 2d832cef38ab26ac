package io.locality.kafka;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.locality.kafka.switching.SwitchEventLog;
import io.locality.kafka.switching.SwitchEvents;
import io.locality.routing.RoutingConfiguration;
import io.locality.sketch.SketcherOptions;
import io.locality.store.ConfigStore;
import io.locality.store.ScheduleFollower;
import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.streams.CloseOptions.GroupMembershipOperation;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorSupplier;

/**
 * One application instance of {@link TwoStageCounts}, for the server it runs on:
 * {@code java io.locality.kafka.TwoStageCountsApp --bootstrap-servers HOST:PORT --store STORE --server NAME
 * --input TOPIC --output TOPIC [--application-id ID] [--state-dir DIR] [--processed-log FILE]
 * [--follow-schedule] [--switch-log FILE] [--max-hold-ms MS] [--schedule-wait-ms MS] [--throughput-log FILE]
 * [--sketches STORE [--sketch-interval SECONDS] [--sketch-capacity COUNTERS] [--sketch-updates-per-second N]
 * [--sketch-phases SECONDS]]}.
 *
 * <p>Start one instance per server of the tables' topology, each with its own {@code --server}: the
 * {@link ServerTaskAssignor} gives each the tasks of the partitions its server holds. Without
 * {@code --follow-schedule} the tables are the store's current version ({@link TwoStageCounts}); with it,
 * the job routes every record by the version the store's switch schedule puts in force at its timestamp
 * and hands the state of moved keys over at each switch ({@link SwitchingTwoStageCounts}; it creates its
 * routed and handover topics, {@link SwitchTopics}); a record at or past the schedule's seal waits up to
 * {@code --schedule-wait-ms} (30 s) for the schedule to be extended, a record held for a handover fails
 * the job past {@code --max-hold-ms} (5 min). Each time the instance (re)starts processing it prints the
 * tasks it runs ({@code server s3 runs tasks [0_3, 1_3]}) on stdout; with {@code --processed-log} it
 * writes a line per record each stage counted ({@link ProcessedLog}), with {@code --switch-log} a line per
 * switch event ({@link SwitchEventLog}), with {@code --throughput-log} the records the second stage counted so far,
 * every {@value #THROUGHPUT_LOG_MILLIS} ms: the file is replaced by one line {@code <epoch ms> <records>}
 * ({@link ThroughputLog}). It runs until stopped (SIGTERM closes it cleanly, and it leaves the
 * group, so that the other instances take its tasks at once). With {@code --sketches STORE} a
 * {@link KeyPairSketcher} between the two stages publishes the sketches of their key pairs and keys into
 * {@code STORE} every {@code --sketch-interval} seconds (default 60), {@code --sketch-capacity} counters each
 * (default 100,000), sampling a task's records above {@code --sketch-updates-per-second} (default 1,000;
 * 2147483647 for none), and reports the share of records whose second stage's task is on the instance's server as
 * Kafka Streams metrics, which the instance prints on stdout when it stops, on one line:
 * {@code locality metrics [{"name": "local-records-total", "tags": {...}, "value": ...}, ...]} (not with
 * {@code --follow-schedule}). With {@code --sketch-phases SECONDS} the sketcher works in every other phase of that
 * many seconds only, aligned on the epoch, and passes records untouched in the others ({@link PhasedSketcher}): how
 * {@code benchmarks/bench_testbed_kafka.py} measures what it costs the application. Exit status 2
 * when an option, the store or the server is wrong (the message names it), 1 when Kafka Streams fails.
 */
public final class TwoStageCountsApp {
    private static final List<String> REQUIRED = List.of("bootstrap-servers", "store", "server", "input", "output");
    private static final List<String> OPTIONAL = List.of("application-id", "state-dir", "processed-log", "switch-log",
            "max-hold-ms", "schedule-wait-ms", "throughput-log", "sketches", "sketch-interval", "sketch-capacity",
            "sketch-updates-per-second", "sketch-phases");
    /** The options of the sketcher besides {@code --sketches}, which they need. */
    private static final List<String> SKETCH_OPTIONS = List.of("sketch-interval", "sketch-capacity",
            "sketch-updates-per-second", "sketch-phases");
    /** Options without a value. */
    private static final List<String> FLAGS = List.of("follow-schedule");
    private static final String FOLLOW = "follow-schedule";
    private static final Duration SCHEDULE_POLL = Duration.ofMillis(100);
    /** How often the switching job deletes the committed records of its own topics. */
    private static final Duration PURGE_INTERVAL = Duration.ofSeconds(30);
    /** Seconds per sketch interval when {@code --sketch-interval} is not given. */
    static final long DEFAULT_SKETCH_INTERVAL = 60;
    /** Counters per sketch when {@code --sketch-capacity} is not given. */
    static final long DEFAULT_SKETCH_CAPACITY = 100_000;
    /** How often {@code --throughput-log} is written. */
    static final long THROUGHPUT_LOG_MILLIS = 200;
    /** What starts the line of the locality metrics printed at the end. */
    static final String METRICS_LINE = "locality metrics ";

    private static final ObjectMapper JSON = new ObjectMapper();

    private TwoStageCountsApp() {}

    public static void main(String[] args) throws InterruptedException {
        Map<String, String> options;
        ProcessedRecords processed = ProcessedRecords.NONE;
        SwitchEvents events = SwitchEvents.NONE;
        Topology topology;
        Properties config;
        List<Object> closeAtEnd = new ArrayList<>();
        try {
            options = options(args);
            ConfigStore store = ConfigStore.open(options.get("store"));
            RoutingConfiguration tables = store.load();
            String server = options.get("server");
            if (!tables.topology().servers().contains(server)) {
                throw new IllegalArgumentException("--server " + server + " is not a server of the tables (version "
                        + tables.version() + "): " + tables.topology().servers());
            }
            if (options.containsKey("processed-log")) {
                processed = new ProcessedLog(Path.of(options.get("processed-log")), server);
            }
            if (options.containsKey("switch-log")) {
                events = new SwitchEventLog(Path.of(options.get("switch-log")), server);
            }
            closeAtEnd.addAll(List.of(processed, events));
            if (options.containsKey("throughput-log")) {
                ThroughputLog throughput = new ThroughputLog(Path.of(options.get("throughput-log")),
                        TwoStageCounts.operators(tables).get(1), Duration.ofMillis(THROUGHPUT_LOG_MILLIS));
                closeAtEnd.add(throughput);
                processed = processed.andThen(throughput);
            }
            config = streamsConfig(options);
            if (options.containsKey(FOLLOW) && options.containsKey("sketches")) {
                throw new IllegalArgumentException("--sketches is not served with --follow-schedule: the switching "
                        + "job has no sketcher yet");
            }
            if (options.containsKey(FOLLOW)) {
                Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG,
                        options.get("bootstrap-servers")));
                topology = switching(options, store, tables, admin, processed, events);
                closeAtEnd.add(new CommittedRecordsPurger(admin, applicationId(options),
                        SwitchTopics.of(applicationId(options), tables), PURGE_INTERVAL));
                config.put(ServerTaskAssignor.OPERATORS_CONFIG, SwitchingTwoStageCounts.subtopologyOperators(tables));
            } else {
                topology = TwoStageCounts.build(options.get("input"), options.get("output"), () -> tables, processed,
                        sketcher(options, tables));
            }
        } catch (IOException | IllegalArgumentException | ExecutionException | TimeoutException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(2);
            return;
        }
        KafkaStreams streams = new KafkaStreams(topology, config);
        Runnable atStop = options.containsKey("sketches") ? () -> printLocalityMetrics(streams) : () -> { };
        System.exit(run(streams, options.get("server"), closeAtEnd, atStop));
    }

    /**
     * The sketcher between the two stages ({@code --sketches STORE [--sketch-interval SECONDS]
     * [--sketch-capacity COUNTERS] [--sketch-updates-per-second N] [--sketch-phases SECONDS]}), or null without
     * {@code --sketches}: a {@link KeyPairSketcher}, a {@link PhasedSketcher} of it with {@code --sketch-phases}.
     */
    static FixedKeyProcessorSupplier<String, String, String> sketcher(Map<String, String> options,
            RoutingConfiguration tables) {
        if (!options.containsKey("sketches")) {
            if (SKETCH_OPTIONS.stream().anyMatch(options::containsKey)) {
                throw new IllegalArgumentException("--sketch-interval, --sketch-capacity, "
                        + "--sketch-updates-per-second and --sketch-phases need --sketches STORE");
            }
            return null;
        }
        long seconds = positive(options, "sketch-interval", DEFAULT_SKETCH_INTERVAL);
        int capacity = positiveInt(options, "sketch-capacity", DEFAULT_SKETCH_CAPACITY);
        int budget = positiveInt(options, "sketch-updates-per-second", SketcherOptions.DEFAULT_UPDATES_PER_SECOND);
        KeyPairSketcher<String, String> sketcher = TwoStageCounts.sketcher(options.get("sketches"),
                Duration.ofSeconds(seconds), capacity, budget, () -> tables);
        if (!options.containsKey("sketch-phases")) {
            return sketcher;
        }
        return new PhasedSketcher<>(sketcher, Duration.ofSeconds(positive(options, "sketch-phases", 1)));
    }

    /** The value of option {@code name}, an int >= 1, {@code otherwise} when not given. */
    private static int positiveInt(Map<String, String> options, String name, long otherwise) {
        long value = positive(options, name, otherwise);
        if (value > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("--" + name + " must be at most " + Integer.MAX_VALUE + "; got "
                    + value);
        }
        return (int) value;
    }

    /**
     * Prints the locality metrics of {@code streams} ({@code KafkaStreams#metrics()}, group
     * {@code stream-locality-metrics}) on one line: {@code locality metrics [{"name": ..., "tags": {...}, "value":
     * ...}, ...]}.
     */
    private static void printLocalityMetrics(KafkaStreams streams) {
        ArrayNode metrics = JSON.createArrayNode();
        streams.metrics().forEach((name, metric) -> {
            if (name.group().equals("stream-locality-metrics")) {
                ObjectNode line = metrics.addObject().put("name", name.name());
                name.tags().forEach(line.putObject("tags")::put);
                line.put("value", ((Number) metric.metricValue()).doubleValue());
            }
        });
        System.out.println(METRICS_LINE + metrics);
        System.out.flush();
    }

    /** The topology that follows the store's switch schedule, once its topics exist ({@code admin} makes them). */
    private static Topology switching(Map<String, String> options, ConfigStore store, RoutingConfiguration tables,
            Admin admin, ProcessedRecords processed, SwitchEvents events)
            throws IOException, ExecutionException, InterruptedException, TimeoutException {
        Duration wait = Duration.ofMillis(millis(options, "schedule-wait-ms", 30_000));
        ScheduleFollower schedule = new ScheduleFollower(store, SCHEDULE_POLL, wait, events);
        if (schedule.schedule().isEmpty()) {
            throw new IllegalArgumentException("--follow-schedule: the store " + store.uri() + " has no switch "
                    + "schedule; `locality seal --store " + store.uri() + " --until ...` starts one");
        }
        String applicationId = applicationId(options);
        int inputPartitions = SwitchTopics.prepare(admin, applicationId, options.get("input"), tables);
        return SwitchingTwoStageCounts.build(applicationId, options.get("input"), inputPartitions,
                options.get("output"), tables, schedule, Duration.ofMillis(millis(options, "max-hold-ms", 300_000)),
                processed, events);
    }

    /**
     * The Kafka Streams settings of the instance on {@code --server}: one stream thread, the server as a
     * client tag, and {@link ServerTaskAssignor} reading {@code --store}.
     */
    static Properties streamsConfig(Map<String, String> options) {
        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId(options));
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

    /** Runs {@code streams} until it stops; its exit status. What of {@code closeAtEnd} can be closed is, at the end. */
    private static int run(KafkaStreams streams, String server, List<?> closeAtEnd, Runnable atStop)
            throws InterruptedException {
        BlockingQueue<KafkaStreams.State> states = new LinkedBlockingQueue<>();
        streams.setStateListener((now, before) -> states.add(now));
        streams.setUncaughtExceptionHandler(error -> {
            System.err.println("error: Kafka Streams failed on server " + server + ": " + error);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            atStop.run();
            // leave the group: the other instances take the tasks at once, not after the session timeout (45 s)
            streams.close(CloseOptions.groupMembershipOperation(GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(30)));
            for (Object resource : closeAtEnd) {
                if (resource instanceof Closeable closeable) {
                    try {
                        closeable.close();
                    } catch (IOException e) {
                        System.err.println("error: " + e.getMessage());
                    }
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

    private static String applicationId(Map<String, String> options) {
        return options.getOrDefault("application-id", "locality-two-stage-counts");
    }

    /** The value of option {@code name}, a whole number >= 1, {@code otherwise} when not given. */
    private static long positive(Map<String, String> options, String name, long otherwise) {
        return number(options, name, otherwise, 1, "a whole number >= 1");
    }

    /** The value of option {@code name} in milliseconds, {@code otherwise} when not given. */
    private static long millis(Map<String, String> options, String name, long otherwise) {
        return number(options, name, otherwise, 0, "a number of milliseconds >= 0");
    }

    /** The value of option {@code name}, at least {@code least} ({@code rule} says so), {@code otherwise} when not given. */
    private static long number(Map<String, String> options, String name, long otherwise, long least, String rule) {
        String text = options.get(name);
        try {
            long value = text == null ? otherwise : Long.parseLong(text);
            if (value < least) {
                throw new NumberFormatException();
            }
            return value;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " must be " + rule + "; got '" + text + "'");
        }
    }

    /** {@code --name value} pairs and {@code --flag}s; every required option present, no unknown one. */
    static Map<String, String> options(String[] args) {
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            String name = args[i].startsWith("--") ? args[i].substring(2) : "";
            if (FLAGS.contains(name)) {
                options.put(name, "true");
                i--; // a flag takes no value
                continue;
            }
            if (!REQUIRED.contains(name) && !OPTIONAL.contains(name)) {
                throw new IllegalArgumentException("unknown option '" + args[i] + "'; options: --" + String.join(", --",
                        Stream.of(REQUIRED, OPTIONAL, FLAGS).flatMap(List::stream).toList()));
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
