package io.locality.sketch;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Space-Saving sketch of the heaviest keys (or key pairs) of a weighted stream, in bounded memory: the Java twin of
 * the Python {@code locality.sketch.SpaceSaving}, with the same bytes.
 *
 * <p>Keeps at most {@code capacity} counters. Each monitored key has a count, an over-estimate of its true weight,
 * and an error, the most that count can over-estimate. A key ({@link SketchKey}) has {@code arity} components, each
 * a {@code long} or a {@code String}: one for an operator's key loads, two for the key pairs of two consecutive
 * operators. Each position has one type, fixed by the first update (or merge). {@link #update(SketchKey, double)}
 * is the classic step of Metwally et al. [1]; {@link #merge(SpaceSaving)} combines sketches built on parts of a
 * stream (one per subtask, say) with the rule of the Python sketch, the mergeability of Agarwal et al. [2].
 *
 * <h2>Accuracy</h2>
 *
 * Let {@code W} be {@link #totalWeight()} (everything absorbed, through updates and merges), {@code m} the
 * capacity, {@code f(x)} the true weight of key {@code x} and {@code mu} = {@link #minCount()} (the smallest counter
 * once all {@code m} counters are in use, else 0). Then, however the stream was split and merged:
 * <ul>
 *   <li><b>exact</b> while the distinct keys absorbed number at most {@code m}: every key is monitored with its
 *       true weight and zero error;
 *   <li>every monitored key has {@code lowerBound <= f(x) <= estimate = upperBound} and
 *       {@code upperBound - lowerBound = error <= mu <= W/m};
 *   <li>every unmonitored key has {@code f(x) <= mu <= W/m}: its estimate is 0, its upper bound {@code mu}; so every
 *       key with {@code f(x) > W/m} is monitored;
 *   <li>the counters sum to at most {@code W}.
 * </ul>
 * After {@code a.merge(b)} the same holds with {@code W = W_a + W_b}: merging costs nothing in the bound (the
 * Python class's Notes prove it). Weights are summed in {@code double} in stream order, as Python sums them in
 * float64, so the statements hold exactly for integer weights (sums below 2^53) and up to rounding otherwise.
 * {@link #aprioriError(int, double)} gives {@code W/m} before building a sketch.
 *
 * <h2>The same as Python</h2>
 *
 * {@link #toBytes()} writes, and {@link #fromBytes(byte[])} reads, the Python sketch's layout ({@code SketchBytes}:
 * magic {@code "LCSS"}, little-endian, CRC-32), so each language reads what the other wrote. An update does what
 * the Python {@code update} does: a monitored key adds the weight; a new key takes a free counter in the next slot;
 * on a full sketch it replaces the counter with the smallest count {@code mu}, the lowest slot among ties, and
 * starts at {@code mu + weight} with error {@code mu}. So the same stream of updates gives the same bytes in both
 * languages. (Python's {@code update_batch} merges buffered batches instead and may keep other keys once counters
 * are evicted; its bytes read here all the same.) A merge forms, for every key of either sketch, the candidate
 * {@code (C_this + C_other, E_this + E_other)}, where a sketch counts a key it does not monitor at its
 * {@code minCount} (count and error), and keeps the {@code m} largest counts (ties: smaller error, then earlier
 * candidate); the result holds this sketch's kept counters first, in their order, then the other's kept new keys
 * in the other's slot order, as Python's merge keeps them: the same merges give the same bytes in both languages.
 *
 * <h2>Cost</h2>
 *
 * Memory O(capacity): at most {@code m} counters (arrays grown on demand) and a hash map from key to slot. An update
 * costs a hash lookup, O(1), plus O(log m) when it evicts (a lazy min-heap, {@code LazyMinHeap}, built in O(m) at the
 * first eviction, and again after a merge or a read). A merge costs O((m + m') log(m + m')); {@link #minCount()} and
 * {@link #upperBound(SketchKey)} of an unmonitored key O(m). Not thread-safe: one sketch per thread, merged after.
 *
 * <p>References: [1] Metwally, Agrawal, El Abbadi. "Efficient computation of frequent and top-k elements in data
 * streams." ICDT 2005, LNCS 3363, pp. 398-412, https://doi.org/10.1007/978-3-540-30570-5_27. [2] Agarwal, Cormode,
 * Huang, Phillips, Wei, Yi. "Mergeable summaries." PODS 2012, pp. 23-34, https://doi.org/10.1145/2213556.2213562.
 */
public final class SpaceSaving {
    private static final int FIRST_ARRAY = 16;

    private final int capacity;
    private final int arity;
    private final ComponentKind[] kinds;
    private final Map<SketchKey, Integer> slots = new HashMap<>();
    private double total;
    private int size;
    private SketchKey[] keys;
    private double[] counts;
    private double[] errors;
    private LazyMinHeap heap; // null until an eviction needs it

    /**
     * An empty sketch of {@code capacity} counters for keys of {@code arity} components.
     *
     * @throws IllegalArgumentException when {@code capacity} or {@code arity} is below 1
     */
    public SpaceSaving(int capacity, int arity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("the 'capacity' parameter of SpaceSaving must be an int >= 1; got "
                    + capacity);
        }
        if (arity < 1) {
            throw new IllegalArgumentException("the 'arity' parameter of SpaceSaving must be an int >= 1; got "
                    + arity);
        }
        this.capacity = capacity;
        this.arity = arity;
        this.kinds = new ComponentKind[arity];
        Arrays.fill(kinds, ComponentKind.UNSET);
        allocate(Math.min(capacity, FIRST_ARRAY));
    }

    /** An empty sketch of {@code capacity} counters for keys of one component. */
    public SpaceSaving(int capacity) {
        this(capacity, 1);
    }

    // ------------------------------------------------------------------ updates

    /** Adds weight 1 to {@code key}: {@link #update(SketchKey, double)}. */
    public void update(SketchKey key) {
        update(key, 1.0);
    }

    /**
     * Adds {@code weight} to {@code key} with the classic Space-Saving step (see the class comment).
     *
     * @throws IllegalArgumentException when the weight is not finite and {@code > 0}, or the key has another arity
     *     or, at some position, another type than the first update fixed (the message names the position)
     */
    public void update(SketchKey key, double weight) {
        if (!(weight > 0 && weight < Double.POSITIVE_INFINITY)) {
            throw new IllegalArgumentException("the 'weight' parameter of SpaceSaving.update must be a finite double "
                    + "> 0; got " + weight);
        }
        checkKey(key, "SpaceSaving.update");
        for (int p = 0; p < arity; p++) {
            if (kinds[p] == ComponentKind.UNSET) {
                kinds[p] = key.kind(p);
            }
        }
        total += weight;
        Integer slot = slots.get(key);
        if (slot != null) {
            counts[slot] += weight;
            return;
        }
        if (size < capacity) {
            if (size == keys.length) {
                grow();
            }
            put(size++, key, weight, 0.0);
            return;
        }
        if (heap == null) {
            heap = new LazyMinHeap(counts, size);
        }
        int victim = heap.minimum(counts);
        double low = counts[victim];
        slots.remove(keys[victim]);
        put(victim, key, low + weight, low);
        heap.replaceTop(low + weight);
    }

    /**
     * Merges {@code other} into this sketch and returns this sketch, which then summarizes both streams; its total
     * weight is the sum. {@code other} is not modified (it may be this sketch).
     *
     * @throws IllegalArgumentException when {@code other} differs in capacity, arity or, at some position, key type
     *     (an empty sketch matches any type)
     */
    public SpaceSaving merge(SpaceSaving other) {
        if (other == null) {
            throw new IllegalArgumentException("the 'other' parameter of SpaceSaving.merge must be a SpaceSaving; "
                    + "got null");
        }
        checkSame("capacity", capacity, other.capacity);
        checkSame("arity", arity, other.arity);
        for (int p = 0; p < arity; p++) {
            ComponentKind theirs = other.kinds[p];
            if (kinds[p] != ComponentKind.UNSET && theirs != ComponentKind.UNSET && kinds[p] != theirs) {
                throw new IllegalArgumentException("the 'other' parameter of SpaceSaving.merge must hold "
                        + kinds[p].label() + " at key position " + p + " (fixed by the first update of this sketch); "
                        + "got " + theirs.label());
            }
        }
        for (int p = 0; p < arity; p++) {
            kinds[p] = kinds[p] == ComponentKind.UNSET ? other.kinds[p] : kinds[p];
        }
        if (other.size == 0) {
            total += other.total;
            return this;
        }
        // Read the other's state before this one changes: other may be this.
        int theirSize = other.size;
        double theirMin = other.minCount();
        double added = other.total;
        double myMin = minCount();
        SketchKey[] candidates = new SketchKey[size + theirSize];
        double[] count = new double[candidates.length];
        double[] error = new double[candidates.length];
        int n = 0;
        for (int i = 0; i < size; i++, n++) {
            Integer j = other.slots.get(keys[i]);
            candidates[n] = keys[i];
            count[n] = counts[i] + (j == null ? theirMin : other.counts[j]);
            error[n] = errors[i] + (j == null ? theirMin : other.errors[j]);
        }
        for (int j = 0; j < theirSize; j++) {
            if (!slots.containsKey(other.keys[j])) {
                candidates[n] = other.keys[j];
                count[n] = myMin + other.counts[j];
                error[n] = myMin + other.errors[j];
                n++;
            }
        }
        int[] kept = Largest.positions(count, error, n, capacity);
        allocate(Math.max(kept.length, Math.min(capacity, FIRST_ARRAY)));
        slots.clear();
        for (int i = 0; i < kept.length; i++) {
            put(i, candidates[kept[i]], count[kept[i]], error[kept[i]]);
        }
        size = kept.length;
        total += added;
        return this;
    }

    // ------------------------------------------------------------------ queries

    /** The estimated weight of {@code key}: its count, or 0 when it is not monitored. */
    public double estimate(SketchKey key) {
        int slot = find(key, "SpaceSaving.estimate");
        return slot < 0 ? 0.0 : counts[slot];
    }

    /** A lower bound of the true weight of {@code key}: count minus error, or 0 when it is not monitored. */
    public double lowerBound(SketchKey key) {
        int slot = find(key, "SpaceSaving.lowerBound");
        return slot < 0 ? 0.0 : counts[slot] - errors[slot];
    }

    /** An upper bound of the true weight of {@code key}: its count, or {@link #minCount()} when it is not monitored. */
    public double upperBound(SketchKey key) {
        int slot = find(key, "SpaceSaving.upperBound");
        return slot < 0 ? minCount() : counts[slot];
    }

    /**
     * The smallest counter when all {@code capacity} counters are in use, else 0: it bounds the true weight of every
     * unmonitored key and the error of every monitored one, and is at most {@code totalWeight() / capacity()}.
     */
    public double minCount() {
        if (size < capacity) {
            return 0.0;
        }
        double low = counts[0];
        for (int i = 1; i < size; i++) {
            low = Math.min(low, counts[i]);
        }
        return low;
    }

    /** Total weight absorbed: the {@code W} of the bounds. */
    public double totalWeight() {
        return total;
    }

    /** Number of monitored keys (counters in use). */
    public int size() {
        return size;
    }

    /** Maximum number of counters {@code m}. */
    public int capacity() {
        return capacity;
    }

    /** Number of components of a key. */
    public int arity() {
        return arity;
    }

    /** The type of key position {@code position}, {@link ComponentKind#UNSET} before the first key. */
    public ComponentKind kind(int position) {
        return kinds[position];
    }

    /** True if nothing was ever added (weights are {@code > 0}). */
    public boolean isEmpty() {
        return total == 0.0;
    }

    /** The counters in slot order, the order of the serialized form (a copy: later updates leave it as it is). */
    public List<SketchCounter> counters() {
        List<SketchCounter> out = new ArrayList<>(size);
        for (int i = 0; i < size; i++) {
            out.add(new SketchCounter(keys[i], counts[i], errors[i]));
        }
        return Collections.unmodifiableList(out);
    }

    /**
     * The {@code k} heaviest monitored keys (all if fewer), heaviest first; ties in estimate by larger lower bound,
     * then by key ({@link SketchKey}'s order), as the Python {@code top_k} orders them.
     *
     * @throws IllegalArgumentException when {@code k < 0}
     */
    public List<SketchCounter> topK(int k) {
        if (k < 0) {
            throw new IllegalArgumentException("the 'k' parameter of SpaceSaving.topK must be an int >= 0; got " + k);
        }
        List<SketchCounter> rows = new ArrayList<>(counters());
        rows.sort(Comparator.comparingDouble(SketchCounter::estimate).reversed()
                .thenComparing(Comparator.comparingDouble(SketchCounter::lowerBound).reversed())
                .thenComparing(SketchCounter::key));
        return List.copyOf(rows.subList(0, Math.min(k, rows.size())));
    }

    /**
     * The worst-case error {@code totalWeight / capacity} of a sketch, before building it: the bound on every error
     * and on the weight of every unmonitored key.
     *
     * @throws IllegalArgumentException when {@code capacity < 1} or {@code totalWeight} is not finite and
     *     {@code >= 0}
     */
    public static double aprioriError(int capacity, double totalWeight) {
        if (capacity < 1) {
            throw new IllegalArgumentException("the 'capacity' parameter of SpaceSaving.aprioriError must be an int "
                    + ">= 1; got " + capacity);
        }
        if (!(totalWeight >= 0 && totalWeight < Double.POSITIVE_INFINITY)) {
            throw new IllegalArgumentException("the 'totalWeight' parameter of SpaceSaving.aprioriError must be a "
                    + "finite double >= 0; got " + totalWeight);
        }
        return totalWeight / capacity;
    }

    // ------------------------------------------------------------------ bytes

    /**
     * The serialized sketch, byte for byte what the Python sketch writes for the same counters, in the same order
     * (layout in the class comment of {@code SketchBytes}).
     *
     * @throws IllegalStateException when a string key is not valid Unicode (a lone surrogate has no UTF-8 form)
     */
    public byte[] toBytes() {
        return SketchBytes.encode(new SketchBytes.Image(arity, capacity, total, kinds, keys, counts, errors, size));
    }

    /**
     * The sketch that {@code data} holds, written by {@link #toBytes()} or by the Python {@code to_bytes}: the same
     * counters, errors, order, key types and total weight.
     *
     * @throws SketchFormatException when the bytes are truncated, corrupt (a key in two counters included), of
     *     another format or of an unsupported format version
     */
    public static SpaceSaving fromBytes(byte[] data) {
        if (data == null) {
            throw new IllegalArgumentException("the 'data' parameter of SpaceSaving.fromBytes must be bytes; got null");
        }
        SketchBytes.Image image = SketchBytes.decode(data);
        SpaceSaving sketch = new SpaceSaving((int) image.capacity(), image.arity());
        System.arraycopy(image.kinds(), 0, sketch.kinds, 0, image.arity());
        sketch.total = image.total();
        sketch.allocate(Math.max(image.size(), sketch.keys.length));
        for (int i = 0; i < image.size(); i++) {
            if (sketch.slots.containsKey(image.keys()[i])) {
                throw new SketchFormatException("corrupt SpaceSaving bytes: a key appears in two counters (the key "
                        + image.keys()[i] + " of counter " + i + ")");
            }
            sketch.put(i, image.keys()[i], image.counts()[i], image.errors()[i]);
        }
        sketch.size = image.size();
        return sketch;
    }

    /** A summary laid out as the Python sketch's {@code str} is. */
    @Override
    public String toString() {
        StringBuilder types = new StringBuilder();
        double maxError = 0.0;
        for (int p = 0; p < arity; p++) {
            types.append(p == 0 ? "" : ", ").append(kinds[p].label());
        }
        for (int i = 0; i < size; i++) {
            maxError = Math.max(maxError, errors[i]);
        }
        return String.join("\n",
                "### SpaceSaving summary:",
                "    capacity        : " + capacity,
                "    arity           : " + arity + " (" + types + ")",
                "    monitored keys  : " + size,
                "    total weight    : " + total,
                "    min counter     : " + minCount(),
                "    max error       : " + maxError,
                "    a priori error  : " + total / capacity + " (total weight / capacity)",
                "### End SpaceSaving summary");
    }

    // ------------------------------------------------------------------ internals

    private void put(int slot, SketchKey key, double count, double error) {
        keys[slot] = key;
        counts[slot] = count;
        errors[slot] = error;
        slots.put(key, slot);
    }

    /** Fresh arrays of {@code length} counters (the heap, over the old ones, is dropped). */
    private void allocate(int length) {
        keys = new SketchKey[length];
        counts = new double[length];
        errors = new double[length];
        heap = null;
    }

    private void grow() {
        int length = (int) Math.min(capacity, Math.max(FIRST_ARRAY, 2L * keys.length));
        keys = Arrays.copyOf(keys, length);
        counts = Arrays.copyOf(counts, length);
        errors = Arrays.copyOf(errors, length);
    }

    private int find(SketchKey key, String owner) {
        checkKey(key, owner);
        Integer slot = slots.get(key);
        return slot == null ? -1 : slot;
    }

    private void checkKey(SketchKey key, String owner) {
        if (key == null) {
            throw new IllegalArgumentException("the 'key' parameter of " + owner + " must be a SketchKey; got null");
        }
        if (key.arity() != arity) {
            throw new IllegalArgumentException("the 'key' parameter of " + owner + " must have " + arity
                    + (arity == 1 ? " component" : " components") + " (the sketch's arity); got " + key.arity()
                    + ": " + key);
        }
        for (int p = 0; p < arity; p++) {
            if (kinds[p] != ComponentKind.UNSET && kinds[p] != key.kind(p)) {
                throw new IllegalArgumentException("the 'key' parameter of " + owner + " must hold " + kinds[p].label()
                        + " at key position " + p + " (fixed by the first update of this sketch); got "
                        + key.kind(p).label() + " in " + key);
            }
        }
    }

    private void checkSame(String name, int mine, int theirs) {
        if (mine != theirs) {
            throw new IllegalArgumentException("the 'other' parameter of SpaceSaving.merge must have the same " + name
                    + " as this sketch (" + mine + "); got " + theirs);
        }
    }
}
