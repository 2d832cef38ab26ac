package io.locality.flink.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.flink.Tables;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The job's options and input lines: read when right, refused by name when wrong. */
class BadInputTest {
    @TempDir
    Path store;

    @Test
    void anInputLineIsReadOrRefusedNamingTheField() {
        ParseRecord parse = new ParseRecord("location", "hashtag");
        TraceRecord record = parse.map("{\"seq\": 7, \"location\": \"US/Ohio\", \"hashtag\": \"tbt\", \"lat\": 1.5}");
        assertEquals(7L, record.seq);
        assertEquals("US/Ohio", record.first);
        assertEquals("tbt", record.second);
        assertNull(parse.map("{\"location\": \"a\", \"hashtag\": \"b\"}").seq);
        assertRefused(() -> parse.map("{\"location\": \"a\"}"), "no field 'hashtag'");
        assertRefused(() -> parse.map("{\"location\": 5, \"hashtag\": \"b\"}"), "field 'location' must be a string");
        assertRefused(() -> parse.map("{\"seq\": \"x\", \"location\": \"a\", \"hashtag\": \"b\"}"), "'seq' must be");
        assertRefused(() -> parse.map("not json"), "not JSON: 'not json'");
        assertRefused(() -> parse.map("[1, 2]"), "not a JSON object");
    }

    @Test
    void optionsAreCheckedByName() {
        String s = store.toString();
        JobOptions options = JobOptions.parse("--store", s, "--input", "in.jsonl", "--mode", "raw", "--parallelism", "4");
        assertEquals(Mode.RAW, options.mode());
        assertEquals(4, options.parallelism());
        assertNull(options.maxParallelism());
        assertRefused(() -> JobOptions.parse("--store", s, "--input", "x"), "--mode is required");
        assertRefused(() -> JobOptions.parse("--store", s, "--input", "x", "--mode", "hash"), "--mode must be");
        assertRefused(() -> JobOptions.parse("--store", "hdfs://nn/store", "--input", "x", "--mode", "raw"),
                "'hdfs', which is not served");
        assertEquals("s3://locality/nightly",
                JobOptions.parse("--store", "s3://locality/nightly", "--input", "x", "--mode", "raw").store());
        assertEquals(3_000_000_000L,
                JobOptions.parse("--store", s, "--version", "3000000000", "--input", "x", "--mode", "raw").version());
        assertRefused(() -> JobOptions.parse("--store", s, "--input", "x", "--mode", "raw", "--parallelism", "0"),
                "--parallelism must be an integer >= 1; got '0'");
        assertRefused(() -> JobOptions.parse("--store", s, "--input", "x", "--mode", "raw", "--slots", "2"),
                "unknown option '--slots'");
        assertRefused(() -> JobOptions.parse("--store", s, "--input"), "--input needs a value");
        assertEquals(new Sketching(s, 60, 100_000, 1_000),
                JobOptions.parse("--store", s, "--input", "x", "--mode", "raw", "--sketches", s).sketching());
        assertEquals(500, JobOptions.parse("--store", s, "--input", "x", "--mode", "raw", "--sketches", s,
                "--sketch-updates-per-second", "500").sketching().updatesPerSecond());
        assertRefused(() -> JobOptions.parse("--store", s, "--input", "x", "--mode", "raw",
                "--sketch-updates-per-second", "500"), "need --sketches STORE");
    }

    @Test
    void tablesRunOnlyWithTheirParallelism() {
        var table = Tables.parse(Tables.FLINK).table("tag");
        assertEquals(16, Stage.of(table, 1, Mode.TABLES, null, null).maxParallelism());
        assertRefused(() -> Stage.of(table, 1, Mode.TABLES, 4, null), "are for parallelism 3 and max parallelism 16");
        Stage raw = Stage.of(table, 1, Mode.RAW, 4, 32);
        assertEquals(4, raw.parallelism());
        assertEquals(32, raw.maxParallelism());
        assertRefused(() -> Stage.of(table, 1, Mode.RAW, 40, null), "1 <= parallelism <= max parallelism");
    }

    private static void assertRefused(Runnable call, String message) {
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, call::run);
        assertTrue(refused.getMessage().contains(message), refused.getMessage());
    }
}
