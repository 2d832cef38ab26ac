package io.locality.kafka;

import io.locality.routing.RoutingConfiguration;
import io.locality.sketch.AsyncSketchPublisher;
import io.locality.sketch.Hop;
import io.locality.sketch.IntervalSketches;
import io.locality.sketch.PublicationLog;
import io.locality.sketch.SketchPublisher;
import io.locality.sketch.SketcherOptions;
import io.locality.storage.ObjectStore;
import io.locality.storage.StoreUri;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.time.Instant;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorSupplier;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A pass-through step of a Kafka Streams topology that sketches what goes from one keyed stage to the next,
 * publishes each task's sketches to the store every interval, and reports the share of records whose next stage's
 * task is on its server: insert it with {@code processValues} right after the first stage, before the re-keying.
 *
 * <pre>{@code
 * KeyPairSketcher<String, String> sketcher = KeyPairSketcher.<String, String>builder(
 *                 "location", (location, value) -> location, "hashtag", (location, value) -> field(value, "hashtag"))
 *         .store("s3://bucket/store").interval(Duration.ofMinutes(5)).capacity(50_000)
 *         .updatesPerSecond(1_000)      // per task; above it, a weighted sample (the default)
 *         .routing(() -> tables)        // the configuration the app repartitions to the second stage by
 *         .build();
 * stream.process(countByLocation)
 *         .processValues(sketcher, Named.as("sketch-location-hashtag"))
 *         .selectKey((location, value) -> field(value, "hashtag"))
 *         .repartition(Repartitioned.<String, String>as("hashtag").withStreamPartitioner(byHashtag)) ...
 * }</pre>
 *
 * <h2>Why a {@code FixedKeyProcessor} with {@code processValues}</h2>
 *
 * The piece must see each record once, on the sending side, where both keys and the sending task are known: after
 * the first stage, in the first stage's sub-topology (task {@code g_i} of the first stage runs it, on the same
 * thread, no serialization). A {@code FixedKeyProcessor} cannot change the key, so {@code processValues} keeps the
 * stream as it is: a plain {@code process} would mark the key as changed and make a later key-based operation
 * ({@code groupByKey}, a join) add a repartition topic the application did not have. A {@code StreamPartitioner}
 * wrapped around the application's would see each record once too, but it is asked by the sink's producer without
 * a task context: no punctuator, no metrics, no task id.
 *
 * <h2>What it sketches and publishes</h2>
 *
 * For every record it passes (or a sample of them: see below), the pair (key of the first stage, key of the second) and
 * each key alone, from the two functions given (the real keys, a {@code String} or an integral number each: the keys
 * the tables are learned on). A record whose first or second key is null carries no state to the second stage: it
 * passes, neither sketched nor counted. Each task keeps, per interval of wall-clock time aligned on the epoch (Python's
 * {@code Interval.containing}), three Space-Saving sketches of {@code capacity} counters ({@link IntervalSketches}):
 * the pairs, the second stage's keys and the first stage's keys (two with {@code firstLoads(false)}). A record goes
 * into the interval of the stream thread's clock when it is processed ({@code currentSystemTimeMs()}); a wall-clock
 * punctuator anchored on the intervals' ends ({@code schedule(start, interval, WALL_CLOCK_TIME, ...)}) ends an interval
 * of an idle task too, within one loop of the stream thread. The ended interval's sketches go to a single background
 * thread that writes them by the store's protocol ({@link SketchPublisher}: {@code sketches/<from>-<to>/pairs/<a>/<b>/}
 * and {@code loads/<op>/}); the stream thread never waits on the store. What is left is published when the task closes
 * on this instance (a rebalance that moves it, the application's close), waiting at most {@value #CLOSE_WAIT_SECONDS} s
 * for the writes. An interval without a record publishes nothing.
 *
 * <p>The publisher id is {@code <application.id>-<task id>-<name>} ({@code name} defaults to {@code <a>-<b>}):
 * unique per task and sketcher within the application, and stable wherever the task runs. A task that moves to
 * another instance in the middle of an interval publishes it twice, from each instance: the second publication
 * replaces the first (the protocol's rule for a republished name), so that interval's sketches lack what the first
 * instance counted. The sketches are not in the task's state.
 *
 * <h2>Sampling above a budget</h2>
 *
 * A task sketches every record while it passes at most {@link Builder#updatesPerSecond} records a wall-clock second
 * (default {@value SketcherOptions#DEFAULT_UPDATES_PER_SECOND}); above that, each record with probability
 * {@code p = updatesPerSecond / rate} ({@code rate}: its records a second over the last tenth of a second or more)
 * and weight {@code 1/p}
 * ({@link io.locality.sketch.RecordSampler}). Each count is then an unbiased estimate, of variance at most
 * {@code f (1/p_min - 1)} for a key or pair of {@code f} records in an interval ({@code p_min}: the interval's
 * smallest {@code p}), and so is the total weight; Space-Saving's bound (the total weight over the capacity) comes
 * on top. Within the budget the counts are exact as before (exact while the distinct pairs fit the capacity).
 * {@link Builder#countEveryRecord} sketches every record. The key functions, and the locality metric, run on the
 * sampled records only: the metric's counts are estimated from the same sample ({@link LocalShare}).
 *
 * <h2>When the store cannot be written</h2>
 *
 * The interval's sketches are dropped and the application runs on: it never fails or blocks because of the store
 * (issue 35's rule). The first failure of a run of failures is logged once per task (a warning naming the store and
 * the error), the store's return is logged with the number of intervals dropped ({@link PublicationLog}). When the
 * store is slower than the intervals come (one interval being written, one waiting), the next interval is dropped
 * too, and logged.
 *
 * <h2>Memory and cost</h2>
 *
 * Per task: three Space-Saving sketches (two without the first loads) of at most {@code capacity} counters, about
 * 140 bytes a counter besides its key's strings (measured in locality-core: 42.5 MB for three full sketches of
 * 100,000 counters), and while the store is writing, at most two more intervals' of them; one writing thread per
 * task. Per record: the sampler's two counter decrements. Per sampled record, at most {@code updatesPerSecond} a
 * second: the two key functions, a clock read, three hash-map updates (0.2-0.4 µs while the sketches hold every key,
 * 1.3 µs once they evict) and, with {@link Builder#routing}, one table lookup (an entry, else Kafka's murmur2 of the
 * key).
 *
 * <h2>The live locality metric</h2>
 *
 * With {@link Builder#routing}, group {@value LocalShare#GROUP} in the application's metrics
 * ({@code KafkaStreams#metrics()}, JMX), tags {@code thread-id}, {@code task-id}, {@code sketcher}, {@code version}:
 * {@value LocalShare#RECORDS}, {@value LocalShare#LOCAL_RECORDS} and {@value LocalShare#LOCAL_SHARE}
 * ({@link LocalShare}), per task and per store version in force, the version of the configuration the supplier
 * gives at the record. A record is local when the server the configuration's topology places instance {@code j} of
 * the second operator on is this instance's server, {@code j} being the partition the application's
 * {@link TablePartitioner} gives the record ({@code table.route(secondKey)}, the second operator's table of
 * that configuration), and this instance's server its client tag {@code client.tag.locality.server}
 * ({@link ServerTaskAssignor#SERVER_TAG}; or {@link Builder#server}). This task runs here; task {@code j} of the
 * second stage runs on an instance of that server, which is what {@link ServerTaskAssignor} does while an instance of
 * the server is in the group. So it is the share of records whose two stages ran on one server when the application
 * repartitions by these tables and places its tasks with {@code ServerTaskAssignor}, every server present; while a
 * server is missing (its tasks run elsewhere), it is the share the tables would give, not the share that stayed.
 *
 * @param <K> the key type of the stream between the stages
 * @param <V> the value type
 */
public final class KeyPairSketcher<K, V> implements FixedKeyProcessorSupplier<K, V, V> {
    private static final Logger LOG = LoggerFactory.getLogger(KeyPairSketcher.class);
    /** How long a task's close waits for its last publications. */
    static final int CLOSE_WAIT_SECONDS = 15;
    /** The client tag that names an instance's server. */
    static final String SERVER_CONFIG = StreamsConfig.clientTagPrefix(ServerTaskAssignor.SERVER_TAG);

    private final SketcherOptions options;
    private final BiFunction<? super K, ? super V, ?> firstKey;
    private final BiFunction<? super K, ? super V, ?> secondKey;
    private final Supplier<RoutingConfiguration> tables; // null: no metric
    private final String server; // null: the client tag

    private KeyPairSketcher(Builder<K, V> builder, SketcherOptions options) {
        this.options = options;
        this.firstKey = builder.firstKey;
        this.secondKey = builder.secondKey;
        this.tables = builder.tables;
        this.server = builder.server;
    }

    /**
     * A sketcher of the records from {@code first} (keyed by {@code firstKey}) to {@code second} (keyed by
     * {@code secondKey}); its {@link Builder#store}, {@link Builder#interval} and {@link Builder#capacity} must be
     * given.
     *
     * @param first the first stage's operator name in the store's topology
     * @param firstKey the first stage's real key of a record, from its key and value (a {@code String} or an
     *     integral number; null: the record is not sketched)
     * @param second the second stage's operator name
     * @param secondKey the second stage's real key of a record
     */
    public static <K, V> Builder<K, V> builder(String first, BiFunction<? super K, ? super V, ?> firstKey,
            String second, BiFunction<? super K, ? super V, ?> secondKey) {
        return new Builder<>(first, firstKey, second, secondKey);
    }

    /** The sketcher's options, as checked. */
    public SketcherOptions options() {
        return options;
    }

    @Override
    public FixedKeyProcessor<K, V, V> get() {
        return new Sketching();
    }

    private static void log(Level level, String message) {
        switch (level) {
            case WARNING, ERROR -> LOG.warn(message);
            case INFO -> LOG.info(message);
            default -> LOG.debug(message);
        }
    }

    /** One task's sketcher. */
    private final class Sketching implements FixedKeyProcessor<K, V, V> {
        private FixedKeyProcessorContext<K, V> context;
        private IntervalSketches sketches;
        private LocalShare localShare;
        private String ownServer;

        @Override
        public void init(FixedKeyProcessorContext<K, V> taskContext) {
            context = taskContext;
            String publisherId = context.applicationId() + "-" + context.taskId() + "-" + options.name();
            if (publisherId.length() > 100) {
                throw new IllegalStateException("the publisher id of a KeyPairSketcher, " + publisherId + ", must "
                        + "have at most 100 characters: give the sketcher a shorter name(...)");
            }
            ObjectStore objects = StoreUri.open(options.store());
            AsyncSketchPublisher publisher = new AsyncSketchPublisher(new SketchPublisher(objects), publisherId,
                    new PublicationLog(objects.uri(), publisherId, "the application", KeyPairSketcher::log),
                    "locality-sketches-" + publisherId);
            long interval = options.interval().toMillis();
            sketches = new IntervalSketches(options.emptySketches(), options.sampler(context::currentSystemTimeMs),
                    interval, publisher, context.currentSystemTimeMs());
            context.schedule(Instant.ofEpochMilli(sketches.interval().end()), options.interval(),
                    PunctuationType.WALL_CLOCK_TIME, sketches::roll);
            if (tables != null) {
                ownServer = server != null ? server : serverTag();
                localShare = new LocalShare(context.metrics(), Thread.currentThread().getName(),
                        context.taskId().toString(), options.name());
            }
            LOG.info("sketching {} (capacity {}, every {} ms, sampled above {} records/s) into {} as {}; locality "
                    + "against server {}", options.hop(), options.capacity(), interval, options.updatesPerSecond(),
                    objects.uri(), publisherId, ownServer);
        }

        private String serverTag() {
            Object tag = context.appConfigs().get(SERVER_CONFIG);
            if (tag == null || tag.toString().isBlank()) {
                throw new IllegalStateException("a KeyPairSketcher with routing(...) measures locality against "
                        + "this instance's server: set " + SERVER_CONFIG + " (as ServerTaskAssignor needs) or give "
                        + "server(...)");
            }
            return tag.toString();
        }

        @Override
        public void process(FixedKeyRecord<K, V> record) {
            double weight = sketches.sample();
            if (weight > 0) { // a record left out of the sample costs no key, no clock read and no routing
                Object a = firstKey.apply(record.key(), record.value());
                Object b = secondKey.apply(record.key(), record.value());
                if (a != null && b != null) {
                    sketches.update(context.currentSystemTimeMs(), weight, a, b);
                    if (localShare != null) {
                        RoutingConfiguration inForce = tables.get();
                        localShare.count(inForce.version(), weight, stays(inForce, b));
                    }
                }
            }
            context.forward(record);
        }

        /** Whether a record keyed {@code b} goes to a task of the second stage on this instance's server. */
        private boolean stays(RoutingConfiguration inForce, Object b) {
            String to = options.hop().to();
            return ownServer.equals(inForce.topology().serverOf(to, inForce.table(to).route(b)));
        }

        /** Publishes what is left, waiting at most {@value #CLOSE_WAIT_SECONDS} s for the store. */
        @Override
        public void close() {
            if (localShare != null) {
                localShare.close();
            }
            if (sketches == null) {
                return; // init did not get that far
            }
            try {
                if (!sketches.close(Duration.ofSeconds(CLOSE_WAIT_SECONDS))) {
                    LOG.warn("the last sketches of {} as {} were not written within {} s; they are dropped",
                            options.hop(), sketches.publisher().publisherId(), CLOSE_WAIT_SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                LOG.warn("interrupted while the last sketches of {} as {} were written; they may be dropped",
                        options.hop(), sketches.publisher().publisherId());
            }
        }
    }

    /**
     * The options of a {@link KeyPairSketcher}: checked when it is built, in the application's {@code main}.
     *
     * @param <K> the key type of the stream
     * @param <V> the value type
     */
    public static final class Builder<K, V> {
        private final String first;
        private final String second;
        private final BiFunction<? super K, ? super V, ?> firstKey;
        private final BiFunction<? super K, ? super V, ?> secondKey;
        private String store;
        private Duration interval;
        private int capacity;
        private boolean firstLoads = true;
        private String name;
        private int updatesPerSecond = SketcherOptions.DEFAULT_UPDATES_PER_SECOND;
        private Supplier<RoutingConfiguration> tables;
        private String server;

        private Builder(String first, BiFunction<? super K, ? super V, ?> firstKey, String second,
                BiFunction<? super K, ? super V, ?> secondKey) {
            if (firstKey == null || secondKey == null) {
                throw new IllegalArgumentException("a KeyPairSketcher needs the key functions of both stages");
            }
            this.first = first;
            this.second = second;
            this.firstKey = firstKey;
            this.secondKey = secondKey;
        }

        /** The store the sketches go to: a directory or {@code s3://bucket/prefix} (as {@code --store} names it). */
        public Builder<K, V> store(String uri) {
            this.store = uri;
            return this;
        }

        /** The interval the sketches cover each (at least 1 s); intervals are aligned on the epoch. */
        public Builder<K, V> interval(Duration length) {
            this.interval = length;
            return this;
        }

        /** The counters of each sketch (at least 1). */
        public Builder<K, V> capacity(int counters) {
            this.capacity = counters;
            return this;
        }

        /** Whether to sketch the first stage's keys too (default true); false for the second hop of a chain. */
        public Builder<K, V> firstLoads(boolean sketchThem) {
            this.firstLoads = sketchThem;
            return this;
        }

        /** The sketcher's name in its publisher ids and metric tags (default {@code <first>-<second>}). */
        public Builder<K, V> name(String sketcherName) {
            this.name = sketcherName;
            return this;
        }

        /**
         * The budget of sketch updates a second per task (at least 1; default
         * {@value SketcherOptions#DEFAULT_UPDATES_PER_SECOND}): above it, a weighted sample of the records is
         * sketched (the class comment, "Sampling above a budget").
         */
        public Builder<K, V> updatesPerSecond(int budget) {
            this.updatesPerSecond = budget;
            return this;
        }

        /** Sketches every record, whatever the rate: no sampling ({@link SketcherOptions#EVERY_RECORD}). */
        public Builder<K, V> countEveryRecord() {
            return updatesPerSecond(SketcherOptions.EVERY_RECORD);
        }

        /**
         * The configuration the application repartitions to the second stage by (asked at every record, as
         * {@link TablePartitioner} asks its supplier): turns the live locality metric on, per version.
         */
        public Builder<K, V> routing(Supplier<RoutingConfiguration> configuration) {
            this.tables = configuration;
            return this;
        }

        /** This instance's server, for the metric (default: its client tag {@code client.tag.locality.server}). */
        public Builder<K, V> server(String serverName) {
            this.server = serverName;
            return this;
        }

        /**
         * The sketcher.
         *
         * @throws IllegalArgumentException when an option is missing or wrong ({@link SketcherOptions}), or the
         *     routing configuration lacks the second operator or falls back on another hash than Kafka's
         */
        public KeyPairSketcher<K, V> build() {
            SketcherOptions options = new SketcherOptions(new Hop(first, second), store, interval, capacity,
                    firstLoads, name, updatesPerSecond);
            if (tables != null) {
                RoutingConfiguration now = tables.get();
                new TablePartitioner<>(() -> now.table(second)); // refuses another engine's fallback
                now.topology().numInstances(second);
            }
            return new KeyPairSketcher<>(this, options);
        }
    }
}
