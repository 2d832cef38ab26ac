package io.locality.flink.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CountingSinkTest {
    private static long[] read(Path file) throws Exception {
        String[] fields = Files.readString(file).trim().split(" ");
        return new long[] {Long.parseLong(fields[0]), Long.parseLong(fields[1])};
    }

    @Test
    void theFileHoldsTheTimeAndTheRecordsAtEachReportFlushAndClose(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("sink-3.txt");
        long before = System.currentTimeMillis();
        CountingSink.Writer<String> writer = new CountingSink.Writer<>(file);
        assertEquals(0, read(file)[1]);
        for (int i = 0; i < 1000; i++) {
            writer.write("record", null);
        }
        assertEquals(0, read(file)[1]); // not written per record: the timer reports
        writer.report();
        assertEquals(1000, read(file)[1]);
        writer.write("record", null);
        writer.flush(false); // a savepoint's barrier
        assertEquals(1001, read(file)[1]);
        writer.write("record", null);
        writer.close();
        long[] end = read(file);
        assertEquals(1002, end[1]);
        assertTrue(end[0] >= before && end[0] <= System.currentTimeMillis());
        assertEquals(1, Files.list(dir).count()); // written aside and renamed: no temporary file left
    }
}
