package io.locality.kafka;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.DoubleSupplier;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.MeasurableStat;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Sensor;
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
 *
 * <p>Both counts are of the records the sketcher samples ({@link io.locality.sketch.RecordSampler}): the keys of a
 * record, the table lookup and the version in force are asked of those only (a key function may parse the
 * record's value, which costs more than the rest of its way through the sketcher). {@value #RECORDS} is the sum of
 * their weights ({@code 1/p}), {@value #LOCAL_RECORDS} the sum over those that stayed: unbiased estimates of the
 * records with both keys passed and of those that stayed, exact while every record is sampled.
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
    private final Map<Long, VersionCounts> byVersion = new HashMap<>();
    private long lastVersion = Long.MIN_VALUE;
    private VersionCounts last;

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

    /**
     * A sampled record of weight {@code weight} ({@code 1/p}) passed under {@code version}, which went to a task on
     * this instance's server or not.
     */
    void count(long version, double weight, boolean stayed) {
        if (version != lastVersion || last == null) {
            last = byVersion.computeIfAbsent(version, this::register);
            lastVersion = version;
        }
        last.records += weight;
        if (stayed) {
            last.local += weight;
        }
    }

    private VersionCounts register(long version) {
        Sensor sensor = metrics.addSensor(sensorPrefix + version, Sensor.RecordingLevel.INFO);
        Map<String, String> versionTags = new LinkedHashMap<>(tags);
        versionTags.put("version", Long.toString(version));
        VersionCounts counts = new VersionCounts(sensor);
        sensor.add(new MetricName(RECORDS, GROUP, "records the task passed to the next stage", versionTags),
                counts.reading(() -> counts.records));
        sensor.add(new MetricName(LOCAL_RECORDS, GROUP, "of them, those whose next stage's task is on this "
                + "instance's server (estimated from the sketcher's sample above its budget)", versionTags),
                counts.reading(() -> counts.local));
        sensor.add(new MetricName(LOCAL_SHARE, GROUP, "local-records-total / records-total", versionTags),
                counts.reading(() -> counts.records == 0 ? 0.0 : counts.local / counts.records));
        return counts;
    }

    /** Removes the metrics from the registry. */
    void close() {
        byVersion.values().forEach(counts -> metrics.removeSensor(counts.sensor));
        byVersion.clear();
        last = null;
    }

    /**
     * One version's counts, kept in fields the stream thread adds to (a {@code Sensor.record} per record would cost
     * more than the rest of the sketcher's work on it) and read by the metrics registered on its sensor.
     */
    private static final class VersionCounts {
        final Sensor sensor;
        double records;
        double local;

        VersionCounts(Sensor sensor) {
            this.sensor = sensor;
        }

        /** A stat that reads {@code value}; nothing is ever recorded into the sensor. */
        MeasurableStat reading(DoubleSupplier value) {
            return new MeasurableStat() {
                @Override
                public void record(MetricConfig config, double recorded, long timeMs) {
                }

                @Override
                public double measure(MetricConfig config, long now) {
                    return value.getAsDouble();
                }
            };
        }
    }
}
