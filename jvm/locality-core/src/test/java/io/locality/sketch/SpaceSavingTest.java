package io.locality.sketch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The sketch's guarantees on seeded skewed streams against exact counts, its update and merge rules on small cases
 * worked by hand, and its parameter checks. The bytes are {@link SketchBytesTest}'s.
 */
class SpaceSavingTest {
    /** A seeded Zipf-like stream of (city, tag) pairs over {@code distinct} pairs, with weights in {0.5, 1, 2}. */
    private static List<Map.Entry<SketchKey, Double>> skewedStream(long seed, int length, int distinct) {
        Random random = new Random(seed);
        List<Map.Entry<SketchKey, Double>> stream = new ArrayList<>(length);
        for (int i = 0; i < length; i++) {
            int rank = (int) Math.min(distinct - 1, Math.floor(Math.pow(random.nextDouble(), -1.4)) - 1);
            SketchKey key = SketchKey.of("city" + rank % 97, "#tag" + rank);
            stream.add(Map.entry(key, new double[] {0.5, 1.0, 2.0}[random.nextInt(3)]));
        }
        return stream;
    }

    private static Map<SketchKey, Double> exact(List<Map.Entry<SketchKey, Double>> stream) {
        Map<SketchKey, Double> counts = new HashMap<>();
        stream.forEach(e -> counts.merge(e.getKey(), e.getValue(), Double::sum));
        return counts;
    }

    private static SpaceSaving sketch(int capacity, List<Map.Entry<SketchKey, Double>> stream) {
        SpaceSaving sketch = new SpaceSaving(capacity, 2);
        stream.forEach(e -> sketch.update(e.getKey(), e.getValue()));
        return sketch;
    }

    /** Every statement of the class comment's Accuracy section, for every key of the stream. */
    private static void assertBounds(SpaceSaving sketch, Map<SketchKey, Double> exact) {
        double w = exact.values().stream().mapToDouble(Double::doubleValue).sum();
        double mu = sketch.minCount();
        assertEquals(w, sketch.totalWeight(), 1e-9);
        assertTrue(mu <= w / sketch.capacity(), "minCount " + mu + " above W/m");
        double sum = 0;
        for (SketchCounter counter : sketch.counters()) {
            sum += counter.count();
            assertTrue(counter.error() <= mu, counter + " has an error above minCount " + mu);
        }
        assertTrue(sum <= w + 1e-9, "counters sum to " + sum + " > W " + w);
        exact.forEach((key, f) -> {
            assertTrue(sketch.lowerBound(key) <= f && f <= sketch.upperBound(key), key + ": " + f + " outside ["
                    + sketch.lowerBound(key) + ", " + sketch.upperBound(key) + "]");
            if (f > w / sketch.capacity()) {
                assertTrue(sketch.estimate(key) > 0, key + " weighs " + f + " > W/m but is not monitored");
            }
        });
    }

    @Test
    void boundsHoldOnASkewedStream() {
        List<Map.Entry<SketchKey, Double>> stream = skewedStream(7, 60_000, 20_000);
        SpaceSaving sketch = sketch(200, stream);
        assertEquals(200, sketch.size());
        assertTrue(sketch.minCount() > 0);
        assertBounds(sketch, exact(stream));
        SketchCounter heaviest = sketch.topK(1).get(0);
        assertEquals(SketchKey.of("city0", "#tag0"), heaviest.key());
        assertEquals(exact(stream).get(heaviest.key()), heaviest.estimate(), heaviest.error());
    }

    @Test
    void exactWhileTheDistinctKeysFit() {
        List<Map.Entry<SketchKey, Double>> stream = skewedStream(11, 5_000, 300);
        Map<SketchKey, Double> exact = exact(stream);
        SpaceSaving sketch = sketch(exact.size(), stream);
        assertEquals(exact.size(), sketch.size());
        assertEquals(sketch.counters().stream().mapToDouble(SketchCounter::count).min().orElseThrow(),
                sketch.minCount());
        for (SketchCounter counter : sketch.counters()) {
            assertEquals(exact.get(counter.key()), counter.count());
            assertEquals(0.0, counter.error());
        }
        SpaceSaving roomy = sketch(exact.size() + 1, stream);
        assertEquals(0.0, roomy.minCount());
        assertEquals(0.0, roomy.upperBound(SketchKey.of("nowhere", "#never")));
    }

    @Test
    void evictsTheSmallestCountInTheLowestSlotAmongTies() {
        SpaceSaving sketch = new SpaceSaving(3);
        for (String key : List.of("a", "b", "c", "b")) {
            sketch.update(SketchKey.of(key));
        }
        sketch.update(SketchKey.of("d")); // a and c count 1: a, in slot 0, goes
        sketch.update(SketchKey.of("e")); // c (1) is now the smallest
        sketch.update(SketchKey.of("f")); // d, b and e count 2: d, in slot 0, goes
        assertEquals(List.of(new SketchCounter(SketchKey.of("f"), 3.0, 2.0),
                new SketchCounter(SketchKey.of("b"), 2.0, 0.0), new SketchCounter(SketchKey.of("e"), 2.0, 1.0)),
                sketch.counters());
        assertEquals(7.0, sketch.totalWeight());
        assertEquals(2.0, sketch.upperBound(SketchKey.of("a")));
        assertEquals(0.0, sketch.lowerBound(SketchKey.of("a")));
        assertEquals(0.0, sketch.estimate(SketchKey.of("a")));
    }

    /** The lazy heap evicts what a scan for the smallest count, lowest slot first, evicts, on every update. */
    @Test
    void evictsAsALinearScanWould() {
        Random random = new Random(3);
        SpaceSaving sketch = new SpaceSaving(16);
        List<Long> keys = new ArrayList<>();
        List<double[]> counters = new ArrayList<>(); // {count, error}
        for (int step = 0; step < 20_000; step++) {
            long key = random.nextInt(random.nextBoolean() ? 8 : 200);
            double weight = 1 + random.nextInt(3);
            sketch.update(SketchKey.of(key), weight);
            int slot = keys.indexOf(key);
            if (slot >= 0) {
                counters.get(slot)[0] += weight;
            } else if (keys.size() < 16) {
                keys.add(key);
                counters.add(new double[] {weight, 0});
            } else {
                int low = 0;
                for (int i = 1; i < 16; i++) {
                    low = counters.get(i)[0] < counters.get(low)[0] ? i : low;
                }
                double mu = counters.get(low)[0];
                keys.set(low, key);
                counters.set(low, new double[] {mu + weight, mu});
            }
        }
        List<SketchCounter> expected = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            expected.add(new SketchCounter(SketchKey.of(keys.get(i)), counters.get(i)[0], counters.get(i)[1]));
        }
        assertEquals(expected, sketch.counters());
    }

    @Test
    void mergeFormsTheCandidatesAndKeepsTheLargest() {
        SpaceSaving mine = new SpaceSaving(2);
        mine.update(SketchKey.of("a"), 5);
        mine.update(SketchKey.of("b"), 3);
        SpaceSaving theirs = new SpaceSaving(2);
        theirs.update(SketchKey.of("c"), 4);
        theirs.update(SketchKey.of("a"), 1);
        // a: 5 + 1, error 0; b: 3 + 1 (their minimum), error 0 + 1; c: 3 (my minimum) + 4, error 3 + 0.
        assertSame(mine, mine.merge(theirs));
        assertEquals(List.of(new SketchCounter(SketchKey.of("a"), 6, 0), new SketchCounter(SketchKey.of("c"), 7, 3)),
                mine.counters());
        assertEquals(13, mine.totalWeight());
        assertEquals(2, theirs.size()); // left as it was
        assertEquals(5, theirs.totalWeight());
    }

    @Test
    void mergeTiesKeepTheSmallerErrorThenTheEarlierCandidate() {
        SpaceSaving mine = new SpaceSaving(3);
        for (String key : List.of("a", "b", "c")) {
            mine.update(SketchKey.of(key), 2);
        }
        SpaceSaving theirs = new SpaceSaving(3);
        theirs.update(SketchKey.of("x"), 1);
        theirs.update(SketchKey.of("y"), 1);
        theirs.update(SketchKey.of("b"), 1);
        // a, c: 2 + 1 = 3, error 1; b: 3, error 0; x, y: 2 + 1 = 3, error 2. All tie at 3: b, then a and c.
        mine.merge(theirs);
        assertEquals(List.of(new SketchCounter(SketchKey.of("a"), 3, 1), new SketchCounter(SketchKey.of("b"), 3, 0),
                new SketchCounter(SketchKey.of("c"), 3, 1)), mine.counters());
        SpaceSaving roomy = new SpaceSaving(3);
        roomy.update(SketchKey.of("a"), 5);
        roomy.update(SketchKey.of("b"), 4);
        SpaceSaving other = new SpaceSaving(3);
        for (String key : List.of("z", "y", "x")) {
            other.update(SketchKey.of(key));
        }
        // a: 6 and b: 5, error 1; z, y, x: 0 + 1, error 0, tied: z, the first in the other's order, is kept.
        roomy.merge(other);
        assertEquals(List.of(new SketchCounter(SketchKey.of("a"), 6, 1), new SketchCounter(SketchKey.of("b"), 5, 1),
                new SketchCounter(SketchKey.of("z"), 1, 0)), roomy.counters());
    }

    @Test
    void mergedSketchesOfAStreamSplitInThreeKeepTheBounds() {
        List<Map.Entry<SketchKey, Double>> stream = skewedStream(5, 45_000, 15_000);
        SpaceSaving merged = sketch(150, stream.subList(0, 15_000));
        merged.merge(sketch(150, stream.subList(15_000, 30_000))).merge(sketch(150, stream.subList(30_000, 45_000)));
        assertBounds(merged, exact(stream));
        SpaceSaving doubled = sketch(150, stream.subList(0, 15_000));
        double before = doubled.totalWeight();
        doubled.merge(doubled);
        assertEquals(2 * before, doubled.totalWeight());
        assertEquals(150, doubled.size());
    }

    @Test
    void mergeIntoAnEmptySketchCopiesTheOther() {
        SpaceSaving other = sketch(50, skewedStream(2, 2_000, 500));
        SpaceSaving empty = new SpaceSaving(50, 2);
        empty.merge(other);
        assertEquals(other.counters(), empty.counters());
        assertEquals(ComponentKind.STR, empty.kind(1));
        empty.merge(new SpaceSaving(50, 2));
        assertEquals(other.totalWeight(), empty.totalWeight());
    }

    @Test
    void topKIsHeaviestFirstThenLargerLowerBoundThenKey() {
        SpaceSaving sketch = new SpaceSaving(10);
        sketch.update(SketchKey.of("é"), 2);
        sketch.update(SketchKey.of("\uD83D\uDE42"), 2); // U+1F642 orders after U+FF01 by code point
        sketch.update(SketchKey.of("\uFF01"), 2);
        sketch.update(SketchKey.of("z"), 5);
        assertEquals(List.of("z", "é", "\uFF01", "\uD83D\uDE42"),
                sketch.topK(10).stream().map(c -> c.key().component(0)).toList());
        assertEquals(1, sketch.topK(1).size());
        assertEquals(0, sketch.topK(0).size());
    }

    @Test
    void aprioriErrorIsTheTotalOverTheCapacity() {
        assertEquals(250.0, SpaceSaving.aprioriError(4, 1000));
        assertThrows(IllegalArgumentException.class, () -> SpaceSaving.aprioriError(0, 1));
        assertThrows(IllegalArgumentException.class, () -> SpaceSaving.aprioriError(1, Double.NaN));
    }

    private static void assertRefused(String expected, Runnable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call::run);
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }

    @Test
    void refusesBadParametersNamingThem() {
        assertRefused("'capacity' parameter of SpaceSaving must be an int >= 1; got 0", () -> new SpaceSaving(0));
        assertRefused("'arity' parameter of SpaceSaving must be an int >= 1; got 0", () -> new SpaceSaving(4, 0));
        SpaceSaving pairs = new SpaceSaving(4, 2);
        for (double weight : new double[] {0, -1, Double.NaN, Double.POSITIVE_INFINITY}) {
            assertRefused("'weight' parameter of SpaceSaving.update must be a finite double > 0; got " + weight,
                    () -> pairs.update(SketchKey.of("a", 1L), weight));
        }
        assertRefused("must have 2 components (the sketch's arity); got 1", () -> pairs.update(SketchKey.of("a")));
        assertRefused("'key' parameter of SpaceSaving.update must be a SketchKey; got null", () -> pairs.update(null));
        pairs.update(SketchKey.of("a", 1L));
        assertRefused("must hold int at key position 1 (fixed by the first update of this sketch); got str",
                () -> pairs.update(SketchKey.of("a", "b")));
        assertRefused("must hold str at key position 0", () -> pairs.estimate(SketchKey.of(1L, 1L)));
        assertRefused("same capacity as this sketch (4); got 5", () -> pairs.merge(new SpaceSaving(5, 2)));
        assertRefused("same arity as this sketch (2); got 1", () -> pairs.merge(new SpaceSaving(4, 1)));
        SpaceSaving swapped = new SpaceSaving(4, 2);
        swapped.update(SketchKey.of(1L, 1L));
        assertRefused("must hold str at key position 0 (fixed by the first update of this sketch); got int",
                () -> pairs.merge(swapped));
        assertRefused("'k' parameter of SpaceSaving.topK must be an int >= 0; got -1", () -> pairs.topK(-1));
        assertRefused("at key position 1; got java.lang.Double 1.5", () -> SketchKey.of("a", 1.5));
        assertRefused("at least one component", () -> SketchKey.of());
        assertEquals(1, pairs.size()); // the refused calls changed nothing
        assertEquals(1.0, pairs.totalWeight());
    }

    @Test
    void integralKeysOfEveryJavaTypeAreOneKey() {
        SpaceSaving sketch = new SpaceSaving(4);
        sketch.update(SketchKey.of(42));
        sketch.update(SketchKey.of((Object) Integer.valueOf(42)));
        sketch.update(SketchKey.of((Object) (short) 42));
        assertEquals(3.0, sketch.estimate(SketchKey.of(42L)));
        assertRefused("must hold int at key position 0", () -> sketch.estimate(SketchKey.of("42")));
    }
}
