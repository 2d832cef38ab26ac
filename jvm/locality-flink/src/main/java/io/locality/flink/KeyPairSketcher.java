package io.locality.flink;

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
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.operators.ProcessingTimeService;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.operators.StreamingRuntimeContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A pass-through operator that sketches what goes from one keyed operator to the next, publishes the sketches to
 * the store every interval, and reports the share of records that stayed on their server: insert it between the
 * two, chained to the first.
 *
 * <pre>{@code
 * KeyPairSketcher<Tweet> sketcher = KeyPairSketcher.builder("location", (Tweet t) -> t.location,
 *                 "hashtag", (Tweet t) -> t.hashtag)
 *         .store("s3://bucket/store").interval(Duration.ofMinutes(5)).capacity(50_000)
 *         .updatesPerSecond(1_000)       // per subtask; above it, a weighted sample (the default)
 *         .routing(byHashtag)            // the KeySelector the job keys the second operator by
 *         .build();
 * counted.map(sketcher).name("sketch location -> hashtag").uid("sketch-location-hashtag")
 *         .keyBy(byHashtag).process(...);
 * }</pre>
 *
 * <h2>Why an operator, not a wrapper of the key selector</h2>
 *
 * A {@code KeySelector} wrapped around the second operator's would look free, but Flink calls a keyed stream's
 * selector twice per record: on the sending side, to choose the channel (the key group's subtask), and again on the
 * receiving side, to set the keyed operator's current key. A wrapper would count every record twice, half of the
 * counts in the receiving subtask, which cannot tell where the record came from. This operator runs on the sending
 * side only, once per record, chained to the first operator (a {@code map} is chained: no serialization, no
 * network), so its subtask {@code i} is the first operator's subtask {@code i}.
 *
 * <h2>What it sketches and publishes</h2>
 *
 * For every record it passes (or a sample of them: see below), the pair (key of the first operator, key of the second)
 * and each key alone, with the two {@code KeySelector}s given (the real keys, not the routing keys: the keys the tables
 * are learned on; each a {@code String} or an integral number). Each subtask keeps, per interval of wall-clock time
 * aligned on the epoch (Python's {@code Interval.containing}), three Space-Saving sketches of {@code capacity}
 * counters: the pairs, the second operator's keys and the first operator's keys (two with {@code firstLoads(false)},
 * for the second hop of a chain {@code a -> b -> c}, whose {@code b} loads the sketcher of {@code a -> b} publishes).
 * At the end of the interval (a processing-time timer, run on the task's own thread) it hands them to a single
 * background thread that writes them by the store's protocol ({@link SketchPublisher}:
 * {@code sketches/<from>-<to>/pairs/<a>/<b>/} and {@code loads/<op>/}), and starts fresh ones; the task thread never
 * waits on the store. What is left is published at {@link #close()}, which waits at most {@value #CLOSE_WAIT_SECONDS} s
 * for the writes. An interval without a record publishes nothing.
 *
 * <p>The publisher id is {@code <job id>-<name>-<subtask index>} ({@code name} defaults to {@code <a>-<b>}): unique
 * per subtask and sketcher within a job, and stable across the subtask's restarts. A subtask restarted by a
 * failover publishes, for the interval it failed in, what it counted since the restart, replacing what its failed
 * attempt published at close (the protocol's rule for a republished name). The sketches are not in the job's
 * state: a restore from a savepoint starts an interval's sketches afresh.
 *
 * <h2>Sampling above a budget</h2>
 *
 * A subtask sketches every record while it passes at most {@link Builder#updatesPerSecond} records a wall-clock
 * second (default {@value SketcherOptions#DEFAULT_UPDATES_PER_SECOND}); above that, each record with probability
 * {@code p = updatesPerSecond / rate} ({@code rate}: its records a second over the last tenth of a second or more)
 * and weight {@code 1/p}
 * ({@link io.locality.sketch.RecordSampler}). The key selectors run on the sampled records only. Each count is then
 * an unbiased estimate, of variance at most {@code f (1/p_min - 1)} for a key or pair of {@code f} records in an
 * interval ({@code p_min}: the interval's smallest {@code p}), and so is the total weight; Space-Saving's bound (the
 * total weight over the capacity) comes on top. Within the budget the counts are exact as before (exact while the
 * distinct pairs fit the capacity). {@link Builder#countEveryRecord} sketches every record. The locality metric
 * counts every record and asks where the sampled ones go: its share of local records is estimated from the same
 * sample ({@link LocalShare}).
 *
 * <h2>When the store cannot be written</h2>
 *
 * The interval's sketches are dropped and the job runs on: it never fails or blocks because of the store (issue 35's
 * rule). The first failure of a run of failures is logged (a warning naming the store and the error), the next ones
 * are not; the store's return is logged with the number of intervals dropped. If the store is slower than the
 * intervals come (one interval being written and one waiting), the next interval is dropped too, and logged.
 *
 * <h2>Memory and cost</h2>
 *
 * Per subtask: the live sketches, three (two without the first loads) of at most {@code capacity} counters each,
 * and while the store is writing, at most two more intervals' of them. A counter costs about 140 bytes besides its
 * key's strings (a hash-map entry, the key, two doubles; measured: 42.5 MB for three full sketches of 100,000
 * counters). Per record: a counter of the metric and the sampler's two decrements. Per sampled record, at most
 * {@code updatesPerSecond} a second: a clock read, the two key selectors, three hash-map updates (0.2-0.4 µs while
 * the sketches hold every key, 1.3 µs once they evict) and the metric's routing key and key group.
 *
 * <h2>The live locality metric</h2>
 *
 * Under the operator's metric group, {@code locality.version.<version>}: counters {@code records} and
 * {@code localRecords}, gauge {@code localShare} ({@link LocalShare}). A record is local when the subtask Flink's
 * partitioner sends it to, {@code KeyGroupRangeAssignment.assignKeyToParallelOperator(key, maxParallelism,
 * parallelism)} with the job's own key selector of the second operator ({@link Builder#routing}: the routing key
 * when the job keys by the tables), is this subtask's index. That counts a record as staying on its server when
 * subtask {@code i} of the first operator and subtask {@code i} of the second share a task slot: what Flink's default
 * slot sharing does with two operators of equal parallelism (docs/engines/flink.md, "Which slot runs which
 * subtask"); on a cluster of several slots per TaskManager it is the share that stayed in its slot. The version is
 * the one given to {@link Builder#version}, else the job's global parameter {@value JobVersion#PARAMETER}
 * ({@link JobVersion#declare}), else {@code none}.
 *
 * @param <T> the record type
 */
public final class KeyPairSketcher<T> extends RichMapFunction<T, T> {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(KeyPairSketcher.class);
    /** How long {@link #close()} waits for the last publications. */
    static final int CLOSE_WAIT_SECONDS = 15;

    private final SketcherOptions options;
    private final KeySelector<T, ?> firstKey;
    private final KeySelector<T, ?> secondKey;
    private final KeySelector<T, ?> routing; // null: the second key, on this operator's parallelism
    private final int routingParallelism; // 0 when not given
    private final int routingMaxParallelism;
    private final Long version;

    private transient IntervalSketches sketches;
    private transient ProcessingTimeService timers;
    private transient LocalShare localShare;
    private transient KeySelector<T, ?> partitionKey;
    private transient int subtask;
    private transient int parallelism;
    private transient int maxParallelism;

    private KeyPairSketcher(Builder<T> builder, SketcherOptions options) {
        this.options = options;
        this.firstKey = builder.firstKey;
        this.secondKey = builder.secondKey;
        this.routing = builder.routing;
        this.routingParallelism = builder.routingParallelism;
        this.routingMaxParallelism = builder.routingMaxParallelism;
        this.version = builder.version;
    }

    /**
     * A sketcher of the records from {@code first} (keyed by {@code firstKey}) to {@code second} (keyed by
     * {@code secondKey}); its {@link Builder#store}, {@link Builder#interval} and {@link Builder#capacity} must be
     * given.
     *
     * @param first the first operator's name in the store's topology
     * @param firstKey the first operator's real key of a record (a {@code String} or an integral number)
     * @param second the second operator's name
     * @param secondKey the second operator's real key of a record
     */
    public static <T> Builder<T> builder(String first, KeySelector<T, ?> firstKey, String second,
            KeySelector<T, ?> secondKey) {
        return new Builder<>(first, firstKey, second, secondKey);
    }

    @Override
    public void open(OpenContext openContext) throws Exception {
        RuntimeContext context = getRuntimeContext();
        if (!(context instanceof StreamingRuntimeContext streaming)) {
            throw new IllegalStateException("a KeyPairSketcher runs in a DataStream job: it rolls its sketches on "
                    + "the task's processing-time timers; got a " + context.getClass().getName());
        }
        subtask = context.getTaskInfo().getIndexOfThisSubtask();
        parallelism = routingParallelism > 0 ? routingParallelism : context.getTaskInfo().getNumberOfParallelSubtasks();
        maxParallelism = routingParallelism > 0 ? routingMaxParallelism
                : context.getTaskInfo().getMaxNumberOfParallelSubtasks();
        partitionKey = routing != null ? routing : secondKey;
        String publisherId = context.getJobInfo().getJobId().toHexString() + "-" + options.name() + "-" + subtask;
        ObjectStore objects = StoreUri.open(options.store());
        AsyncSketchPublisher publisher = new AsyncSketchPublisher(new SketchPublisher(objects), publisherId,
                new PublicationLog(objects.uri(), publisherId, "the job", KeyPairSketcher::log),
                "locality-sketches-" + publisherId);
        String declared = context.getGlobalJobParameters().get(JobVersion.PARAMETER);
        String label = version != null ? version.toString() : declared != null ? declared : "none";
        localShare = new LocalShare(context.getMetricGroup(), label);
        timers = streaming.getProcessingTimeService();
        long interval = options.interval().toMillis();
        sketches = new IntervalSketches(options.emptySketches(), options.sampler(timers::getCurrentProcessingTime),
                interval, publisher, timers.getCurrentProcessingTime());
        timers.registerTimer(sketches.interval().end(), this::endInterval);
        LOG.info("sketching {} (capacity {}, every {} ms, sampled above {} records/s) into {} as {}; version {}, "
                + "locality against subtask {} of {} (max parallelism {})", options.hop(), options.capacity(),
                interval, options.updatesPerSecond(), objects.uri(), publisherId, label, subtask, parallelism,
                maxParallelism);
    }

    @Override
    public T map(T record) throws Exception {
        localShare.count();
        double weight = sketches.sample();
        if (weight > 0) { // a record left out of the sample costs no key, no clock read and no routing
            sketches.update(timers.getCurrentProcessingTime(), weight, firstKey.getKey(record),
                    secondKey.getKey(record));
            int target = KeyGroupRangeAssignment.assignKeyToParallelOperator(partitionKey.getKey(record),
                    maxParallelism, parallelism);
            if (target == subtask) {
                localShare.stayed(weight);
            }
        }
        return record;
    }

    /** The interval's end (a timer on the task's thread): its sketches go to the store, the next one begins. */
    private void endInterval(long time) {
        sketches.roll(Math.max(time, sketches.interval().end()));
        timers.registerTimer(sketches.interval().end(), this::endInterval);
    }

    /** Publishes what is left, waiting at most {@value #CLOSE_WAIT_SECONDS} s for the store. */
    @Override
    public void close() throws Exception {
        if (sketches == null) {
            return; // open did not get that far
        }
        if (!sketches.close(Duration.ofSeconds(CLOSE_WAIT_SECONDS))) {
            LOG.warn("the last sketches of {} as {} were not written within {} s; they are dropped", options.hop(),
                    sketches.publisher().publisherId(), CLOSE_WAIT_SECONDS);
        }
    }

    private static void log(Level level, String message) {
        switch (level) {
            case WARNING, ERROR -> LOG.warn(message);
            case INFO -> LOG.info(message);
            default -> LOG.debug(message);
        }
    }

    /**
     * The options of a {@link KeyPairSketcher}: checked when it is built, in the job's {@code main}.
     *
     * @param <T> the record type
     */
    public static final class Builder<T> {
        private final String first;
        private final String second;
        private final KeySelector<T, ?> firstKey;
        private final KeySelector<T, ?> secondKey;
        private String store;
        private Duration interval;
        private int capacity;
        private boolean firstLoads = true;
        private String name;
        private int updatesPerSecond = SketcherOptions.DEFAULT_UPDATES_PER_SECOND;
        private KeySelector<T, ?> routing;
        private int routingParallelism;
        private int routingMaxParallelism;
        private Long version;

        private Builder(String first, KeySelector<T, ?> firstKey, String second, KeySelector<T, ?> secondKey) {
            if (firstKey == null || secondKey == null) {
                throw new IllegalArgumentException("a KeyPairSketcher needs the key selectors of both operators");
            }
            this.first = first;
            this.second = second;
            this.firstKey = firstKey;
            this.secondKey = secondKey;
        }

        /** The store the sketches go to: a directory or {@code s3://bucket/prefix} (as {@code --store} names it). */
        public Builder<T> store(String uri) {
            this.store = uri;
            return this;
        }

        /** The interval the sketches cover each (at least 1 s); intervals are aligned on the epoch. */
        public Builder<T> interval(Duration length) {
            this.interval = length;
            return this;
        }

        /** The counters of each sketch (at least 1). */
        public Builder<T> capacity(int counters) {
            this.capacity = counters;
            return this;
        }

        /** Whether to sketch the first operator's keys too (default true); false for the second hop of a chain. */
        public Builder<T> firstLoads(boolean sketchThem) {
            this.firstLoads = sketchThem;
            return this;
        }

        /** The sketcher's name in its publisher ids (default {@code <first>-<second>}): 1-60 of [A-Za-z0-9_.-]. */
        public Builder<T> name(String sketcherName) {
            this.name = sketcherName;
            return this;
        }

        /**
         * The budget of sketch updates a second per subtask (at least 1; default
         * {@value SketcherOptions#DEFAULT_UPDATES_PER_SECOND}): above it, a weighted sample of the records is
         * sketched (the class comment, "Sampling above a budget").
         */
        public Builder<T> updatesPerSecond(int budget) {
            this.updatesPerSecond = budget;
            return this;
        }

        /** Sketches every record, whatever the rate: no sampling ({@link SketcherOptions#EVERY_RECORD}). */
        public Builder<T> countEveryRecord() {
            return updatesPerSecond(SketcherOptions.EVERY_RECORD);
        }

        /**
         * How the job keys the second operator, for the locality metric: its key selector, parallelism and max
         * parallelism. Without it, the second key itself on this operator's parallelism and max parallelism.
         */
        public Builder<T> routing(KeySelector<T, ?> key, int parallelism, int maxParallelism) {
            if (key == null || parallelism < 1 || maxParallelism < parallelism
                    || maxParallelism > KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM) {
                throw new IllegalArgumentException("the routing of a KeyPairSketcher needs a key selector and 1 <= "
                        + "parallelism <= max parallelism <= " + KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM
                        + "; got parallelism " + parallelism + " and max parallelism " + maxParallelism);
            }
            this.routing = key;
            this.routingParallelism = parallelism;
            this.routingMaxParallelism = maxParallelism;
            return this;
        }

        /** The job keys the second operator by a store's table: its routing keys, parallelism and max parallelism. */
        public Builder<T> routing(RoutingKeySelector<T, ?> key) {
            return routing(key, key.routes().parallelism(), key.routes().maxParallelism());
        }

        /** The store version in force, the label of the locality metric (default: the job's declared version). */
        public Builder<T> version(long storeVersion) {
            this.version = storeVersion;
            return this;
        }

        /**
         * The sketcher.
         *
         * @throws IllegalArgumentException when an option is missing or wrong ({@link SketcherOptions})
         */
        public KeyPairSketcher<T> build() {
            SketcherOptions options = new SketcherOptions(new Hop(first, second), store, interval, capacity,
                    firstLoads, name, updatesPerSecond);
            return new KeyPairSketcher<>(this, options);
        }
    }
}
