package io.locality.sketch;

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

    @Test
    void eachIntervalHoldsTheRecordsOfItsMomentsAndIsPublishedWhenItEnds(@TempDir Path root) throws Exception {
        List<String> heard = new ArrayList<>();
        AsyncSketchPublisher publisher = new AsyncSketchPublisher(new SketchPublisher(new LocalDirectory(root)), ID,
                new PublicationLog(root.toString(), ID, "the application", (level, message) -> heard.add(level
                        + " " + message)), "test-writer");
        IntervalSketches sketches = new IntervalSketches(new HopSketches(HOP, 10, true), 1000, publisher, 5_300);
        assertEquals(new SketchInterval(5_000, 6_000), sketches.interval());
        sketches.update(5_400, "x", "p");
        sketches.update(5_999, "x", "p");
        sketches.update(6_000, "y", "q"); // the next interval: the first one is handed over
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
        AsyncSketchPublisher publisher = new AsyncSketchPublisher(new SketchPublisher(new LocalDirectory(root)), ID,
                new PublicationLog(root.toString(), ID, "the application", (level, message) -> heard.add(level
                        + " " + message)), "test-writer");
        IntervalSketches sketches = new IntervalSketches(new HopSketches(HOP, 10, false), 1000, publisher, 0);
        for (long now = 0; now < 2_000; now += 100) { // two intervals: one written while the other waits
            sketches.update(now, 1L, 2L);
        }
        assertTrue(sketches.close(Duration.ofSeconds(10)));
        assertEquals(1, heard.size(), heard.toString());
        assertTrue(heard.get(0).startsWith(Level.WARNING + " cannot publish the sketches of "), heard.get(0));
        assertTrue(heard.get(0).endsWith("(the application runs on; this is logged once)"), heard.get(0));
    }

    @Test
    void optionsAreCheckedWhenBuiltAndNameThePublisher() {
        SketcherOptions options = new SketcherOptions(HOP, "store", Duration.ofMinutes(5), 100, true, null);
        assertEquals("a-b", options.name());
        assertEquals(100, options.emptySketches().pairs().capacity());
        assertThrows(IllegalArgumentException.class,
                () -> new SketcherOptions(new Hop("a", "a"), "store", Duration.ofMinutes(5), 100, true, null));
        assertThrows(IllegalArgumentException.class,
                () -> new SketcherOptions(HOP, "hdfs://nn/store", Duration.ofMinutes(5), 100, true, null));
        IllegalArgumentException shortInterval = assertThrows(IllegalArgumentException.class,
                () -> new SketcherOptions(HOP, "store", Duration.ofMillis(999), 100, true, null));
        assertTrue(shortInterval.getMessage().contains("at least 1 s"), shortInterval.getMessage());
        assertThrows(IllegalArgumentException.class,
                () -> new SketcherOptions(HOP, "store", Duration.ofMinutes(5), 0, true, null));
        assertThrows(IllegalArgumentException.class,
                () -> new SketcherOptions(HOP, "store", Duration.ofMinutes(5), 100, true, "x".repeat(61)));
        assertThrows(IllegalArgumentException.class,
                () -> new SketcherOptions(HOP, null, Duration.ofMinutes(5), 100, true, null));
    }
}
