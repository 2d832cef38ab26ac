package io.locality.flink.state;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.locality.flink.MainExit;
import io.locality.store.ConfigStore;
import java.io.IOException;
import java.util.List;
import java.util.Set;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Rewrites a savepoint of a job keyed by a store's tables for another version of them
 * ({@link SavepointRewrite}):
 *
 * <pre>
 * RewriteSavepoint --savepoint PATH --output PATH --store STORE --from V1 --to V2
 *                  --operator OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE] [--operator ...]
 *                  [--parallelism P]
 * </pre>
 *
 * <p>{@code --from} is the version the job that took the savepoint ran on, {@code --to} the version the job
 * restarts on; {@code --operator} names each keyed operator whose real keys' state the tables of
 * {@code OPERATOR} route ({@link RealKeyOperator}). The new savepoint is written to {@code --output}, which
 * must not exist; the old one is left as it is (the job can still restart from it on the old version).
 * {@code --parallelism} is the number of the rewrite's tasks (default: the tables' parallelism; each task
 * rewrites one subtask's files at a time); the rewritten operators keep the savepoint's parallelism. The
 * savepoint must be in Flink's canonical format (the default of a savepoint), whatever the job's state
 * backend: the rewrite reads and writes its files directly.
 * {@code --store} is a directory or an {@code s3://bucket/prefix} URI ({@code ConfigStore.open}).
 *
 * <p>Run from {@code java} it rewrites on a local MiniCluster and prints one JSON document: the paths,
 * the versions, per operator the {@link RewriteSummary} and the run time; a failed run removes what it
 * wrote. Its file systems are then those of {@code FLINK_CONF_DIR} and {@code FLINK_PLUGINS_DIR}, as in a
 * Flink process ({@link LocalFileSystems}): with the S3 plugin there, the savepoints may be {@code s3://}
 * URIs (an application cluster, which takes no jar, is switched this way: {@code locality switch flink
 * --rewrite local}). Submitted to a cluster ({@code flink run}, or Flink's REST API: {@code /jars/:id/run})
 * it runs there detached and prints the job's id; the summary is then in the job's accumulators. The savepoint,
 * the output and the store must be readable (the output writable) where the job runs. Exit status 2 names
 * a wrong option, version, operator or savepoint, or a savepoint not taken on {@code --from}; 1 another
 * failure. In a cluster a failure is thrown instead ({@code MainExit}).
 *
 * <p>Locally, give the JVM the {@code --add-opens} options Flink's distribution gives its own processes on
 * Java 17 ({@code java.base/java.lang} and {@code java.base/java.util} to {@code ALL-UNNAMED}).
 */
public final class RewriteSavepoint {
    static final String USAGE = "usage: RewriteSavepoint --savepoint PATH --output PATH --store STORE --from V1 "
            + "--to V2 --operator OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE] [--operator ...] [--parallelism P]";

    private RewriteSavepoint() {}

    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        ObjectNode doc;
        try {
            LocalFileSystems.initialize(env);
            doc = run(args, env);
        } catch (IllegalArgumentException | IOException e) {
            MainExit.fail(env, 2, "error: " + e.getMessage() + System.lineSeparator() + USAGE, e);
            return;
        } catch (Exception e) {
            // a refusal of the rewrite job (an IllegalStateException of this package)
            Throwable refused = MainExit.thrownBy(e, IllegalStateException.class,
                    RewriteSavepoint.class.getPackageName());
            if (refused == null) {
                e.printStackTrace();
            }
            MainExit.fail(env, refused == null ? 1 : 2, "error: " + (refused == null ? e : refused.getMessage()), e);
            return;
        }
        System.out.println(new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(doc));
    }

    /**
     * Checks the arguments, builds the rewrite on {@code env} and runs it; its JSON document.
     *
     * @throws IllegalArgumentException naming the option, version, operator or savepoint that is wrong
     */
    public static ObjectNode run(String[] args, StreamExecutionEnvironment env) throws Exception {
        ToolArguments options = ToolArguments.parse(args,
                Set.of("--savepoint", "--output", "--store", "--from", "--to", "--parallelism"),
                Set.of("--operator"),
                Set.of("--savepoint", "--output", "--store", "--from", "--to", "--operator"));
        ConfigStore store = ConfigStore.open(options.get("--store"));
        long fromVersion = options.integer("--from", 1, Long.MAX_VALUE);
        long toVersion = options.integer("--to", 1, Long.MAX_VALUE);
        List<RealKeyOperator> operators = options.all("--operator").stream().map(RealKeyOperator::parse).toList();
        SavepointRewrite rewrite = SavepointRewrite.of(store.load(fromVersion), store.load(toVersion), operators);
        String savepoint = options.get("--savepoint");
        org.apache.flink.core.fs.Path output = new org.apache.flink.core.fs.Path(options.get("--output"));
        FileSystem fs = output.getFileSystem();
        if (fs.exists(output)) {
            throw new IllegalArgumentException("--output " + output + " exists; give a new path (a rerun writes anew)");
        }
        Long parallelism = options.integer("--parallelism", 1, Integer.MAX_VALUE);
        env.setParallelism(parallelism != null ? parallelism.intValue() : rewrite.parallelism());
        rewrite.addTo(env, savepoint, output.toString());
        System.err.printf("locality: rewriting %s for version %d (from %d) into %s%n", savepoint, toVersion,
                fromVersion, output);
        ObjectNode doc = new ObjectMapper().createObjectNode();
        doc.put("savepoint", savepoint);
        doc.put("output", output.toString());
        doc.put("from_version", fromVersion);
        doc.put("to_version", toVersion);
        JobExecutionResult result;
        try {
            result = env.execute("locality savepoint rewrite " + fromVersion + " -> " + toVersion);
        } catch (Exception e) {
            fs.delete(output, true); // nothing half-written stays behind
            throw e;
        }
        if (!result.isJobExecutionResult()) { // submitted detached: the summary will be in the accumulators
            doc.put("job_id", result.getJobID().toHexString());
            return doc;
        }
        doc.set("operators", RewriteSummary.of(rewrite.operators(), result.getAllAccumulatorResults())
                .toJson(new ObjectMapper()));
        doc.put("seconds", result.getNetRuntime() / 1000.0);
        return doc;
    }
}
