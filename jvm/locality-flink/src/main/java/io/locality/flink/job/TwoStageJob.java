package io.locality.flink.job;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.locality.routing.LocalityStore;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.Topology;
import java.io.IOException;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.file.src.FileSource;
import org.apache.flink.connector.file.src.reader.TextLineInputFormat;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * A Flink job with two stateful operators in a chain, keyed through a store's routing tables or on the
 * raw keys, that measures how many records stayed in their task slot between the two:
 *
 * <pre>
 * TwoStageJob --store STORE [--version N] --input FILE_OR_DIR --mode tables|raw
 *             [--parallelism P] [--max-parallelism M] [--output DIR]
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
 * subtask ran, the hop counts, and the run time. Exit status 0 on success, 2 when an option, the store,
 * the input or an input line is wrong (the message names it).
 */
public final class TwoStageJob {
    private TwoStageJob() {}

    public static void main(String[] args) throws Exception {
        try {
            ObjectNode summary = run(JobOptions.parse(args), StreamExecutionEnvironment.getExecutionEnvironment());
            System.out.println(new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(summary));
        } catch (IllegalArgumentException | IOException e) {
            System.err.println("error: " + e.getMessage());
            System.err.println(JobOptions.USAGE);
            System.exit(2);
        } catch (Exception e) {
            Throwable badInput = badInput(e);
            if (badInput == null) {
                throw e;
            }
            System.err.println("error: " + badInput.getMessage());
            System.exit(2);
        }
    }

    /** The bad input line that failed a job (an IllegalArgumentException of {@link ParseRecord}), if one did. */
    private static Throwable badInput(Throwable failure) {
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            if (cause instanceof IllegalArgumentException && cause.getStackTrace().length > 0
                    && cause.getStackTrace()[0].getClassName().equals(ParseRecord.class.getName())) {
                return cause;
            }
        }
        return null;
    }

    /**
     * Builds the job on {@code env}, runs it to the end of the input, and returns its summary document.
     *
     * @throws IllegalArgumentException naming the option, file or input line that is wrong
     */
    public static ObjectNode run(JobOptions options, StreamExecutionEnvironment env) throws Exception {
        LocalityStore store = new LocalityStore(options.store());
        RoutingConfiguration tables = options.version() == null ? store.load() : store.load(options.version());
        Topology topology = tables.topology();
        if (topology.operators().size() < 2) {
            throw new IllegalArgumentException("the store's topology has one operator " + topology.operators()
                    + "; the job needs two in a chain");
        }
        String firstName = topology.operators().get(0);
        String secondName = topology.operators().get(1);
        TwoStagePipeline pipeline = new TwoStagePipeline(
                Stage.of(tables.table(firstName), 0, options.mode(), options.parallelism(), options.maxParallelism()),
                Stage.of(tables.table(secondName), 1, options.mode(), options.parallelism(),
                        options.maxParallelism()));
        Path input = new Path(options.input());
        if (!input.getFileSystem().exists(input)) {
            throw new IllegalArgumentException("--input " + input + " does not exist");
        }
        env.setParallelism(pipeline.first().parallelism());
        FileSource<String> lines = FileSource.forRecordStreamFormat(new TextLineInputFormat(), input).build();
        DataStream<TraceRecord> records = env.fromSource(lines, WatermarkStrategy.noWatermarks(), "input")
                .map(new ParseRecord(firstName, secondName)).name("parse");
        DataStream<TraceRecord> counted = pipeline.apply(records);
        if (options.output() == null) {
            counted.sinkTo(new DiscardingSink<>()).name("discard");
        } else {
            counted.map(new RecordLine(firstName, secondName)).name("as JSON")
                    .sinkTo(FileSink.forRowFormat(new Path(options.output()), new SimpleStringEncoder<String>()).build())
                    .name("output");
        }
        System.err.printf("locality: %s, version %d: %s (parallelism %d, max parallelism %d) -> %s (%d, %d), "
                + "keyed on %s%n", options.store(), tables.version(), firstName, pipeline.first().parallelism(),
                pipeline.first().maxParallelism(), secondName, pipeline.second().parallelism(),
                pipeline.second().maxParallelism(), options.mode() == Mode.TABLES ? "the tables' routing keys"
                        : "the raw keys");
        JobExecutionResult result = env.execute("locality two-stage " + firstName + " -> " + secondName + " ("
                + options.mode().label() + ")");
        JobSummary summary = JobSummary.of(pipeline, result);
        ObjectNode doc = summary.toJson(new ObjectMapper());
        doc.put("mode", options.mode().label());
        doc.put("store", options.store().toString());
        doc.put("version", tables.version());
        doc.putArray("operators").add(firstName).add(secondName);
        System.err.printf("locality: %,d records in %.1f s, %.2f%% of them stayed in their task slot%n",
                summary.records(), summary.seconds(), 100 * summary.sameSlotShare());
        return doc;
    }
}
