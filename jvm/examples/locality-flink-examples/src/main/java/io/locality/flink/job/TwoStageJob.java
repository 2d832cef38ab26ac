package io.locality.flink.job;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.locality.flink.JobVersion;
import io.locality.flink.MainExit;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.Topology;
import io.locality.store.ConfigStore;
import java.io.IOException;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.filesystem.rollingpolicies.OnCheckpointRollingPolicy;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * A Flink job with two stateful operators in a chain, keyed through a store's routing tables or on the
 * raw keys, that measures how many records stayed in their task slot between the two:
 *
 * <pre>
 * TwoStageJob --store STORE [--version N] --input FILE_OR_DIR --mode tables|raw
 *             [--parallelism P] [--max-parallelism M] [--output DIR] [--rate R]
 *             [--sketches STORE [--sketch-interval SECONDS] [--sketch-capacity COUNTERS]
 *                               [--sketch-updates-per-second N]]
 * </pre>
 *
 * <p>Reads JSON lines ({@link ParseRecord}: a string field per operator of the store's topology, the
 * first two in pipeline order, and an optional integer {@code seq}), keys them by the first operator's
 * key, counts per real key, keys them by the second operator's key, counts ({@link TwoStagePipeline}),
 * and writes one JSON line per record to {@code --output} ({@link RecordLine}; without it, the records
 * are discarded). With {@code --mode tables} both operators key on {@code RoutingKeySelector}s of the
 * store's version (its tables must be learned with {@code --hash flink}), with their parallelism and max
 * parallelism; with {@code --mode raw}, on the keys themselves (Flink's own hash: the baseline), with the
 * tables' parallelism unless {@code --parallelism} / {@code --max-parallelism} say otherwise.
 *
 * <p>Run from a plain {@code java} command it starts a local MiniCluster with one TaskManager of
 * {@code P} slots; submitted with {@code flink run} it runs on that cluster. The input and output paths
 * must then be readable / writable by every TaskManager. On stdout it prints one JSON document
 * ({@link JobSummary}): records, the share whose two subtasks shared a slot and a TaskManager, where each
 * subtask ran, the hop counts, and the run time; submitted detached ({@code flink run -d}, Flink's REST
 * API), only the job's id. Exit status 0 on success, 2 when an option, the store, the input or an input
 * line is wrong (the message names it); in a cluster such a failure is thrown ({@link MainExit}).
 *
 * <p>With {@code --rate R} the input is replayed at {@code R} records per second by a source that a
 * savepoint resumes ({@link IndexedLines}), so the job can be stopped with a savepoint in the middle of
 * its input and restarted from it. Every operator has a uid ({@code input}, {@code parse},
 * {@code count-per-OPERATOR}, {@code as-json}, {@code output} or {@code discard}), and the output's part
 * files are committed at every checkpoint and savepoint: a job stopped and restarted writes each record
 * once.
 *
 * <p>With {@code --sketches STORE} a {@code KeyPairSketcher} between the two operators (uid
 * {@code sketch-FIRST-SECOND}) publishes the sketches of their key pairs and keys into {@code STORE} every
 * {@code --sketch-interval} seconds (default 60), {@code --sketch-capacity} counters each (default 100,000),
 * sampling a subtask's records above {@code --sketch-updates-per-second} (default 1,000; 2147483647 for none), and
 * reports the share of records that stayed on their server as Flink metrics. On a local MiniCluster the summary
 * then holds those metrics' final values under {@code locality_metrics} ({@link RetainedMetrics}), per version:
 * the sums of the subtasks' {@code records} and {@code local_records}, their ratio, and each subtask's.
 */
public final class TwoStageJob {
    private TwoStageJob() {}

    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        if (MainExit.isLocal(env)) { // a MiniCluster of this JVM: its metrics are kept for the summary
            env = StreamExecutionEnvironment.getExecutionEnvironment(RetainedMetrics.addTo(new Configuration()));
        }
        try {
            ObjectNode summary = run(JobOptions.parse(args), env);
            System.out.println(new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(summary));
        } catch (IllegalArgumentException | IOException e) {
            MainExit.fail(env, 2, "error: " + e.getMessage() + System.lineSeparator() + JobOptions.USAGE, e);
        } catch (Exception e) {
            // the bad input line that failed the job
            Throwable badInput = MainExit.thrownBy(e, IllegalArgumentException.class, ParseRecord.class.getName());
            if (badInput == null) {
                throw e;
            }
            MainExit.fail(env, 2, "error: " + badInput.getMessage(), e);
        }
    }

    /**
     * Builds the job on {@code env}, runs it to the end of the input, and returns its summary document.
     *
     * @throws IllegalArgumentException naming the option, file or input line that is wrong
     */
    public static ObjectNode run(JobOptions options, StreamExecutionEnvironment env) throws Exception {
        ConfigStore store = ConfigStore.open(options.store());
        RoutingConfiguration tables = options.version() == null ? store.load() : store.load(options.version());
        Topology topology = tables.topology();
        if (topology.operators().size() < 2) {
            throw new IllegalArgumentException("the store's topology has one operator " + topology.operators()
                    + "; the job needs two in a chain");
        }
        String firstName = topology.operators().get(0);
        String secondName = topology.operators().get(1);
        Stage first = Stage.of(tables.table(firstName), 0, options.mode(), options.parallelism(),
                options.maxParallelism());
        Stage second = Stage.of(tables.table(secondName), 1, options.mode(), options.parallelism(),
                options.maxParallelism());
        TwoStagePipeline pipeline = new TwoStagePipeline(first, second, options.sketching() == null ? null
                : options.sketching().sketcher(first, second, tables.version()));
        Path input = new Path(options.input());
        if (!input.getFileSystem().exists(input)) {
            throw new IllegalArgumentException("--input " + input + " does not exist");
        }
        env.setParallelism(pipeline.first().parallelism());
        JobVersion.declare(env, tables.version());
        Source<String, ?, ?> lines = options.rate() == null
                ? FileSource.forRecordStreamFormat(new TextLineInputFormat(), input).build()
                : IndexedLines.source(options.input(), options.rate());
        DataStream<TraceRecord> records = env.fromSource(lines, WatermarkStrategy.noWatermarks(), "input").uid("input")
                .map(new ParseRecord(firstName, secondName)).name("parse").uid("parse");
        DataStream<TraceRecord> counted = pipeline.apply(records);
        if (options.output() == null) {
            counted.sinkTo(new DiscardingSink<>()).name("discard").uid("discard");
        } else {
            // part files roll at every checkpoint and savepoint, so a stopped job's output is committed
            FileSink<String> sink = FileSink.forRowFormat(new Path(options.output()), new SimpleStringEncoder<String>())
                    .withRollingPolicy(OnCheckpointRollingPolicy.build()).build();
            counted.map(new RecordLine(firstName, secondName, tables.version())).name("as JSON").uid("as-json")
                    .sinkTo(sink).name("output").uid("output");
        }
        System.err.printf("locality: %s, version %d: %s (parallelism %d, max parallelism %d) -> %s (%d, %d), "
                + "keyed on %s%n", options.store(), tables.version(), firstName, pipeline.first().parallelism(),
                pipeline.first().maxParallelism(), secondName, pipeline.second().parallelism(),
                pipeline.second().maxParallelism(), options.mode() == Mode.TABLES ? "the tables' routing keys"
                        : "the raw keys");
        JobExecutionResult result = env.execute("locality two-stage " + firstName + " -> " + secondName + " ("
                + options.mode().label() + ", version " + tables.version() + ")");
        ObjectNode doc = new ObjectMapper().createObjectNode();
        if (!result.isJobExecutionResult()) { // submitted detached (flink run -d, REST): the job runs on
            doc.put("job_id", result.getJobID().toHexString());
            describe(doc, options, tables.version(), firstName, secondName);
            return doc;
        }
        JobSummary summary = JobSummary.of(pipeline, result);
        doc = summary.toJson(new ObjectMapper());
        describe(doc, options, tables.version(), firstName, secondName);
        if (options.sketching() != null && MainExit.isLocal(env)) {
            doc.set("locality_metrics", RetainedMetrics.summary(new ObjectMapper()));
        }
        System.err.printf("locality: %,d records in %.1f s, %.2f%% of them stayed in their task slot%n",
                summary.records(), summary.seconds(), 100 * summary.sameSlotShare());
        return doc;
    }

    private static void describe(ObjectNode doc, JobOptions options, long version, String first, String second) {
        doc.put("mode", options.mode().label());
        doc.put("store", options.store());
        doc.put("version", version);
        doc.putArray("operators").add(first).add(second);
    }
}
