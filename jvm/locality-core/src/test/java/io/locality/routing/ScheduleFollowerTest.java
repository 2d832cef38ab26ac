package io.locality.routing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
    private final ScheduleFollower.WaitListener listener = new ScheduleFollower.WaitListener() {
        @Override
        public void waiting(long point, long sealedUntil) {
            heard.add("waiting " + point + " sealed " + sealedUntil);
        }

        @Override
        public void waited(long point, long millis) {
            heard.add("waited " + point);
        }
    };

    private void schedule(String entries, long sealedUntil) throws Exception {
        Path aside = store.resolve("SCHEDULE.tmp"); // replaced whole, as the Python store does
        Files.writeString(aside, "{\"entries\": [" + entries + "], \"sealed_until\": " + sealedUntil + "}");
        Files.move(aside, store.resolve("SCHEDULE"), StandardCopyOption.ATOMIC_MOVE);
    }

    @Test
    void aSettledPointIsAnsweredFromWhatWasReadWithoutWaiting() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}, {\"from\": 100, \"version\": 2}", 500);
        ScheduleFollower follower = new ScheduleFollower(new LocalityStore(store), Duration.ofMillis(10),
                Duration.ofSeconds(1), listener);
        assertEquals(1, follower.settle(99).versionAt(99));
        assertEquals(2, follower.settle(499).versionAt(499));
        assertEquals(List.of(new SwitchSchedule.Switch(100, 1, 2)), follower.schedule().switches());
        assertTrue(heard.isEmpty(), heard.toString());
    }

    @Test
    void aPointPastTheSealWaitsForThePublisherAndFollowsTheNewSchedule() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}", 500);
        ScheduleFollower follower = new ScheduleFollower(new LocalityStore(store), Duration.ofMillis(10),
                Duration.ofSeconds(20), listener);
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
        assertEquals(List.of("waiting 600 sealed 500", "waited 600"), heard);
    }

    @Test
    void aPointPastTheSealGivesUpAfterItsBoundNamingTheSeal() throws Exception {
        schedule("{\"from\": -9223372036854775808, \"version\": 1}", 500);
        ScheduleFollower follower = new ScheduleFollower(new LocalityStore(store), Duration.ofMillis(10),
                Duration.ofMillis(200), listener);
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
        SwitchSchedule schedule = new LocalityStore(store).schedule();
        assertEquals(List.of(new SwitchSchedule.Switch(20, 1, 2), new SwitchSchedule.Switch(30, 2, 1)),
                schedule.switches());
        assertEquals(List.of(new SwitchSchedule.Switch(30, 2, 1)), schedule.switchesAfter(20));
        assertEquals(schedule.switches(), schedule.switchesAfter(19));
        assertEquals(List.of(), schedule.switchesAfter(30));
    }
}
