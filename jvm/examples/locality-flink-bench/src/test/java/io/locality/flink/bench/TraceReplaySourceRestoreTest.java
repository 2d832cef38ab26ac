package io.locality.flink.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * The replay on a Flink MiniCluster (4 subtasks) stopped with a savepoint mid-replay on version 1 and restarted
 * from it on version 2, whose partition of the trace differs: the readers exchange their positions through the
 * enumerator, and every record of the passes is emitted exactly once over both jobs, each by the subtask its
 * job's version names.
 */
class TraceReplaySourceRestoreTest {
    private static final int PARALLELISM = 4;
    private static final int MAX_PARALLELISM = 128;
    private static final int LINES = 1000;
    private static final long PASSES = 6;
    private static final long WAIT_MILLIS = 120_000;

    @RegisterExtension
    static final MiniClusterExtension MINI_CLUSTER = new MiniClusterExtension(
            new MiniClusterResourceConfiguration.Builder().setNumberTaskManagers(1)
                    .setNumberSlotsPerTaskManager(PARALLELISM).build());

    @TempDir
    Path dir;

    /** Writes {@code subtask \t first key \t second key} per record to its own file, 1 ms per record. */
    static final class SlowLines implements Sink<Tuple3<String, String, byte[]>> {
        private static final long serialVersionUID = 1L;
        private final String directory;

        SlowLines(Path directory) {
            this.directory = directory.toString();
        }

        @Override
        public SinkWriter<Tuple3<String, String, byte[]>> createWriter(WriterInitContext context) throws IOException {
            int subtask = context.getTaskInfo().getIndexOfThisSubtask();
            BufferedWriter out = Files.newBufferedWriter(Path.of(directory, "part-" + subtask + ".txt"));
            return new SinkWriter<>() {
                @Override
                public void write(Tuple3<String, String, byte[]> record, Context context)
                        throws IOException, InterruptedException {
                    out.write(subtask + "\t" + record.f0 + "\t" + record.f1 + "\n");
                    out.flush();
                    Thread.sleep(1);
                }

                @Override
                public void flush(boolean endOfInput) throws IOException {
                    out.flush();
                }

                @Override
                public void close() throws IOException {
                    out.close();
                }
            };
        }
    }

    private JobClient start(Path trace, int version, Path out, String savepoint) throws Exception {
        Files.createDirectories(out);
        Configuration configuration = new Configuration();
        if (savepoint != null) {
            configuration.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(configuration);
        env.setParallelism(PARALLELISM);
        env.setMaxParallelism(MAX_PARALLELISM);
        TraceReplaySource source = new TraceReplaySource(trace, TraceReplayReaderTest.ROUTES, version, MAX_PARALLELISM,
                PARALLELISM, 0, PASSES, true);
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "replay").uid("replay")
                .sinkTo(new SlowLines(out)).uid("lines");
        return env.executeAsync("replay on version " + version);
    }

    private static List<String[]> lines(Path out) throws IOException {
        List<String[]> lines = new ArrayList<>();
        try (Stream<Path> parts = Files.list(out)) {
            for (Path part : parts.toList()) {
                for (String line : Files.readAllLines(part, StandardCharsets.UTF_8)) {
                    lines.add(line.split("\t"));
                }
            }
        }
        return lines;
    }

    private static void waitFor(Path[] outs, long records) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MILLIS;
        long seen = 0;
        while (seen < records) {
            assertTrue(System.currentTimeMillis() < deadline, "only " + seen + " of " + records + " records");
            Thread.sleep(100);
            seen = 0;
            for (Path out : outs) {
                seen += lines(out).size();
            }
        }
    }

    @Test
    void everyRecordIsEmittedOnceAcrossAStopOnOneVersionAndARestartOnAnother() throws Exception {
        Path trace = TraceReplayReaderTest.numberedTrace(dir, LINES);
        Path[] outs = {dir.resolve("v1"), dir.resolve("v2")};
        JobClient first = start(trace, 1, outs[0], null);
        waitFor(new Path[] {outs[0]}, LINES); // a sixth of the replay: the stop comes mid-replay
        String savepoint = first.stopWithSavepoint(false, dir.resolve("savepoints").toUri().toString(),
                SavepointFormatType.CANONICAL).get(WAIT_MILLIS, TimeUnit.MILLISECONDS);
        JobClient second = start(trace, 2, outs[1], savepoint);
        waitFor(outs, PASSES * LINES);
        Thread.sleep(500); // anything beyond the passes would show by now
        second.cancel().get(WAIT_MILLIS, TimeUnit.MILLISECONDS);

        Map<String, Integer> emitted = new HashMap<>();
        for (int version = 1; version <= 2; version++) {
            List<String[]> lines = lines(outs[version - 1]);
            assertTrue(lines.size() >= LINES && lines.size() < PASSES * LINES, version + ": " + lines.size());
            for (String[] line : lines) {
                assertEquals(Integer.parseInt(line[0]), KeyGroupRangeAssignment.assignKeyToParallelOperator(
                        line[1] + "/v" + version, MAX_PARALLELISM, PARALLELISM), "version " + version + "'s subtask");
                emitted.merge(line[2], 1, Integer::sum);
            }
        }
        assertEquals(LINES, emitted.size());
        emitted.forEach((tag, times) -> assertEquals(PASSES, (long) times, tag + " emitted " + times + " times"));
    }
}
