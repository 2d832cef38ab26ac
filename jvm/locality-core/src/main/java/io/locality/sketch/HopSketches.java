package io.locality.sketch;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What one instance of a job sketches of the records it passes from operator a to operator b during one interval:
 * the (key of a, key of b) pairs, b's keys (b's loads) and, unless told otherwise, a's keys (a's loads): three
 * {@link SpaceSaving} sketches of {@code capacity} counters each, two without a's loads.
 *
 * <p>Keys are a {@code String} or an integral number ({@link SketchKey}); each position keeps the type of its
 * first key. Not thread-safe: one instance's thread updates it, then hands it whole to its publisher and takes a
 * {@link #fresh()} one.
 */
public final class HopSketches {
    private final Hop hop;
    private final int capacity;
    private final SpaceSaving pairs;
    private final SpaceSaving toLoads;
    private final SpaceSaving fromLoads; // null when a's loads are sketched elsewhere

    /**
     * @param withFromLoads whether to sketch a's keys too: false when another instance publishes a's loads (in a
     *     chain a -> b -> c, the sketcher of b -> c leaves b's loads to the sketcher of a -> b)
     * @throws IllegalArgumentException when {@code capacity < 1}
     */
    public HopSketches(Hop hop, int capacity, boolean withFromLoads) {
        this.hop = hop;
        this.capacity = capacity;
        this.pairs = new SpaceSaving(capacity, 2);
        this.toLoads = new SpaceSaving(capacity, 1);
        this.fromLoads = withFromLoads ? new SpaceSaving(capacity, 1) : null;
    }

    /** Empty sketches of the same hop, capacity and kinds: the next interval's. */
    public HopSketches fresh() {
        return new HopSketches(hop, capacity, fromLoads != null);
    }

    /**
     * One record that went from a (keyed {@code fromKey}) to b (keyed {@code toKey}), counted {@code weight} times:
     * 1 for a record sketched as it is, {@code 1/p} for one sampled with probability {@code p} ({@link RecordSampler}).
     *
     * @throws IllegalArgumentException when a key is neither a {@code String} nor an integral number, or not of
     *     the type its position took first, or the weight is not finite and {@code > 0}
     */
    public void update(Object fromKey, Object toKey, double weight) {
        pairs.update(SketchKey.of(fromKey, toKey), weight);
        toLoads.update(SketchKey.of(toKey), weight);
        if (fromLoads != null) {
            fromLoads.update(SketchKey.of(fromKey), weight);
        }
    }

    /** True before the first record. */
    public boolean isEmpty() {
        return pairs.isEmpty();
    }

    public Hop hop() {
        return hop;
    }

    /** The pairs sketch. */
    public SpaceSaving pairs() {
        return pairs;
    }

    /** The loads sketches: a's (when kept) then b's, by operator. */
    public Map<String, SpaceSaving> loads() {
        Map<String, SpaceSaving> loads = new LinkedHashMap<>();
        if (fromLoads != null) {
            loads.put(hop.from(), fromLoads);
        }
        loads.put(hop.to(), toLoads);
        return loads;
    }

    /**
     * Publishes these sketches as {@code publisher}'s of {@code interval} ({@link SketchPublisher#publish}).
     *
     * @return the names written
     */
    public List<String> publish(SketchPublisher publisher, SketchInterval interval, String publisherId)
            throws IOException {
        return publisher.publish(interval, publisherId, Map.of(hop, pairs), loads());
    }
}
