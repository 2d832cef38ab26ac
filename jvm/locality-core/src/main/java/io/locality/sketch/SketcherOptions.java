package io.locality.sketch;

import io.locality.storage.StoreUri;
import java.io.Serializable;
import java.time.Duration;
import java.util.function.LongSupplier;

/**
 * What an engine's sketching piece is told, whatever its engine: the hop it sketches, the store and interval it
 * publishes to and on, its sketches' capacity, whether it sketches the first operator's loads, its name in its
 * publisher ids, and its budget of sketch updates per second. Checked when built, in the job's or application's
 * {@code main}.
 *
 * <h2>The budget</h2>
 *
 * An update of a hop's sketches costs 0.2-0.4 µs while they hold every key, 1.3 µs once they evict; sketching every
 * record cost a CPU-bound Flink job 38-46% of its throughput. So each instance (a Flink subtask, a Kafka Streams
 * task) sketches every record while it sees at most {@code updatesPerSecond} records a second, and above that a
 * sample of about {@code updatesPerSecond} records a second, each weighted by the inverse of its probability
 * {@code p} ({@link RecordSampler}, which states the error): every count an unbiased estimate, Space-Saving's own
 * error (at most the total weight over the capacity) on top. The default, {@value #DEFAULT_UPDATES_PER_SECOND},
 * costs about a millisecond of a core a second per instance whatever the job's rate (measured on the testbed, with
 * three instances per core: 1.0% of a CPU-bound Flink job's throughput, 5.2% at 10,000), and gives a window of an
 * hour from 6 instances some 21.6 million sampled records, which keep the tables learned from them within a point
 * of exact counts up to some 3.6 million distinct pairs (about 6 sampled records per distinct pair are needed:
 * measured in {@code benchmarks/bench_sketch_sampling.py}). While an instance stays within the budget, nothing is
 * sampled and its counts are what they were without one. {@link #EVERY_RECORD} ({@code Integer.MAX_VALUE}) turns
 * sampling off.
 *
 * @param hop the two operators, their names by {@link SketchPublisher#NAME_RULE}, distinct
 * @param store the store the sketches go to: a directory or {@code s3://bucket/prefix} ({@link StoreUri})
 * @param interval the wall-clock time each sketch covers, at least 1 s (intervals are aligned on the epoch)
 * @param capacity the counters of each sketch, at least 1
 * @param firstLoads whether to sketch the first operator's keys too (false for the second hop of a chain, whose
 *     first operator's loads the sketcher of the first hop publishes)
 * @param name the piece's name in its publisher ids: {@link SketchPublisher#NAME_RULE}, at most
 *     {@value #NAME_LENGTH} characters; null for {@code <first>-<second>}
 * @param updatesPerSecond the budget of sketch updates a second per instance, at least 1: above it the records
 *     are sampled ({@link #DEFAULT_UPDATES_PER_SECOND} by default; {@link #EVERY_RECORD} for none)
 */
public record SketcherOptions(Hop hop, String store, Duration interval, int capacity, boolean firstLoads,
        String name, int updatesPerSecond) implements Serializable {
    /** The longest name: a publisher id holds an engine's id of the job or task beside it, within 100 characters. */
    public static final int NAME_LENGTH = 60;
    /** The budget of sketch updates a second per instance when none is given. */
    public static final int DEFAULT_UPDATES_PER_SECOND = 1_000;
    /** A budget no instance reaches: every record is sketched, with weight 1. */
    public static final int EVERY_RECORD = Integer.MAX_VALUE;
    private static final String OWNER = "SketcherOptions";

    /**
     * @throws IllegalArgumentException naming what is missing or wrong (an operator name, the store's scheme, the
     *     interval, the capacity, the name, the budget)
     */
    public SketcherOptions {
        if (hop == null) {
            throw new IllegalArgumentException("a sketcher needs the hop it sketches: two operators");
        }
        SketchPublisher.checkName(hop.from(), "first", OWNER);
        SketchPublisher.checkName(hop.to(), "second", OWNER);
        if (hop.from().equals(hop.to())) {
            throw new IllegalArgumentException("a sketcher sketches the hop between two operators; got '"
                    + hop.from() + "' twice");
        }
        if (store == null || interval == null) {
            throw new IllegalArgumentException("a sketcher needs a store, an interval and a capacity; got store "
                    + store + ", interval " + interval + ", capacity " + capacity);
        }
        StoreUri.open(store); // an unserved scheme is refused here
        if (interval.toMillis() < 1000) {
            throw new IllegalArgumentException("the interval of a sketcher must be at least 1 s; got " + interval);
        }
        if (capacity < 1) {
            throw new IllegalArgumentException("the capacity of a sketcher must be >= 1; got " + capacity);
        }
        if (updatesPerSecond < 1) {
            throw new IllegalArgumentException("the updatesPerSecond of a sketcher, its budget of sketch updates a "
                    + "second, must be >= 1; got " + updatesPerSecond);
        }
        if (name == null) {
            name = hop.from() + "-" + hop.to();
        }
        SketchPublisher.checkName(name, "name", OWNER);
        if (name.length() > NAME_LENGTH) {
            throw new IllegalArgumentException("the name of a sketcher, part of its publisher ids, must have at most "
                    + NAME_LENGTH + " characters; got '" + name + "' (give a shorter one)");
        }
    }

    /** Empty sketches of the hop, of {@link #capacity} counters. */
    public HopSketches emptySketches() {
        return new HopSketches(hop, capacity, firstLoads);
    }

    /** A sampler of the records to sketch, within {@link #updatesPerSecond} updates a second of {@code clock}. */
    public RecordSampler sampler(LongSupplier clock) {
        return new RecordSampler(updatesPerSecond, clock);
    }
}
