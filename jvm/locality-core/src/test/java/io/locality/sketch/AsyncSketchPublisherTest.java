package io.locality.sketch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.storage.ObjectStore;
import io.locality.storage.StoreUnavailableException;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The counting thread hands its sketches over and never waits; a store that is out loses intervals, said once. */
class AsyncSketchPublisherTest {
    private static final String ID = "job-a-b-0";

    /** A store in memory that the test can stop, or slow down until it opens a gate. */
    private static final class TestStore implements ObjectStore {
        final Map<String, byte[]> objects = new ConcurrentHashMap<>();
        final AtomicInteger puts = new AtomicInteger();
        volatile boolean down;
        volatile CountDownLatch gate = new CountDownLatch(0);

        @Override
        public Optional<byte[]> read(String name, long limit) {
            return Optional.ofNullable(objects.get(name));
        }

        @Override
        public void put(String name, byte[] data) throws IOException {
            puts.incrementAndGet();
            try {
                gate.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (down) {
                throw new StoreUnavailableException("cannot write " + name + ": Connection refused");
            }
            objects.put(name, data);
        }

        @Override
        public String locate(String name) {
            return "memory:" + name;
        }

        @Override
        public String uri() {
            return "memory:";
        }

        void awaitPuts(int count) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (puts.get() < count && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(count, puts.get());
        }
    }

    /** What the listener heard, in order. */
    private static final class Heard implements AsyncSketchPublisher.Listener {
        final List<String> events = Collections.synchronizedList(new ArrayList<>());

        void await(String event) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!events.contains(event) && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertTrue(events.contains(event), events.toString());
        }

        @Override
        public void published(SketchInterval interval, List<String> names) {
            events.add("published " + interval.start() + " " + names.size());
        }

        @Override
        public void failing(SketchInterval interval, Exception why) {
            events.add("failing " + interval.start() + " " + why.getMessage());
        }

        @Override
        public void resumed(SketchInterval interval, int dropped) {
            events.add("resumed " + interval.start() + " after " + dropped);
        }

        @Override
        public void dropped(SketchInterval interval, String why) {
            events.add("dropped " + interval.start() + " " + why);
        }
    }

    private static HopSketches sketches() {
        HopSketches sketches = new HopSketches(new Hop("a", "b"), 16, true);
        sketches.update("x", "y", 1);
        return sketches;
    }

    private static SketchInterval second(int start) {
        return new SketchInterval(start * 1000L, start * 1000L + 1000);
    }

    @Test
    void aSlowStoreNeverHoldsTheCounterAndTheIntervalBeyondTwoIsDropped() throws Exception {
        TestStore store = new TestStore();
        store.gate = new CountDownLatch(1);
        Heard heard = new Heard();
        AsyncSketchPublisher publisher = new AsyncSketchPublisher(new SketchPublisher(store), ID, heard, "t");
        long started = System.nanoTime();
        assertTrue(publisher.submit(second(0), sketches()));
        store.awaitPuts(1); // the first interval is being written: its put waits at the gate
        assertTrue(publisher.submit(second(1), sketches()));
        assertFalse(publisher.submit(second(2), sketches()));
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(5), "submit never waits on the store");
        assertEquals(List.of("dropped 2000 the store is still writing two earlier intervals"), heard.events);
        store.gate.countDown();
        assertTrue(publisher.close(Duration.ofSeconds(10)));
        assertEquals(List.of("dropped 2000 the store is still writing two earlier intervals", "published 0 3",
                "published 1000 3"), heard.events);
        assertEquals(6, store.objects.size());
        assertTrue(store.objects.containsKey("sketches/0000000001000-0000000002000/pairs/a/b/" + ID + ".lcss"));
        assertFalse(publisher.submit(second(3), sketches()));
        assertEquals("dropped 3000 the publisher is closed", heard.events.get(3));
    }

    @Test
    void aStoreThatIsOutLosesItsIntervalsAndIsReportedOncePerRun() throws Exception {
        TestStore store = new TestStore();
        store.down = true;
        Heard heard = new Heard();
        AsyncSketchPublisher publisher = new AsyncSketchPublisher(new SketchPublisher(store), ID, heard, "t");
        for (int i = 0; i < 3; i++) {
            assertTrue(publisher.submit(second(i), sketches()));
            store.awaitPuts(i + 1); // each interval fails at its first object
        }
        store.down = false;
        publisher.submit(second(3), sketches());
        heard.await("published 3000 3");
        store.down = true;
        publisher.submit(second(4), sketches());
        assertTrue(publisher.close(Duration.ofSeconds(10)));
        assertEquals(List.of("failing 0 cannot write sketches/0000000000000-0000000001000/pairs/a/b/" + ID
                + ".lcss: Connection refused", "resumed 3000 after 3", "published 3000 3",
                "failing 4000 cannot write sketches/0000000004000-0000000005000/pairs/a/b/" + ID
                + ".lcss: Connection refused"), heard.events);
        assertEquals(3, store.objects.size(), "the sketches of the store's intervals out are lost, no others");
    }
}
