package io.locality.sketch;

import io.locality.storage.StoreUri;
import java.io.Serializable;
import java.time.Duration;

/**
 * What an engine's sketching piece is told, whatever its engine: the hop it sketches, the store and interval it
 * publishes to and on, its sketches' capacity, whether it sketches the first operator's loads, and its name in its
 * publisher ids. Checked when built, in the job's or application's {@code main}.
 *
 * @param hop the two operators, their names by {@link SketchPublisher#NAME_RULE}, distinct
 * @param store the store the sketches go to: a directory or {@code s3://bucket/prefix} ({@link StoreUri})
 * @param interval the wall-clock time each sketch covers, at least 1 s (intervals are aligned on the epoch)
 * @param capacity the counters of each sketch, at least 1
 * @param firstLoads whether to sketch the first operator's keys too (false for the second hop of a chain, whose
 *     first operator's loads the sketcher of the first hop publishes)
 * @param name the piece's name in its publisher ids: {@link SketchPublisher#NAME_RULE}, at most
 *     {@value #NAME_LENGTH} characters; null for {@code <first>-<second>}
 */
public record SketcherOptions(Hop hop, String store, Duration interval, int capacity, boolean firstLoads,
        String name) implements Serializable {
    /** The longest name: a publisher id holds an engine's id of the job or task beside it, within 100 characters. */
    public static final int NAME_LENGTH = 60;
    private static final String OWNER = "SketcherOptions";

    /**
     * @throws IllegalArgumentException naming what is missing or wrong (an operator name, the store's scheme, the
     *     interval, the capacity, the name)
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
}
