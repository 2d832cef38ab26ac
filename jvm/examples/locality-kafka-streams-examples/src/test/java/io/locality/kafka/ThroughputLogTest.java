package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.streams.processor.TaskId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The throughput log: one line, the records of one stage so far and when, replaced as they come. */
class ThroughputLogTest {
    @TempDir
    Path folder;

    @Test
    void theFileHoldsOneLineOfTheTimeAndTheStagesRecordsSoFar() throws Exception {
        Path file = folder.resolve("throughput.txt");
        long before = System.currentTimeMillis();
        ThroughputLog log = new ThroughputLog(file, "hashtag", Duration.ofMillis(20));
        assertEquals("0", line(file).get(1)); // written before the first record
        for (int i = 0; i < 5; i++) {
            log.processed("hashtag", new TaskId(1, i), "#paris", "{}", i + 1);
            log.processed("location", new TaskId(0, i), "FR", "{}", i + 1); // another stage: not counted
        }
        long deadline = System.currentTimeMillis() + 10_000;
        while (!line(file).get(1).equals("5") && System.currentTimeMillis() < deadline) {
            Thread.sleep(10); // the writer's thread reports every 20 ms
        }
        assertEquals("5", line(file).get(1));
        log.processed("hashtag", new TaskId(1, 0), "#lyon", "{}", 1);
        log.close(); // the last count, at once
        List<String> last = line(file);
        assertEquals("6", last.get(1));
        long at = Long.parseLong(last.get(0));
        assertTrue(before <= at && at <= System.currentTimeMillis(), last.toString());
        try (var files = Files.list(folder)) {
            assertEquals(List.of(file), files.toList()); // nothing left aside
        }
    }

    @Test
    void theAppPassesEveryRecordToEachOfItsLogs() {
        List<String> told = new ArrayList<>();
        ProcessedRecords first = (operator, task, key, value, count) -> told.add("first " + key);
        ProcessedRecords both = first.andThen((operator, task, key, value, count) -> told.add("second " + key));
        both.processed("hashtag", new TaskId(1, 0), "#paris", "{}", 1);
        assertEquals(List.of("first #paris", "second #paris"), told);
        assertSame(first, ProcessedRecords.NONE.andThen(first));
    }

    private static List<String> line(Path file) throws Exception {
        String text = Files.readString(file);
        assertTrue(text.endsWith("\n") && text.indexOf('\n') == text.length() - 1, text);
        return List.of(text.strip().split(" "));
    }
}
