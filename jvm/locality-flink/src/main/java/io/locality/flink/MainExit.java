package io.locality.flink;

import org.apache.flink.streaming.api.environment.LocalStreamEnvironment;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * How a main of this project ends when it fails, wherever it runs.
 *
 * <p>Started with {@code java -cp} it runs its job on a local MiniCluster and exits with a status (2: bad
 * input, named on stderr). Submitted to a cluster ({@code flink run}, or Flink's REST API, where the main
 * runs inside the JobManager) it must not call {@code System.exit}, which would stop the client or the
 * JobManager itself: it throws instead, and Flink reports the message to whoever submitted it.
 */
public final class MainExit {
    private MainExit() {}

    /** Whether {@code env} is a local MiniCluster of this JVM (a plain {@code java} command). */
    public static boolean isLocal(StreamExecutionEnvironment env) {
        return env instanceof LocalStreamEnvironment;
    }

    /**
     * The exception of type {@code type} thrown from a class whose name starts with {@code where} in the
     * causes of a failed job (what the user did wrong, under Flink's wrapping exceptions), or null.
     */
    public static Throwable thrownBy(Throwable failure, Class<? extends Throwable> type, String where) {
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            if (type.isInstance(cause) && cause.getStackTrace().length > 0
                    && cause.getStackTrace()[0].getClassName().startsWith(where)) {
                return cause;
            }
        }
        return null;
    }

    /**
     * Ends a failed main: locally, prints {@code message} and exits with {@code status}; in a cluster,
     * throws an {@link IllegalArgumentException} carrying the message (and the failure as its cause).
     */
    public static void fail(StreamExecutionEnvironment env, int status, String message, Throwable failure) {
        if (isLocal(env)) {
            System.err.println(message);
            System.exit(status);
        }
        throw new IllegalArgumentException(message, failure);
    }
}
