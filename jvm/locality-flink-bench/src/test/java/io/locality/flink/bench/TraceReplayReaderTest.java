package io.locality.flink.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceOutput;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TraceReplayReaderTest {
    private static final int PARALLELISM = 4;
    private static final int MAX_PARALLELISM = 128;

    /** Collects what a reader emits. */
    private static final class Collected implements ReaderOutput<Tuple3<String, String, byte[]>> {
        final List<Tuple3<String, String, byte[]>> records = new ArrayList<>();

        @Override
        public void collect(Tuple3<String, String, byte[]> record) {
            records.add(record);
        }

        @Override
        public void collect(Tuple3<String, String, byte[]> record, long timestamp) {
            records.add(record);
        }

        @Override
        public void emitWatermark(Watermark watermark) {
        }

        @Override
        public void markIdle() {
        }

        @Override
        public void markActive() {
        }

        @Override
        public SourceOutput<Tuple3<String, String, byte[]>> createOutputForSplit(String splitId) {
            return this;
        }

        @Override
        public void releaseOutputForSplit(String splitId) {
        }
    }

    private static List<Tuple3<String, String, byte[]>> replay(Path trace, int subtask, long passes) {
        TraceReplayReader reader = new TraceReplayReader(trace, new FieldKey(0), MAX_PARALLELISM, PARALLELISM,
                subtask, 100, passes);
        reader.start();
        Collected out = new Collected();
        for (int i = 0; i < 100_000 && reader.pollNext(out) == InputStatus.MORE_AVAILABLE; i++) {
        }
        assertEquals(InputStatus.END_OF_INPUT, reader.pollNext(out));
        return out.records;
    }

    @Test
    void eachSubtaskReplaysTheRecordsFlinkAssignsItPassesTimesInTraceOrder(@TempDir Path dir) throws Exception {
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            lines.add("user" + (i % 37) + "\ttag" + i);
        }
        Path trace = Files.write(dir.resolve("keys.tsv"), lines, StandardCharsets.UTF_8);
        List<String> replayedOnce = new ArrayList<>();
        for (int subtask = 0; subtask < PARALLELISM; subtask++) {
            List<Tuple3<String, String, byte[]>> records = replay(trace, subtask, 2);
            int share = records.size() / 2;
            assertEquals(records.size(), 2 * share);
            for (int i = 0; i < records.size(); i++) {
                Tuple3<String, String, byte[]> record = records.get(i);
                assertEquals(subtask,
                        KeyGroupRangeAssignment.assignKeyToParallelOperator(record.f0, MAX_PARALLELISM, PARALLELISM));
                assertEquals(100, record.f2.length);
                assertEquals(records.get(i % share).f1, record.f1); // the second pass repeats the first
            }
            records.subList(0, share).forEach(r -> replayedOnce.add(r.f0 + "\t" + r.f1));
        }
        assertEquals(lines.size(), replayedOnce.size());
        assertEquals(new TreeSet<>(lines), new TreeSet<>(replayedOnce));
        // Trace order within a subtask: the sequence numbers in the second keys rise.
        List<Tuple3<String, String, byte[]>> first = replay(trace, 0, 1);
        for (int i = 1; i < first.size(); i++) {
            int previous = Integer.parseInt(first.get(i - 1).f1.substring(3));
            assertTrue(Integer.parseInt(first.get(i).f1.substring(3)) > previous);
        }
    }

    @Test
    void aLineWithoutATabIsNamedWithItsFile(@TempDir Path dir) throws Exception {
        Path trace = Files.writeString(dir.resolve("bad.tsv"), "a\tb\nno tab here\n");
        TraceReplayReader reader = new TraceReplayReader(trace, new FieldKey(0), MAX_PARALLELISM, PARALLELISM, 0, 0,
                1);
        IllegalArgumentException error = assertThrows(IllegalArgumentException.class, reader::start);
        assertTrue(error.getMessage().contains("bad.tsv") && error.getMessage().contains("no tab here"));
    }
}
