package io.locality.routing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
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
        SwitchSchedule schedule = new LocalityStore(store).schedule();
        assertEquals(3, schedule.versionAt(Long.MIN_VALUE));
        assertEquals(3, schedule.versionAt(149));
        assertEquals(4, schedule.versionAt(150));
        assertEquals(4, schedule.versionAt(899));
        assertEquals(3, schedule.versionAt(900));
        assertTrue(schedule.covers(999));
        assertFalse(schedule.covers(1000));
    }

    @Test
    void aStoreWithoutScheduleHasAnEmptyOneAndADamagedOneIsNamed() throws Exception {
        assertTrue(new LocalityStore(store).schedule().isEmpty());
        assertThrows(IllegalStateException.class, () -> new LocalityStore(store).schedule().versionAt(0));
        Files.writeString(store.resolve("SCHEDULE"), "{\"entries\": [{\"version\": 1}], \"sealed_until\": 5}");
        DamagedStoreException e = assertThrows(DamagedStoreException.class, () -> new LocalityStore(store).schedule());
        assertTrue(e.getMessage().contains("SCHEDULE is damaged"), e.getMessage());
    }
}
