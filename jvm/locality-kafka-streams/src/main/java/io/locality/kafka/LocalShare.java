package io.locality.kafka;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.MeasurableStat;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.CumulativeCount;
import org.apache.kafka.common.metrics.stats.CumulativeSum;
import org.apache.kafka.streams.StreamsMetrics;

/**
 * The live locality of one task, in Kafka Streams' metrics: of the records it passed to the next stage, how many
 * went to a task on its own server, per store version in force.
 *
 * <p>Group {@value #GROUP}, tags {@code thread-id}, {@code task-id}, {@code sketcher} (the sketcher's name) and
 * {@code version} (the store version of the tables the records were routed by); metrics {@value #RECORDS} and
 * {@value #LOCAL_RECORDS} (cumulative counts since the task started on this instance) and {@value #LOCAL_SHARE}
 * (their ratio; 0 before the first record). They are in the client's metric registry: {@code KafkaStreams#metrics()}
 * and JMX ({@code kafka.streams:type=stream-locality-metrics,...}) show them, at recording level {@code INFO} (the
 * default). They are removed when the task closes on this instance (a rebalance that moves it, the instance's
 * close). An application-wide share is the sum of every task's {@value #LOCAL_RECORDS} over the sum of their
 * {@value #RECORDS}.
 */
final class LocalShare {
    /** The metric group. */
    static final String GROUP = "stream-locality-metrics";
    static final String RECORDS = "records-total";
    static final String LOCAL_RECORDS = "local-records-total";
    static final String LOCAL_SHARE = "local-share";

    private final StreamsMetrics metrics;
    private final String sensorPrefix;
    private final Map<String, String> tags;
    private final Map<Long, Sensor> byVersion = new HashMap<>();
    private long lastVersion = Long.MIN_VALUE;
    private Sensor last;

    /**
     * The metrics of a task, registered at each version's first record.
     *
     * @param threadId the stream thread running the task
     * @param taskId the task
     * @param sketcher the sketcher's name
     */
    LocalShare(StreamsMetrics metrics, String threadId, String taskId, String sketcher) {
        this.metrics = metrics;
        this.sensorPrefix = "locality." + taskId + "." + sketcher + ".version.";
        this.tags = new LinkedHashMap<>();
        tags.put("thread-id", threadId);
        tags.put("task-id", taskId);
        tags.put("sketcher", sketcher);
    }

    /** One record routed under {@code version} at {@code now} (epoch ms), which stayed on its server or not. */
    void count(long version, boolean stayed, long now) {
        if (version != lastVersion || last == null) {
            last = byVersion.computeIfAbsent(version, this::register);
            lastVersion = version;
        }
        last.record(stayed ? 1.0 : 0.0, now);
    }

    private Sensor register(long version) {
        Sensor sensor = metrics.addSensor(sensorPrefix + version, Sensor.RecordingLevel.INFO);
        Map<String, String> versionTags = new LinkedHashMap<>(tags);
        versionTags.put("version", Long.toString(version));
        sensor.add(new MetricName(RECORDS, GROUP, "records the task passed to the next stage", versionTags),
                new CumulativeCount());
        sensor.add(new MetricName(LOCAL_RECORDS, GROUP, "of them, those whose next stage's task is on this "
                + "instance's server", versionTags), new CumulativeSum());
        sensor.add(new MetricName(LOCAL_SHARE, GROUP, "local-records-total / records-total", versionTags),
                new Share());
        return sensor;
    }

    /** Removes the metrics from the registry. */
    void close() {
        byVersion.values().forEach(metrics::removeSensor);
        byVersion.clear();
        last = null;
    }

    /** The share of the recorded values that are 1 (local), since the first; 0 before it. */
    private static final class Share implements MeasurableStat {
        private long records;
        private long local;

        @Override
        public void record(MetricConfig config, double value, long timeMs) {
            records++;
            if (value > 0) {
                local++;
            }
        }

        @Override
        public double measure(MetricConfig config, long now) {
            return records == 0 ? 0.0 : (double) local / records;
        }
    }
}
