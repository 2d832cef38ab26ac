package io.locality.flink;

import java.util.HashMap;
import java.util.Map;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.ParameterTool;

/**
 * The store version a job keyed by the tables runs on, declared where the cluster shows it.
 *
 * <p>{@code declare(env, version)} adds the global job parameter {@value #PARAMETER}; Flink's REST API shows
 * it under {@code /jobs/:jobid/config} ({@code execution-config.user-config}). A switch
 * ({@code locality switch flink}) reads it before it stops the job: it needs no {@code --from}, refuses a
 * wrong one without stopping anything, and after a failed rewrite can restart the job on the version it
 * really ran. A job that does not declare its version is switched on the word of {@code --from}.
 */
public final class JobVersion {
    /** The global job parameter holding the version. */
    public static final String PARAMETER = "locality.version";

    private JobVersion() {}

    /** Declares that the job built on {@code env} routes by {@code version} of the store's tables. */
    public static void declare(StreamExecutionEnvironment env, long version) {
        Map<String, String> parameters = new HashMap<>(env.getConfig().getGlobalJobParameters().toMap());
        parameters.put(PARAMETER, Long.toString(version));
        env.getConfig().setGlobalJobParameters(ParameterTool.fromMap(parameters));
    }
}
