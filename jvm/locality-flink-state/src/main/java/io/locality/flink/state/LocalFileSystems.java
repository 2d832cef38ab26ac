package io.locality.flink.state;

import io.locality.flink.MainExit;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.plugin.PluginUtils;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Flink's file systems in a tool run from {@code java}, set up as Flink's own processes set up theirs.
 *
 * <p>A savepoint in an object store ({@code s3://bucket/savepoints/...}) is read and written through a Flink
 * file system plugin ({@code flink-s3-fs-hadoop} in the distribution's {@code plugins/}), configured by the
 * {@code s3.*} keys of the Flink configuration. A JobManager, a TaskManager and the {@code flink} command load
 * both when they start; a plain {@code java -cp ... RewriteSavepoint} on a local MiniCluster loads neither, and
 * Flink's first file system lookup then falls back to the classpath's factories with an empty configuration:
 * an S3 client without its endpoint or credentials settings. So a local run does it here, from the same
 * places: {@code config.yaml} in {@code FLINK_CONF_DIR} and the plugins in {@code FLINK_PLUGINS_DIR}
 * (both optional: without them, a local savepoint path works as before).
 *
 * <p>Inside a cluster (the main submitted through {@code flink run} or the REST API) nothing is done: the
 * process set its file systems up with its own configuration and plugins, which must not be replaced.
 */
final class LocalFileSystems {
    private LocalFileSystems() {}

    /** Sets up Flink's file systems when {@code env} is a local MiniCluster of this JVM; else does nothing. */
    static void initialize(StreamExecutionEnvironment env) {
        if (!MainExit.isLocal(env)) {
            return;
        }
        Configuration configuration = GlobalConfiguration.loadConfiguration();
        FileSystem.initialize(configuration, PluginUtils.createPluginManagerFromRootFolder(configuration));
    }
}
