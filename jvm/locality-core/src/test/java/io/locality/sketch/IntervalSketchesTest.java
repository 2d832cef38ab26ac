package io.locality.sketch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.storage.LocalDirectory;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Records go into the interval of their moment, aligned on the epoch; an ended interval is published whole. */
class IntervalSketchesTest {
    private static final Hop HOP = new Hop("a", "b");
    private static final String ID = "app-0_1-a-b";

    private static SpaceSaving read(Path root, String name) throws IOException {
        return SpaceSaving.fromBytes(Files.readAllBytes(root.resolve(name)));
    }

    private static AsyncSketchPublisher publisher(Path root, List<String> heard) {
        return new AsyncSketchPublisher(new SketchPublisher(new LocalDirectory(root)), ID,
                new PublicationLog(root.toString(), ID, "the application", (level, message) -> heard.add(level
                        + " " + message)), "test-writer");
    }

    /** The engine's clock, which the test sets. */
    private static final class Clock {
        long now;
    }

    /** Sketches of {@code capacity} counters, sampled within {@code budget} updates a second of {@code clock}. */
    private static IntervalSketches sketches(int capacity, boolean firstLoads, int budget, Clock clock, long interval,
            AsyncSketchPublisher publisher) {
        return new IntervalSketches(new HopSketches(HOP, capacity, firstLoads),
                new RecordSampler(budget, () -> clock.now, 7), interval, publisher, clock.now);
    }

    /** One record at {@code now}, as an engine passes it: sampled, then sketched when the sampler takes it. */
    private static void pass(IntervalSketches sketches, Clock clock, long now, Object fromKey, Object toKey) {
        clock.now = now;
        double weight = sketches.sample();
        if (weight > 0) {
            sketches.update(now, weight, fromKey, toKey);
        }
    }

    @Test
    void eachIntervalHoldsTheRecordsOfItsMomentsAndIsPublishedWhenItEnds(@TempDir Path root) throws Exception {
        List<String> heard = new ArrayList<>();
        Clock clock = new Clock();
        clock.now = 5_300;
        IntervalSketches sketches = sketches(10, true, 10, clock, 1000, publisher(root, heard));
        assertEquals(new SketchInterval(5_000, 6_000), sketches.interval());
        pass(sketches, clock, 5_400, "x", "p");
        pass(sketches, clock, 5_999, "x", "p");
        pass(sketches, clock, 6_000, "y", "q"); // the next interval: the first one is handed over
        assertFalse(sketches.roll(6_999));
        assertTrue(sketches.roll(8_250)); // an idle interval ends by the timer; 7,000-8,000 held nothing
        assertEquals(new SketchInterval(8_000, 9_000), sketches.interval());
        assertTrue(sketches.close(Duration.ofSeconds(10))); // nothing in 8,000-9,000: nothing more

        SketchInterval first = new SketchInterval(5_000, 6_000);
        SketchInterval second = new SketchInterval(6_000, 7_000);
        assertEquals(2.0, read(root, SketchPublisher.pairsName(first, HOP, ID)).estimate(SketchKey.of("x", "p")));
        assertEquals(1.0, read(root, SketchPublisher.loadsName(second, "b", ID)).estimate(SketchKey.of("q")));
        assertEquals(2.0, read(root, SketchPublisher.loadsName(first, "a", ID)).totalWeight());
        try (var folders = Files.list(root.resolve(SketchPublisher.SKETCHES))) {
            assertEquals(List.of(first.name(), second.name()), folders.map(p -> p.getFileName().toString()).sorted()
                    .toList());
        }
        assertEquals(2, heard.size(), heard.toString());
        assertTrue(heard.get(0).startsWith(Level.DEBUG + " published 3 sketches of " + first.name()), heard.get(0));
    }

    @Test
    void aStoreThatCannotBeWrittenIsSaidOnceAndCostsTheCounterNothing(@TempDir Path root) throws Exception {
        Files.writeString(root.resolve(SketchPublisher.SKETCHES), "a file where the folder belongs");
        List<String> heard = new ArrayList<>();
        Clock clock = new Clock();
        IntervalSketches sketches = sketches(10, false, 10, clock, 1000, publisher(root, heard));
        for (long now = 0; now < 2_000; now += 100) { // two intervals: one written while the other waits
            pass(sketches, clock, now, 1L, 2L);
        }
        assertTrue(sketches.close(Duration.ofSeconds(10)));
        assertEquals(1, heard.size(), heard.toString());
        assertTrue(heard.get(0).startsWith(Level.WARNING + " cannot publish the sketches of "), heard.get(0));
        assertTrue(heard.get(0).endsWith("(the application runs on; this is logged once)"), heard.get(0));
    }

    @Test
    void withinTheBudgetTheSketchesAreByteForByteThoseOfEveryRecord(@TempDir Path root) throws Exception {
        int rate = 1_000; // records a second, at the budget: nothing is sampled
        Clock clock = new Clock();
        IntervalSketches sketches = sketches(50, true, rate, clock, 60_000, publisher(root, new ArrayList<>()));
        SpaceSaving pairs = new SpaceSaving(50, 2);
        SpaceSaving fromLoads = new SpaceSaving(50, 1);
        SpaceSaving toLoads = new SpaceSaving(50, 1);
        for (int i = 0; i < 5 * rate; i++) { // 5 s; 300 pairs in 50 counters: evictions
            String from = "city-" + (i * 7 % 60);
            long to = i * i % 5;
            pass(sketches, clock, i * 1000L / rate, from, to);
            pairs.update(SketchKey.of(from, to));
            fromLoads.update(SketchKey.of(from));
            toLoads.update(SketchKey.of(to));
        }
        assertTrue(sketches.close(Duration.ofSeconds(10)));

        SketchInterval interval = new SketchInterval(0, 60_000);
        assertEquals(5.0 * rate, pairs.totalWeight());
        assertArrayEquals(pairs.toBytes(), Files.readAllBytes(root.resolve(SketchPublisher.pairsName(interval, HOP,
                ID))));
        assertArrayEquals(fromLoads.toBytes(), Files.readAllBytes(root.resolve(SketchPublisher.loadsName(interval,
                "a", ID))));
        assertArrayEquals(toLoads.toBytes(), Files.readAllBytes(root.resolve(SketchPublisher.loadsName(interval,
                "b", ID))));
    }

    /**
     * 200,000 records a second for 10 s against a budget of 10,000: {@code p = 0.05} after the first window. Each
     * heavy key's estimate lies within 4 standard deviations of the sample (at most {@code sqrt(f (1/p - 1))}) of its
     * true count, plus Space-Saving's bound (total weight / capacity) above; so does the total weight, without the
     * bound.
     */
    @Test
    void aboveTheBudgetTheHeavyKeysAndTheTotalAreEstimatedWithinTheirDeviations(@TempDir Path root)
            throws Exception {
        int rate = 200_000;
        int seconds = 10;
        int budget = 10_000;
        int capacity = 1_000;
        Clock clock = new Clock();
        IntervalSketches sketches = sketches(capacity, true, budget, clock, 60_000, publisher(root,
                new ArrayList<>()));
        long[] heavy = new long[10]; // heavy key k: "hot-k", each 5-10% of the records; the rest, one record a key
        long updates = 0;
        for (int i = 0; i < seconds * rate; i++) {
            int k = i % 10;
            boolean hot = i % 4 != 0;
            if (hot) {
                heavy[k]++;
            }
            long now = i / rate * 1000L + i % rate * 1000L / rate;
            clock.now = now;
            double weight = sketches.sample();
            if (weight > 0) { // the keys of the sampled records only, as an engine does
                updates++;
                sketches.update(now, weight, hot ? "hot-" + k : "cold-" + i, (long) k);
            }
        }
        assertTrue(sketches.close(Duration.ofSeconds(10)));
        assertTrue(updates < 0.11 * rate + 1.05 * seconds * budget, updates + " updates"); // the first window whole

        SketchInterval interval = new SketchInterval(0, 60_000);
        SpaceSaving loads = read(root, SketchPublisher.loadsName(interval, "a", ID));
        double total = loads.totalWeight();
        double inverse = (double) rate / budget; // 1/p
        double totalDeviation = Math.sqrt((seconds - 1) * (double) rate * (inverse - 1));
        assertTrue(Math.abs(total - seconds * rate) < 4 * totalDeviation, "total weight " + total);
        double bound = total / capacity;
        for (int k = 0; k < 10; k++) {
            double deviation = Math.sqrt(heavy[k] * (inverse - 1));
            double estimate = loads.estimate(SketchKey.of("hot-" + k));
            String what = "hot-" + k + ": " + estimate + " for " + heavy[k] + " records, deviation " + deviation
                    + ", Space-Saving's bound " + bound;
            assertTrue(estimate > heavy[k] - 4 * deviation && estimate < heavy[k] + 4 * deviation + bound, what);
            assertTrue(Math.abs(estimate - heavy[k]) < 0.05 * heavy[k], what); // 5%, for these counts
        }
    }

    @Test
    void optionsAreCheckedWhenBuiltAndNameThePublisher() {
        SketcherOptions options = options(HOP, "store", Duration.ofMinutes(5), 100, null);
        assertEquals("a-b", options.name());
        assertEquals(100, options.emptySketches().pairs().capacity());
        assertThrows(IllegalArgumentException.class,
                () -> options(new Hop("a", "a"), "store", Duration.ofMinutes(5), 100, null));
        assertThrows(IllegalArgumentException.class,
                () -> options(HOP, "hdfs://nn/store", Duration.ofMinutes(5), 100, null));
        IllegalArgumentException shortInterval = assertThrows(IllegalArgumentException.class,
                () -> options(HOP, "store", Duration.ofMillis(999), 100, null));
        assertTrue(shortInterval.getMessage().contains("at least 1 s"), shortInterval.getMessage());
        assertThrows(IllegalArgumentException.class,
                () -> options(HOP, "store", Duration.ofMinutes(5), 0, null));
        assertThrows(IllegalArgumentException.class,
                () -> options(HOP, "store", Duration.ofMinutes(5), 100, "x".repeat(61)));
        assertThrows(IllegalArgumentException.class,
                () -> options(HOP, null, Duration.ofMinutes(5), 100, null));
        IllegalArgumentException noBudget = assertThrows(IllegalArgumentException.class,
                () -> new SketcherOptions(HOP, "store", Duration.ofMinutes(5), 100, true, null, 0));
        assertTrue(noBudget.getMessage().contains("updatesPerSecond"), noBudget.getMessage());
    }

    private static SketcherOptions options(Hop hop, String store, Duration interval, int capacity, String name) {
        return new SketcherOptions(hop, store, interval, capacity, true, name,
                SketcherOptions.DEFAULT_UPDATES_PER_SECOND);
    }
}
