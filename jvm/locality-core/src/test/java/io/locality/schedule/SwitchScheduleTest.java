package io.locality.schedule;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.storage.StoreDamagedException;
import io.locality.store.ConfigStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The store's SCHEDULE read as the Python store writes it. */
class SwitchScheduleTest {
    @TempDir
    Path store;

    @Test
    void answersTheVersionInForceAtEveryPoint() throws Exception {
        Files.writeString(store.resolve("SCHEDULE"), """
                {"entries": [{"from": -9223372036854775808, "version": 3}, {"from": 150, "version": 4},
                             {"from": 900, "version": 3}], "sealed_until": 1000}""");
        SwitchSchedule schedule = new ConfigStore(store).schedule();
        assertEquals(3, schedule.versionAt(Long.MIN_VALUE));
        assertEquals(3, schedule.versionAt(149));
        assertEquals(4, schedule.versionAt(150));
        assertEquals(4, schedule.versionAt(899));
        assertEquals(3, schedule.versionAt(900));
        assertTrue(schedule.covers(999));
        assertFalse(schedule.covers(1000));
    }

    @Test
    void theWritersTokenIsNoConcernOfReaders() throws Exception {
        Files.writeString(store.resolve("SCHEDULE"), """
                {"entries": [{"from": -9223372036854775808, "version": 3000000000}, {"from": 150, "version": 4}],
                 "sealed_until": 1000, "writer": "0123456789abcdef0123456789abcdef"}""");
        SwitchSchedule schedule = new ConfigStore(store).schedule();
        assertEquals(3_000_000_000L, schedule.versionAt(149));
        assertEquals(List.of(new SwitchSchedule.Switch(150, 3_000_000_000L, 4)), schedule.switches());
    }

    @Test
    void aStoreWithoutScheduleHasAnEmptyOneAndADamagedOneIsNamed() throws Exception {
        assertTrue(new ConfigStore(store).schedule().isEmpty());
        assertThrows(IllegalStateException.class, () -> new ConfigStore(store).schedule().versionAt(0));
        Files.writeString(store.resolve("SCHEDULE"), "{\"entries\": [{\"version\": 1}], \"sealed_until\": 5}");
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).schedule());
        assertTrue(e.getMessage().contains("SCHEDULE is damaged"), e.getMessage());
        Files.delete(store.resolve("SCHEDULE"));
        Files.createDirectory(store.resolve("SCHEDULE"));
        StoreDamagedException directory = assertThrows(StoreDamagedException.class,
                () -> new ConfigStore(store).schedule());
        assertTrue(directory.getMessage().contains("SCHEDULE is damaged: it is a directory"), directory.getMessage());
    }

    private static SwitchSchedule of(long[] starts, long[] versions, long sealedUntil) {
        return new SwitchSchedule(starts, versions, sealedUntil);
    }

    @Test
    void aScheduleReplacesTheKnownOneOnlyIfItExtendsIt() {
        long b = SwitchSchedule.BEGINNING;
        SwitchSchedule known = of(new long[] {b, 100}, new long[] {1, 2}, 500);
        assertTrue(known.isExtensionOf(known));
        assertTrue(of(new long[] {b, 100, 600}, new long[] {1, 2, 3}, 700).isExtensionOf(known), "a switch added");
        assertTrue(of(new long[] {b, 100}, new long[] {1, 2}, 900).isExtensionOf(known), "the seal moved on");
        assertFalse(SwitchSchedule.empty().isExtensionOf(known), "a missing SCHEDULE reads as the empty schedule");
        assertFalse(of(new long[] {b, 100}, new long[] {1, 2}, 400).isExtensionOf(known), "the seal moved back");
        assertFalse(of(new long[] {b, 100}, new long[] {1, 3}, 500).isExtensionOf(known), "a settled entry changed");
        assertFalse(of(new long[] {b}, new long[] {1}, 500).isExtensionOf(known), "a settled entry is gone");
        // an entry from the seal on is not settled yet: the publisher may replace it (Python's rule alike)
        SwitchSchedule atTheSeal = of(new long[] {b, 600}, new long[] {1, 3}, 600);
        assertTrue(of(new long[] {b, 600}, new long[] {1, 4}, 700).isExtensionOf(atTheSeal));
        assertEquals(List.of(4L), of(new long[] {b, 600}, new long[] {1, 4}, 700).versionsNewSince(atTheSeal));
        assertEquals(List.of(1L, 3L), atTheSeal.versionsNewSince(SwitchSchedule.empty()));
    }
}
