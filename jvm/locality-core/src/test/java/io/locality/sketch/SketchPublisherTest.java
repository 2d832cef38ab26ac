package io.locality.sketch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.storage.LocalDirectory;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

/** The sketches of an interval land where Python's read_sketches looks for them, with their own bytes. */
class SketchPublisherTest {
    @TempDir
    Path tmp;

    private static SpaceSaving sketch(int arity, Object... keys) {
        SpaceSaving sketch = new SpaceSaving(8, arity);
        for (int i = 0; i < keys.length; i += arity) {
            Object[] components = new Object[arity];
            System.arraycopy(keys, i, components, 0, arity);
            sketch.update(SketchKey.of(components));
        }
        return sketch;
    }

    private static void assertRefused(Executable call, String message) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(e.getMessage().contains(message), e.getMessage());
    }

    @Test
    void intervalsAreNamedWith13DigitsAndCutOnTheEpoch() {
        assertEquals("0000000000000-0000000060000", new SketchInterval(0, 60_000).name());
        assertEquals("1764298800000-1764302400000", SketchInterval.containing(1_764_301_234_567L, 3_600_000).name());
        assertEquals(new SketchInterval(1_764_301_200_000L, 1_764_301_260_000L),
                SketchInterval.containing(1_764_301_259_999L, 60_000));
        assertEquals(new SketchInterval(1_764_301_260_000L, 1_764_301_320_000L),
                SketchInterval.containing(1_764_301_260_000L, 60_000), "an interval's end belongs to the next");
        assertRefused(() -> new SketchInterval(5, 5), "must end after it starts");
        assertRefused(() -> new SketchInterval(-1, 5), "'start' parameter");
        assertRefused(() -> new SketchInterval(0, 10_000_000_000_000L), "'end' parameter");
        assertRefused(() -> SketchInterval.containing(5, 0), "'length' parameter");
    }

    @Test
    void everySketchIsOneObjectOfTheProtocolsNameHoldingItsBytes() throws IOException {
        SketchInterval interval = new SketchInterval(1_764_300_000_000L, 1_764_303_600_000L);
        SpaceSaving pairs = sketch(2, "paris", "jazz", "paris", "jazz", "oslo", "ski");
        SpaceSaving location = sketch(1, "paris", "paris", "oslo");
        SpaceSaving hashtag = sketch(1, "jazz", "jazz", "ski");
        Map<String, SpaceSaving> loads = new LinkedHashMap<>();
        loads.put("location", location);
        loads.put("hashtag", hashtag);
        List<String> names = new SketchPublisher(new LocalDirectory(tmp)).publish(interval, "job-1.sketch_0",
                Map.of(new Hop("location", "hashtag"), pairs), loads);
        String folder = "sketches/1764300000000-1764303600000/";
        assertEquals(List.of(folder + "pairs/location/hashtag/job-1.sketch_0.lcss",
                folder + "loads/location/job-1.sketch_0.lcss", folder + "loads/hashtag/job-1.sketch_0.lcss"), names);
        assertArrayEquals(pairs.toBytes(), Files.readAllBytes(tmp.resolve(names.get(0))));
        assertArrayEquals(location.toBytes(), Files.readAllBytes(tmp.resolve(names.get(1))));
        assertArrayEquals(hashtag.toBytes(), Files.readAllBytes(tmp.resolve(names.get(2))));
        assertEquals(2.0, SpaceSaving.fromBytes(Files.readAllBytes(tmp.resolve(names.get(0))))
                .estimate(SketchKey.of("paris", "jazz")));
    }

    @Test
    void namesAreCheckedAsPythonChecksThemAndNothingIsWrittenThen() {
        SketchPublisher publisher = new SketchPublisher(new LocalDirectory(tmp));
        SketchInterval interval = new SketchInterval(0, 1000);
        Map<Hop, SpaceSaving> pairs = Map.of(new Hop("a", "b"), sketch(2, "x", "y"));
        Map<String, SpaceSaving> loads = Map.of("a", sketch(1, "x"));
        for (String bad : List.of("../x", ".hidden", "", "a/b", "é", "a b", "x".repeat(101))) {
            assertRefused(() -> publisher.publish(interval, bad, pairs, loads), "the 'publisher' parameter of "
                    + "SketchPublisher.publish must be 1-100 characters of [A-Za-z0-9_.-], not starting with '.'; "
                    + "got '" + bad + "'");
            assertRefused(() -> publisher.publish(interval, "p", Map.of(new Hop("a", bad), sketch(2, "x", "y")),
                    Map.of()), "the 'pairs' parameter");
            assertRefused(() -> publisher.publish(interval, "p", Map.of(), Map.of(bad, sketch(1, "x"))),
                    "the 'loads' parameter");
        }
        assertEquals("x".repeat(100), SketchPublisher.checkName("x".repeat(100), "p", "o"));
        assertEquals("a.b-c_9", SketchPublisher.checkName("a.b-c_9", "p", "o"));
        assertRefused(() -> publisher.publish(interval, "p", Map.of(new Hop("a", "a"), sketch(2, "x", "y")), loads),
                "two operators");
        assertRefused(() -> publisher.publish(interval, "p", Map.of(new Hop("a", "b"), sketch(1, "x")), loads),
                "must map a -> b to a SpaceSaving of arity 2; got arity 1");
        assertRefused(() -> publisher.publish(interval, "p", pairs, Map.of("a", sketch(2, "x", "y"))),
                "must map 'a' to a SpaceSaving of arity 1; got arity 2");
        assertRefused(() -> publisher.publish(interval, "p", Map.of(), Map.of()), "no sketch");
        assertFalse(Files.exists(tmp.resolve("sketches")), "nothing is written when anything is refused");
    }

    @Test
    void aHopsSketchesKeepPairsAndBothLoadsOrTheSecondsOnly() {
        HopSketches both = new HopSketches(new Hop("a", "b"), 4, true);
        assertTrue(both.isEmpty());
        both.update("x", 7L, 1);
        both.update("x", 7, 1);
        both.update("y", 8L, 1);
        assertFalse(both.isEmpty());
        assertEquals(2.0, both.pairs().estimate(SketchKey.of("x", 7L)));
        assertEquals(List.of("a", "b"), List.copyOf(both.loads().keySet()));
        assertEquals(2.0, both.loads().get("a").estimate(SketchKey.of("x")));
        assertEquals(1.0, both.loads().get("b").estimate(SketchKey.of(8L)));
        both.update("y", 8L, 2.5); // a sampled record, counted 1/p times
        assertEquals(3.5, both.pairs().estimate(SketchKey.of("y", 8L)));
        assertRefused(() -> both.update("y", 8L, 0), "'weight'");
        HopSketches next = both.fresh();
        assertTrue(next.isEmpty() && next.pairs().capacity() == 4 && next.loads().size() == 2);
        HopSketches secondOnly = new HopSketches(new Hop("b", "c"), 4, false);
        secondOnly.update(7L, "z", 1);
        assertEquals(List.of("c"), List.copyOf(secondOnly.loads().keySet()));
        assertRefused(() -> secondOnly.update(7L, 3.5, 1), "at key position 1");
    }
}
