package io.locality.flink.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceEvent;
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

    /** Version v routes a record by its first key with v appended: each version partitions the trace otherwise. */
    static final VersionRoutes ROUTES = version -> record -> record.f0 + "/v" + version;

    private static TraceReplayReader reader(Path trace, int version, int subtask, long passes, boolean waitAtEnd,
            List<SourceEvent> sent) {
        return new TraceReplayReader(trace, ROUTES, version, MAX_PARALLELISM, PARALLELISM, subtask, 100, passes,
                waitAtEnd, sent::add);
    }

    private static List<Tuple3<String, String, byte[]>> replay(Path trace, int subtask, long passes) {
        TraceReplayReader reader = new TraceReplayReader(trace, version -> new FieldKey(0), 1, MAX_PARALLELISM,
                PARALLELISM, subtask, 100, passes, false, event -> { });
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
    void anEmptyTraceEndsAtOnceOrIdlesWhenToldToWait(@TempDir Path dir) throws Exception {
        Path trace = Files.writeString(dir.resolve("empty.tsv"), "");
        TraceReplayReader ending = reader(trace, 1, 0, 1, false, new ArrayList<>());
        ending.start();
        assertEquals(InputStatus.END_OF_INPUT, ending.pollNext(new Collected()));
        TraceReplayReader waiting = reader(trace, 1, 0, 1, true, new ArrayList<>());
        waiting.start();
        assertEquals(InputStatus.NOTHING_AVAILABLE, waiting.pollNext(new Collected()));
        assertTrue(!waiting.isAvailable().isDone());
    }

    @Test
    void aLineWithoutATabIsNamedWithItsFile(@TempDir Path dir) throws Exception {
        Path trace = Files.writeString(dir.resolve("bad.tsv"), "a\tb\nno tab here\n");
        TraceReplayReader reader = reader(trace, 1, 0, 1, false, new ArrayList<>());
        IllegalArgumentException error = assertThrows(IllegalArgumentException.class, reader::start);
        assertTrue(error.getMessage().contains("bad.tsv") && error.getMessage().contains("no tab here"));
    }

    /** {@code keys.tsv} in {@code dir}: line i is {@code user(i % 53) \t tag i}. */
    static Path numberedTrace(Path dir, int lines) throws Exception {
        List<String> text = new ArrayList<>();
        for (int i = 0; i < lines; i++) {
            text.add("user" + (i % 53) + "\ttag" + i);
        }
        return Files.write(dir.resolve("keys.tsv"), text, StandardCharsets.UTF_8);
    }

    @Test
    void restoredOnAnotherVersionTheReplayEmitsEveryRecordTheOldOneHadNotAndNoOther(@TempDir Path dir)
            throws Exception {
        Path trace = numberedTrace(dir, 400);
        long passes = 3;
        Map<String, Integer> emitted = new HashMap<>();
        // Version 1: each subtask gets a different way through the replay before the savepoint.
        List<ReplayPosition> savepoint = new ArrayList<>();
        for (int subtask = 0; subtask < PARALLELISM; subtask++) {
            TraceReplayReader old = reader(trace, 1, subtask, passes, true, new ArrayList<>());
            old.start();
            Collected out = new Collected();
            for (int i = 0; i < 37 + 41 * subtask; i++) {
                assertEquals(InputStatus.MORE_AVAILABLE, old.pollNext(out));
            }
            out.records.forEach(r -> emitted.merge(r.f1, 1, Integer::sum));
            savepoint.addAll(old.snapshotState(1));
        }
        // Version 2 restored from it: each reader sends its position, then gets everyone's.
        List<SourceEvent> sent = new ArrayList<>();
        List<TraceReplayReader> readers = new ArrayList<>();
        for (int subtask = 0; subtask < PARALLELISM; subtask++) {
            TraceReplayReader restored = reader(trace, 2, subtask, passes, true, sent);
            restored.addSplits(List.of(savepoint.get(subtask)));
            restored.start();
            assertEquals(InputStatus.NOTHING_AVAILABLE, restored.pollNext(new Collected()));
            readers.add(restored);
        }
        long[] ordinals = sent.stream().mapToLong(e -> ((PositionExchange.Restored) e).ordinal()).toArray();
        assertEquals(PARALLELISM, ordinals.length);
        for (int subtask = 0; subtask < PARALLELISM; subtask++) {
            TraceReplayReader restored = readers.get(subtask);
            restored.handleSourceEvents(new PositionExchange.AllRestored(1, ordinals));
            assertTrue(restored.isAvailable().isDone());
            Collected out = new Collected();
            for (int i = 0; i < 10_000 && restored.pollNext(out) == InputStatus.MORE_AVAILABLE; i++) {
            }
            assertEquals(InputStatus.NOTHING_AVAILABLE, restored.pollNext(out)); // idle at the end: --end wait
            assertTrue(!restored.isAvailable().isDone());
            for (Tuple3<String, String, byte[]> record : out.records) {
                assertEquals(subtask, KeyGroupRangeAssignment.assignKeyToParallelOperator(record.f0 + "/v2",
                        MAX_PARALLELISM, PARALLELISM), "version 2's partition");
                emitted.merge(record.f1, 1, Integer::sum);
            }
        }
        assertEquals(400, emitted.size());
        emitted.forEach((tag, times) -> assertEquals(passes, (long) times, tag + " emitted " + times + " times"));
    }

    @Test
    void aPositionSavedWhileCatchingUpResumesTheCatchUp(@TempDir Path dir) throws Exception {
        Path trace = numberedTrace(dir, 200);
        long[] oldOrdinals = {150, 0, 390, 60};
        Map<String, Integer> emitted = new HashMap<>();
        for (int subtask = 0; subtask < PARALLELISM; subtask++) {
            TraceReplayReader first = reader(trace, 2, subtask, 2, false, new ArrayList<>());
            first.addSplits(List.of(new ReplayPosition(1, subtask, oldOrdinals[subtask], ReplayPosition.NONE,
                    new long[0])));
            first.start();
            first.handleSourceEvents(new PositionExchange.AllRestored(1, oldOrdinals));
            Collected out = new Collected();
            first.pollNext(out);
            ReplayPosition saved = first.snapshotState(2).get(0);
            assertEquals(1, saved.previousVersion());
            TraceReplayReader second = reader(trace, 2, subtask, 2, false, new ArrayList<>());
            second.addSplits(List.of(saved));
            second.start(); // same version: no exchange needed
            for (int i = 0; i < 10_000 && second.pollNext(out) == InputStatus.MORE_AVAILABLE; i++) {
            }
            assertEquals(InputStatus.END_OF_INPUT, second.pollNext(out));
            out.records.forEach(r -> emitted.merge(r.f1, 1, Integer::sum));
        }
        // What version 1's subtasks had emitted: the records of their share below their ordinal.
        TraceReplayReader[] old = new TraceReplayReader[PARALLELISM];
        for (int subtask = 0; subtask < PARALLELISM; subtask++) {
            old[subtask] = reader(trace, 1, subtask, 2, false, new ArrayList<>());
            old[subtask].start();
            Collected out = new Collected();
            while (old[subtask].snapshotState(0).get(0).ordinal() < oldOrdinals[subtask]
                    && old[subtask].pollNext(out) == InputStatus.MORE_AVAILABLE) {
            }
            out.records.forEach(r -> emitted.merge(r.f1, 1, Integer::sum));
        }
        assertEquals(200, emitted.size());
        emitted.forEach((tag, times) -> assertEquals(2, (int) times, tag + " emitted " + times + " times"));
    }
}
