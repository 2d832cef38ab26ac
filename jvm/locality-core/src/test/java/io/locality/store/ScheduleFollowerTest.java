package io.locality.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.schedule.ScheduleExpiredException;
import io.locality.schedule.SwitchSchedule;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A point past the seal waits until the publisher extends the schedule, and no longer than its bound. */
class ScheduleFollowerTest {
    @TempDir
    Path store;

    private final List<String> heard = new CopyOnWriteArrayList<>();
    private void schedule(String entries, long sealedUntil) throws Exception {
        Path aside = store.resolve("SCHEDULE.tmp"); // replaced whole, as the Python store does
        Files.writeString(aside, "{\"entries\": [" + entries + "], \"sealed_until\": " + sealedUntil + "}");
        Files.move(aside, store.resolve("SCHEDULE"), StandardCopyOption.ATOMIC_MOVE);
    }

    @Test
    void aSettledPointIsAnsweredFromWhatWasReadWithoutWaiting() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}, {\"from\": 100, \"version\": 2}", 500);
        ScheduleFollower follower = new ScheduleFollower(new ConfigStore(store), Duration.ofMillis(10),
                Duration.ofSeconds(1), recorder);
        assertEquals(1, follower.settle(99).versionAt(99));
        assertEquals(2, follower.settle(499).versionAt(499));
        assertEquals(List.of(new SwitchSchedule.Switch(100, 1, 2)), follower.schedule().switches());
        assertTrue(waits().isEmpty(), heard.toString());
    }

    @Test
    void aPointPastTheSealWaitsForThePublisherAndFollowsTheNewSchedule() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}", 500);
        ScheduleFollower follower = new ScheduleFollower(new ConfigStore(store), Duration.ofMillis(10),
                Duration.ofSeconds(20), recorder);
        Thread publisher = new Thread(() -> {
            try {
                Thread.sleep(300);
                schedule("{\"from\": -9223372036854775808, \"version\": 1}, {\"from\": 600, \"version\": 3}", 601);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        publisher.start();
        SwitchSchedule settled = follower.settle(600);
        publisher.join();
        assertEquals(3, settled.versionAt(600), "the version scheduled while the point waited");
        assertEquals(1, settled.versionAt(599));
        assertEquals(List.of("waiting 600 sealed 500", "waited 600"), waits());
    }

    @Test
    void aPointPastTheSealGivesUpAfterItsBoundNamingTheSeal() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}", 500);
        ScheduleFollower follower = new ScheduleFollower(new ConfigStore(store), Duration.ofMillis(10),
                Duration.ofMillis(200), recorder);
        long started = System.nanoTime();
        ScheduleExpiredException late = assertThrows(ScheduleExpiredException.class, () -> follower.settle(500));
        assertTrue(System.nanoTime() - started >= Duration.ofMillis(200).toNanos());
        assertTrue(late.getMessage().contains("sealed until 500") && late.getMessage().contains("point 500"),
                late.getMessage());
    }

    @Test
    void anEntryThatSchedulesTheVersionInForceIsNoSwitch() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}, {\"from\": 10, \"version\": 1},"
                + " {\"from\": 20, \"version\": 2}, {\"from\": 30, \"version\": 1}", 40);
        SwitchSchedule schedule = new ConfigStore(store).schedule();
        assertEquals(List.of(new SwitchSchedule.Switch(20, 1, 2), new SwitchSchedule.Switch(30, 2, 1)),
                schedule.switches());
        assertEquals(List.of(new SwitchSchedule.Switch(30, 2, 1)), schedule.switchesAfter(20));
        assertEquals(schedule.switches(), schedule.switchesAfter(19));
        assertEquals(List.of(), schedule.switchesAfter(30));
    }

    private ScheduleFollower follower(OutageStore objects, Duration maxWait) throws Exception {
        return new ScheduleFollower(new ConfigStore(objects), Duration.ofMillis(10), maxWait, recorder);
    }

    private final ScheduleFollower.WaitListener recorder = new ScheduleFollower.WaitListener() {
        @Override
        public void waiting(long point, long sealedUntil) {
            heard.add("waiting " + point + " sealed " + sealedUntil);
        }

        @Override
        public void waited(long point, long millis) {
            heard.add("waited " + point);
        }

        @Override
        public void scheduleTaken(SwitchSchedule schedule) {
            heard.add("taken sealed " + schedule.sealedUntil());
        }

        @Override
        public void scheduleKept(SwitchSchedule known, String why) {
            heard.add("kept sealed " + known.sealedUntil() + ": " + why);
        }

        @Override
        public void storeWaiting(String what, java.io.IOException why) {
            heard.add("store waiting for " + what);
        }

        @Override
        public void storeResumed(String what, long millis) {
            heard.add("store resumed for " + what);
        }
    };

    /** What the follower said about waiting for a point, apart from the schedules it took or kept. */
    private List<String> waits() {
        return heard.stream().filter(line -> line.startsWith("wait")).toList();
    }

    @Test
    void aMissingOlderOrUnreadableScheduleNeverReplacesTheOneKnown() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}, {\"from\": 100, \"version\": 2}", 500);
        OutageStore objects = new OutageStore(store);
        ScheduleFollower follower = follower(objects, Duration.ofMillis(300));
        SwitchSchedule known = follower.schedule();

        Files.delete(store.resolve("SCHEDULE")); // read as the empty schedule
        assertEquals(known, follower.refresh());
        schedule("{\"from\": -9223372036854775808, \"version\": 1}", 400); // an old backup restored
        assertEquals(known, follower.refresh());
        assertEquals(known, follower.refresh()); // the same reason twice is told once
        objects.down = true;
        assertEquals(known, follower.refresh());
        assertEquals(2, follower.settle(499).versionAt(499), "a point below the seal needs no read");

        ScheduleExpiredException late = assertThrows(ScheduleExpiredException.class, () -> follower.settle(500));
        assertTrue(late.getMessage().contains("could not tell: the store's schedule cannot be read")
                && late.getMessage().contains("Connection refused"), late.getMessage());
        assertEquals(3, heard.stream().filter(line -> line.startsWith("kept sealed 500")).count(), heard.toString());
        assertTrue(heard.get(0).contains("([] sealed until -9223372036854775808) does not extend"), heard.toString());
        assertTrue(heard.get(1).contains("([v1 from the beginning] sealed until 400) does not extend"), heard.toString());
        assertTrue(heard.get(2).contains("cannot be read"), heard.toString());
        assertEquals(2, follower.schedule().versionAt(100));
    }

    @Test
    void aPointPastTheSealWaitsOutAnOutageAndGoesOnOnceTheStoreAnswers() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}", 500);
        OutageStore objects = new OutageStore(store);
        ScheduleFollower follower = follower(objects, Duration.ofSeconds(20));
        objects.down = true;
        Thread publisher = new Thread(() -> {
            try {
                Thread.sleep(300);
                schedule("{\"from\": -9223372036854775808, \"version\": 1}, {\"from\": 600, \"version\": 3}",
                        700);
                objects.down = false; // the store answers again, with the publisher's news
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        long started = System.nanoTime();
        publisher.start();
        SwitchSchedule settled = follower.settle(600);
        publisher.join();
        assertTrue(System.nanoTime() - started >= Duration.ofMillis(300).toNanos());
        assertEquals(3, settled.versionAt(600));
        assertTrue(heard.get(0).startsWith("kept sealed 500: the store's schedule cannot be read"), heard.toString());
        assertEquals(List.of("waiting 600 sealed 500", "taken sealed 700", "waited 600"), heard.subList(1, 4));
    }

    @Test
    void versionsOfASchedulesReadAreLoadedThenSoAnOutageDoesNotStopTheirRecords() throws Exception {
        TestStores.publish(store, 1, TestStores.CONFIGURATION);
        TestStores.publish(store, 2, TestStores.CONFIGURATION.replace("[\"jobs\", 3]", "[\"jobs\", 2]"));
        TestStores.publish(store, 3, TestStores.CONFIGURATION.replace("[\"jobs\", 3]", "[\"jobs\", 1]"));
        schedule("{\"from\": -9223372036854775808, \"version\": 1}, {\"from\": 100, \"version\": 2}", 500);
        OutageStore objects = new OutageStore(store);
        ScheduleFollower follower = follower(objects, Duration.ofMillis(200));
        schedule("{\"from\": -9223372036854775808, \"version\": 1}, {\"from\": 100, \"version\": 2},"
                + " {\"from\": 600, \"version\": 3}", 700);
        follower.refresh();
        objects.down = true;
        int reads = objects.reads.get();
        assertEquals(2, follower.configurationAt(499).route("tag", "jobs"), "loaded when the follower started");
        assertEquals(1, follower.configurationAt(650).route("tag", "jobs"), "loaded when its schedule was read");
        assertEquals(reads, objects.reads.get(), "no read while the store is out");

        // version 1 was never loaded: it waits for the store, within the bound, and is named past it
        long started = System.nanoTime();
        IOException out = assertThrows(IOException.class, () -> follower.configurationAt(50));
        assertTrue(System.nanoTime() - started >= Duration.ofMillis(200).toNanos());
        assertTrue(out instanceof io.locality.storage.StoreUnavailableException
                && out.getMessage().contains("cannot read version 1 of " + store)
                && out.getMessage().contains("did not answer"), out.getMessage());
        objects.down = false;
        ScheduleFollower patient = new ScheduleFollower(new ConfigStore(objects), Duration.ofMillis(10),
                Duration.ofSeconds(20), recorder);
        objects.down = true;
        Thread again = new Thread(() -> {
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            objects.down = false;
        });
        again.start();
        assertEquals(3, patient.configurationAt(50).route("tag", "jobs"), "read once the store answers");
        again.join();
        assertTrue(heard.contains("store waiting for version 1 of " + store)
                && heard.contains("store resumed for version 1 of " + store), heard.toString());
    }

    @Test
    void aMissingVersionIsNotWaitedFor() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 9}", 500);
        ScheduleFollower follower = follower(new OutageStore(store), Duration.ofSeconds(20));
        long started = System.nanoTime();
        assertThrows(java.io.FileNotFoundException.class, () -> follower.configurationAt(0));
        assertTrue(System.nanoTime() - started < Duration.ofSeconds(5).toNanos());
    }
}
