package io.locality.flink;

import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;

/**
 * The live locality of one subtask, in Flink's metric system: of the records it passed to the next operator, how
 * many stayed on its server, under the store version in force.
 *
 * <p>Registered under the operator's metric group as {@code locality.version.<version>}: the counters
 * {@value #RECORDS} and {@value #LOCAL_RECORDS} and the gauge {@value #LOCAL_SHARE} (their ratio; 0 before the first
 * record). {@code version} is also a variable of the group ({@code <version>}), so reporters that take labels
 * (Prometheus, JMX) show it as one. A job-wide share is the sum of every subtask's {@value #LOCAL_RECORDS} over
 * the sum of their {@value #RECORDS}.
 *
 * <p>{@value #RECORDS} counts every record. Where a record goes is asked of the records the sketcher samples only
 * (a routing-key lookup and a key-group hash cost more than the rest of a record's way through the sketcher): so
 * {@value #LOCAL_RECORDS} is the sum of the weights ({@code 1/p}) of the sampled records that stayed, an unbiased
 * estimate of the records that stayed, exact while every record is sampled.
 */
public final class LocalShare {
    /** The metric group under the operator's. */
    public static final String GROUP = "locality";
    /** The key of the version's group (its value: the version, or {@code none}). */
    public static final String VERSION = "version";
    public static final String RECORDS = "records";
    public static final String LOCAL_RECORDS = "localRecords";
    public static final String LOCAL_SHARE = "localShare";

    private final Counter records;
    private final WeightedCount local = new WeightedCount();

    /** Registers the metrics of {@code version} (a number, or {@code none}) under {@code operator}. */
    LocalShare(MetricGroup operator, String version) {
        MetricGroup group = operator.addGroup(GROUP).addGroup(VERSION, version);
        this.records = group.counter(RECORDS);
        group.counter(LOCAL_RECORDS, local);
        group.gauge(LOCAL_SHARE, (Gauge<Double>) this::share);
    }

    /** One record passed. */
    void count() {
        records.inc();
    }

    /** A sampled record of weight {@code weight} stayed on its server. */
    void stayed(double weight) {
        local.add(weight);
    }

    /** The share of the records that stayed on their server; 0 before the first. */
    double share() {
        long all = records.getCount();
        return all == 0 ? 0.0 : local.sum / all;
    }

    /** A count of weighted records, rounded to the nearest whole record when read. */
    private static final class WeightedCount implements Counter {
        private double sum;

        void add(double weight) {
            sum += weight;
        }

        @Override
        public void inc() {
            sum += 1;
        }

        @Override
        public void inc(long n) {
            sum += n;
        }

        @Override
        public void dec() {
            sum -= 1;
        }

        @Override
        public void dec(long n) {
            sum -= n;
        }

        @Override
        public long getCount() {
            return Math.round(sum);
        }
    }
}
