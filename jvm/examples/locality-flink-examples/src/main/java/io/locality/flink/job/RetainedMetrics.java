package io.locality.flink.job;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.locality.flink.LocalShare;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Queue;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.stream.Collectors;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.Metric;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.reporter.MetricReporter;
import org.apache.flink.metrics.reporter.MetricReporterFactory;

/**
 * A Flink metric reporter that keeps the locality metrics ({@link LocalShare}: {@code locality.version.<v>.*}) a job
 * registers on the local MiniCluster of this JVM, so that the two-stage job's summary states their final values.
 *
 * <p>Flink hands every metric a task registers to the configured reporters, and takes it back when the task ends;
 * a reporter that reports every few seconds (JMX, Slf4j, Prometheus) may miss the last records of a bounded job.
 * This one keeps the metric objects it is handed, which hold their last values once their task has ended: read
 * after the job, they are the metrics' values at its end. It is configured for a local MiniCluster only
 * ({@link #addTo}); on a cluster, read the same metrics from its own reporters or its REST API.
 */
public final class RetainedMetrics implements MetricReporter {
    /** The reporter's name in the configuration ({@code metrics.reporter.<name>.factory.class}). */
    static final String NAME = "locality-retained";
    private static final Queue<Retained> RETAINED = new ConcurrentLinkedQueue<>();

    /** {@code configuration} with this reporter added, for a local MiniCluster. */
    static Configuration addTo(Configuration configuration) {
        configuration.setString("metrics.reporter." + NAME + ".factory.class", Factory.class.getName());
        return configuration;
    }

    @Override
    public void open(MetricConfig config) {}

    @Override
    public void close() {}

    @Override
    public void notifyOfAddedMetric(Metric metric, String name, MetricGroup group) {
        if (Arrays.asList(group.getScopeComponents()).contains(LocalShare.GROUP)
                && group.getAllVariables().containsKey("<" + LocalShare.VERSION + ">")) {
            RETAINED.add(new Retained(metric, name, group.getAllVariables()));
        }
    }

    @Override
    public void notifyOfRemovedMetric(Metric metric, String name, MetricGroup group) {
        // kept: the metric object holds its last value
    }

    /**
     * Per version, the locality metrics of every subtask and their sums: {@code records}, {@code local_records},
     * {@code local_share} (the sums' ratio), and {@code subtasks}, each with its gauge's {@code local_share}. Empty
     * when no locality metric was registered.
     */
    static ObjectNode summary(ObjectMapper json) {
        ObjectNode doc = json.createObjectNode();
        Map<String, List<Retained>> byVersion = RETAINED.stream().collect(Collectors.groupingBy(
                r -> r.variables().get("<" + LocalShare.VERSION + ">"), TreeMap::new, Collectors.toList()));
        byVersion.forEach((version, metrics) -> {
            ObjectNode entry = doc.putObject(version);
            Map<Integer, List<Retained>> bySubtask = metrics.stream().collect(Collectors.groupingBy(
                    r -> Integer.parseInt(r.variables().get("<subtask_index>")), TreeMap::new, Collectors.toList()));
            long records = 0;
            long local = 0;
            var subtasks = entry.putArray("subtasks");
            for (var subtask : bySubtask.entrySet()) {
                ObjectNode row = subtasks.addObject().put("subtask", subtask.getKey());
                for (Retained metric : subtask.getValue()) {
                    switch (metric.name()) {
                        case LocalShare.RECORDS -> row.put("records", ((Counter) metric.metric()).getCount());
                        case LocalShare.LOCAL_RECORDS ->
                                row.put("local_records", ((Counter) metric.metric()).getCount());
                        case LocalShare.LOCAL_SHARE -> row.put("local_share",
                                ((Number) ((Gauge<?>) metric.metric()).getValue()).doubleValue());
                        default -> { }
                    }
                }
                records += row.path("records").asLong();
                local += row.path("local_records").asLong();
            }
            entry.put("records", records);
            entry.put("local_records", local);
            entry.put("local_share", records == 0 ? 0.0 : (double) local / records);
        });
        return doc;
    }

    /** One metric as the reporter was handed it. */
    private record Retained(Metric metric, String name, Map<String, String> variables) {}

    /** Flink finds reporters through their factories ({@code META-INF/services}). */
    public static final class Factory implements MetricReporterFactory {
        @Override
        public MetricReporter createMetricReporter(Properties properties) {
            return new RetainedMetrics();
        }
    }
}
