package io.locality.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.routing.RoutingConfiguration;
import io.locality.storage.StoreDamagedException;
import io.locality.storage.StoreUnavailableException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A reader that starts during an outage starts on what its JVM loaded, or waits for the store, bounded. */
class LastGoodVersionsTest {
    private static final String VERSION_TWO = TestStores.CONFIGURATION.replace("[\"jobs\", 3]", "[\"jobs\", 2]");

    @TempDir
    Path root;

    private OutageStore objects;
    private ConfigStore store;
    private final List<String> heard = new CopyOnWriteArrayList<>();
    private final LastGoodVersions.Listener listener = new LastGoodVersions.Listener() {
        @Override
        public void keptVersion(RoutingConfiguration kept, IOException why) {
            heard.add("kept " + kept.version());
        }

        @Override
        public void storeWaiting(String what, IOException why) {
            heard.add("waiting for " + what);
        }

        @Override
        public void storeResumed(String what, long millis) {
            heard.add("resumed " + what);
        }
    };

    @BeforeEach
    void oneVersion() throws Exception {
        LastGoodVersions.forget();
        TestStores.publish(root, 1, TestStores.CONFIGURATION);
        objects = new OutageStore(root);
        store = new ConfigStore(objects);
    }

    private static StoreRetry waiting(Duration bound) {
        return new StoreRetry(Duration.ofMillis(10), bound);
    }

    /** Brings the store back after {@code millis}. */
    private Thread backAfter(long millis) {
        Thread back = new Thread(() -> {
            try {
                Thread.sleep(millis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            objects.down = false;
        });
        back.start();
        return back;
    }

    @Test
    void theCurrentVersionDuringAnOutageIsTheLastOneThisJvmRead() throws Exception {
        assertEquals(1, LastGoodVersions.current(store, waiting(Duration.ZERO), listener).version());
        TestStores.publish(root, 2, VERSION_TWO);
        objects.down = true;
        long started = System.nanoTime();
        assertEquals(1, LastGoodVersions.current(store, waiting(Duration.ofSeconds(20)), listener).version());
        assertTrue(System.nanoTime() - started < Duration.ofSeconds(5).toNanos(), "no wait: it had one");
        assertEquals(List.of("kept 1"), heard);
        int reads = objects.reads.get();
        assertEquals(1, LastGoodVersions.current(store, waiting(Duration.ZERO), listener).version());
        assertEquals(reads, objects.reads.get(), "right after an outage was met, no read: each may cost a timeout");
        objects.down = false;
        assertEquals(1, LastGoodVersions.current(store, waiting(Duration.ZERO), listener).version(),
                "for a while, even once the store answers");
        LastGoodVersions.forgetOutages();
        assertEquals(2, LastGoodVersions.current(store, waiting(Duration.ZERO), listener).version(), "then read");
    }

    @Test
    void aJvmThatNeverReadTheStoreWaitsForItWithinTheBound() throws Exception {
        objects.down = true;
        StoreUnavailableException out = assertThrows(StoreUnavailableException.class,
                () -> LastGoodVersions.current(store, waiting(Duration.ofMillis(200)), listener));
        assertTrue(out.getMessage().contains("cannot read the current version of " + root)
                && out.getMessage().contains("did not answer for") && out.getMessage().contains("Connection refused"),
                out.getMessage());
        Thread back = backAfter(200);
        assertEquals(1, LastGoodVersions.current(store, waiting(Duration.ofSeconds(20)), listener).version());
        back.join();
        assertEquals(List.of("waiting for the current version of " + root, "waiting for the current version of "
                + root, "resumed the current version of " + root), heard);
    }

    @Test
    void aPinnedVersionIsReadOnceAndServedFromMemoryDuringAnOutage() throws Exception {
        objects.down = true;
        Thread back = backAfter(100);
        assertEquals(1, LastGoodVersions.pinned(store, 1, waiting(Duration.ofSeconds(20)), listener).version());
        back.join();
        objects.down = true;
        int reads = objects.reads.get();
        assertEquals(1, LastGoodVersions.pinned(store, 1, waiting(Duration.ZERO), listener).version());
        assertEquals(reads, objects.reads.get());
    }

    @Test
    void damageIsNeverCoveredUp() throws Exception {
        LastGoodVersions.current(store, waiting(Duration.ZERO), listener);
        TestStores.publish(root, 2, VERSION_TWO);
        Files.writeString(TestStores.version(root, 2).resolve("configuration/configuration.json"), "{}");
        assertThrows(StoreDamagedException.class,
                () -> LastGoodVersions.current(store, waiting(Duration.ofSeconds(20)), listener));
        assertThrows(java.io.FileNotFoundException.class,
                () -> LastGoodVersions.pinned(store, 7, waiting(Duration.ofSeconds(20)), listener));
        assertEquals(List.of(), heard);
    }
}
