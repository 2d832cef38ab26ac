package io.locality.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.sketch.SketchKey;
import io.locality.sketch.SpaceSaving;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.Metric;
import org.apache.flink.runtime.testutils.InMemoryReporter;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * The sketcher between two keyed operators on a MiniCluster (3 slots): every subtask publishes the exact pair and
 * key counts of what it passed (capacity above the distinct keys), its local-record counter is the number of records
 * whose second subtask was its own, and a store that cannot be written costs the job nothing.
 */
class KeyPairSketcherTest {
    private static final int PARALLELISM = 3;
    private static final int MAX_PARALLELISM = 128;
    /**
     * Sent as fast as the MiniCluster goes, so above the default budget in a tenth of a second on a fast machine:
     * the sketchers here count every record, for the exact counts (RecordSamplerTest tests the sample).
     */
    private static final int RECORDS = 3_000;
    /** Above the distinct pairs (at most one per record): every sketch, and their merge, is exact. */
    private static final int CAPACITY = RECORDS + 1;
    private static final InMemoryReporter REPORTER = InMemoryReporter.createWithRetainedMetrics();

    @RegisterExtension
    static final MiniClusterExtension MINI_CLUSTER = new MiniClusterExtension(
            new MiniClusterResourceConfiguration.Builder().setNumberTaskManagers(1)
                    .setNumberSlotsPerTaskManager(PARALLELISM)
                    .setConfiguration(REPORTER.addToConfiguration(new Configuration())).build());

    @TempDir
    Path tmp;

    /** (key of a, key of b, subtask of a, subtask of b). */
    private static List<Tuple4<String, Long, Integer, Integer>> input() {
        List<Tuple4<String, Long, Integer, Integer>> records = new ArrayList<>();
        for (int i = 0; i < RECORDS; i++) {
            records.add(Tuple4.of("city-" + (i * 7 % 40), (long) (i * i % 53), -1, -1));
        }
        return records;
    }

    /** Writes its subtask's index into field {@code field} of each record. */
    private static final class MarkSubtask extends RichMapFunction<Tuple4<String, Long, Integer, Integer>,
            Tuple4<String, Long, Integer, Integer>> {
        private final int field;

        MarkSubtask(int field) {
            this.field = field;
        }

        @Override
        public Tuple4<String, Long, Integer, Integer> map(Tuple4<String, Long, Integer, Integer> record) {
            record.setField(getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), field);
            return record;
        }
    }

    /** Runs a -> sketcher -> b over the input; the records out, and the job's result. */
    private static List<Tuple4<String, Long, Integer, Integer>> run(
            KeyPairSketcher<Tuple4<String, Long, Integer, Integer>> sketcher, JobExecutionResult[] result)
            throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(PARALLELISM);
        env.setMaxParallelism(MAX_PARALLELISM);
        JobVersion.declare(env, 7);
        DataStream<Tuple4<String, Long, Integer, Integer>> out = env.fromData(input())
                .keyBy(r -> r.f0).map(new MarkSubtask(2)).name("a")
                .map(sketcher).name("sketch")
                .keyBy(r -> r.f1).map(new MarkSubtask(3)).name("b");
        List<Tuple4<String, Long, Integer, Integer>> records = new ArrayList<>();
        try (CloseableIterator<Tuple4<String, Long, Integer, Integer>> collected = out.collectAsync()) {
            result[0] = env.execute("sketcher test");
            collected.forEachRemaining(records::add);
        }
        return records;
    }

    private static KeyPairSketcher.Builder<Tuple4<String, Long, Integer, Integer>> builder(String store) {
        return KeyPairSketcher.<Tuple4<String, Long, Integer, Integer>>builder("a", r -> r.f0, "b", r -> r.f1)
                .store(store).interval(Duration.ofHours(1)).capacity(CAPACITY).countEveryRecord();
    }

    /** Every sketch object under {@code root}, merged per kind ({@code pairs/a/b}, {@code loads/a}, ...). */
    private static Map<String, SpaceSaving> merged(Path root, Set<String> publishers) throws IOException {
        Map<String, SpaceSaving> merged = new HashMap<>();
        List<Path> files;
        try (Stream<Path> walk = Files.walk(root.resolve("sketches"))) {
            files = walk.filter(Files::isRegularFile).toList();
        }
        for (Path file : files) {
            Path relative = root.resolve("sketches").relativize(file);
            String kind = relative.subpath(1, relative.getNameCount() - 1).toString();
            publishers.add(file.getFileName().toString());
            SpaceSaving sketch = SpaceSaving.fromBytes(Files.readAllBytes(file));
            merged.merge(kind, sketch, SpaceSaving::merge);
        }
        return merged;
    }

    /** The locality metrics {@code name} of every subtask of {@code job}, as Flink's reporter was handed them. */
    private static List<Metric> metrics(JobID job, String name) {
        List<Metric> found = new ArrayList<>();
        REPORTER.getMetricsByGroup().forEach((group, metrics) -> {
            Map<String, String> variables = group.getAllVariables();
            if (job.toString().equals(variables.get("<job_id>")) && "7".equals(variables.get("<version>"))
                    && List.of(group.getScopeComponents()).contains("locality") && metrics.containsKey(name)) {
                found.add(metrics.get(name));
            }
        });
        return found;
    }

    private static long metric(JobID job, String name) {
        List<Metric> counters = metrics(job, name);
        assertEquals(PARALLELISM, counters.size(), name + " of each subtask");
        return counters.stream().mapToLong(c -> ((Counter) c).getCount()).sum();
    }

    @Test
    void theSketchesHoldTheExactCountsAndTheMetricTheRecordsThatStayed() throws Exception {
        JobExecutionResult[] result = new JobExecutionResult[1];
        List<Tuple4<String, Long, Integer, Integer>> out = run(builder(tmp.toString())
                .routing(r -> r.f1, PARALLELISM, MAX_PARALLELISM).build(), result);
        assertEquals(RECORDS, out.size());

        Set<String> publishers = new TreeSet<>();
        Map<String, SpaceSaving> sketches = merged(tmp, publishers);
        assertEquals(Set.of("pairs/a/b", "loads/a", "loads/b"), sketches.keySet());
        String job = result[0].getJobID().toHexString();
        assertEquals(Set.of(job + "-a-b-0.lcss", job + "-a-b-1.lcss", job + "-a-b-2.lcss"), publishers);
        Map<List<Object>, Long> pairs = out.stream().collect(Collectors.groupingBy(r -> List.of(r.f0, r.f1),
                Collectors.counting()));
        assertEquals(RECORDS, sketches.get("pairs/a/b").totalWeight());
        pairs.forEach((pair, count) -> assertEquals(count.doubleValue(), sketches.get("pairs/a/b").estimate(
                SketchKey.of(pair.get(0), pair.get(1))), pair.toString()));
        assertEquals(pairs.size(), sketches.get("pairs/a/b").size(), "no pair that was not sent");
        out.stream().collect(Collectors.groupingBy(r -> r.f0, Collectors.counting())).forEach((key, count) ->
                assertEquals(count.doubleValue(), sketches.get("loads/a").estimate(SketchKey.of(key)), key));
        out.stream().collect(Collectors.groupingBy(r -> r.f1, Collectors.counting())).forEach((key, count) ->
                assertEquals(count.doubleValue(), sketches.get("loads/b").estimate(SketchKey.of(key)), key.toString()));

        long stayed = out.stream().filter(r -> r.f2.equals(r.f3)).count();
        JobID id = result[0].getJobID();
        assertEquals(RECORDS, metric(id, "records"));
        assertEquals(stayed, metric(id, "localRecords"), "a record is local when b's subtask is a's");
        assertTrue(stayed > 0 && stayed < RECORDS);
        List<Metric> gauges = metrics(id, "localShare");
        assertEquals(PARALLELISM, gauges.size());
        for (Metric gauge : gauges) {
            double share = ((Number) ((Gauge<?>) gauge).getValue()).doubleValue();
            assertTrue(share > 0 && share < 1, "localShare " + share);
        }
    }

    @Test
    void aStoreThatCannotBeWrittenCostsTheJobNothing() throws Exception {
        Path file = Files.writeString(tmp.resolve("a-file"), "not a directory");
        JobExecutionResult[] result = new JobExecutionResult[1];
        List<Tuple4<String, Long, Integer, Integer>> out = run(builder(file.resolve("store").toString())
                .firstLoads(false).build(), result);
        assertEquals(RECORDS, out.size(), "every record went through");
        assertEquals(RECORDS, metric(result[0].getJobID(), "records"));
        assertEquals("not a directory", Files.readString(file));
    }

    @Test
    void optionsAreCheckedWhenTheSketcherIsBuilt() {
        assertThrows(IllegalArgumentException.class, () -> complete("a", "a").build());
        assertThrows(IllegalArgumentException.class, () -> complete("../a", "b").build());
        IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
                () -> KeyPairSketcher.builder("a", r -> r, "b", r -> r).store(tmp.toString()).build());
        assertTrue(missing.getMessage().contains("needs a store, an interval and a capacity"), missing.getMessage());
        IllegalArgumentException scheme = assertThrows(IllegalArgumentException.class,
                () -> complete("a", "b").store("hdfs://nn/store").build());
        assertTrue(scheme.getMessage().contains("hdfs"), scheme.getMessage());
        IllegalArgumentException longName = assertThrows(IllegalArgumentException.class,
                () -> complete("x".repeat(40), "y".repeat(40)).build());
        assertTrue(longName.getMessage().contains("at most 60 characters"), longName.getMessage());
        assertThrows(IllegalArgumentException.class, () -> complete("a", "b").interval(Duration.ofMillis(10)).build());
        assertThrows(IllegalArgumentException.class, () -> complete("a", "b").capacity(0).build());
        IllegalArgumentException noBudget = assertThrows(IllegalArgumentException.class,
                () -> complete("a", "b").updatesPerSecond(0).build());
        assertTrue(noBudget.getMessage().contains("updatesPerSecond"), noBudget.getMessage());
        assertThrows(IllegalArgumentException.class, () -> KeyPairSketcher.builder("a", r -> r, "b", r -> r)
                .routing(r -> r, 4, 2));
    }

    /** A builder of every option a sketcher needs, valid but for what a test changes. */
    private KeyPairSketcher.Builder<Long> complete(String first, String second) {
        return KeyPairSketcher.<Long>builder(first, r -> r, second, r -> r).store(tmp.toString())
                .interval(Duration.ofMinutes(1)).capacity(10);
    }
}
