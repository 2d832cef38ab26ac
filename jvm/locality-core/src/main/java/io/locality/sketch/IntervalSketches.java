package io.locality.sketch;

import java.time.Duration;

/**
 * One engine instance's sketches of a hop, interval after interval of wall-clock time: the part of a sketching
 * piece that does not depend on its engine. Records go into the sketches of the interval their moment falls in
 * ({@link SketchInterval#containing}, aligned on the epoch, so that every instance's sketches of one interval meet
 * in one folder); when the moment passes the interval's end, its sketches are handed whole to an
 * {@link AsyncSketchPublisher} (unless empty) and fresh ones start. The engine calls {@link #roll} from a timer at
 * each interval's end too, so that an idle instance publishes its last interval without waiting for a record.
 *
 * <p>Above a budget of updates per second, only a sample of the records is sketched, each with the weight that
 * makes every count an unbiased estimate ({@link RecordSampler}, which states the error): the engine asks
 * {@link #sample} for every record and computes the keys of, and {@link #update}s, the sampled ones only.
 *
 * <p>Not thread-safe: the instance's counting thread calls {@link #sample}, {@link #update}, {@link #roll} and
 * {@link #close}; the publisher's own thread only writes what was handed over.
 */
public final class IntervalSketches {
    private final long intervalMillis;
    private final AsyncSketchPublisher publisher;
    private final RecordSampler sampler;
    private HopSketches sketches;
    private SketchInterval interval;

    /**
     * @param empty the sketches to fill first (their hop, capacity and kinds are every interval's)
     * @param sampler which records are sketched, with what weight
     * @param intervalMillis the length of each interval, at least 1 ms
     * @param now the moment (epoch ms) the first interval holds
     * @throws IllegalArgumentException when {@code intervalMillis < 1}
     */
    public IntervalSketches(HopSketches empty, RecordSampler sampler, long intervalMillis,
            AsyncSketchPublisher publisher, long now) {
        this.intervalMillis = intervalMillis;
        this.publisher = publisher;
        this.sampler = sampler;
        this.sketches = empty;
        this.interval = SketchInterval.containing(now, intervalMillis);
    }

    /** The interval being filled. */
    public SketchInterval interval() {
        return interval;
    }

    /** The publisher the intervals are handed to. */
    public AsyncSketchPublisher publisher() {
        return publisher;
    }

    /**
     * The weight in the sketches of the instance's next record: 0 when it is not sketched, else what to
     * {@link #update} it with ({@link RecordSampler#next}). Ask once for every record the instance passes.
     */
    public double sample() {
        return sampler.next();
    }

    /**
     * One sampled record from the hop's first operator (keyed {@code fromKey}) to its second ({@code toKey}) at
     * {@code now}, of the {@code weight} {@link #sample} gave: into the interval holding {@code now}, after ending
     * the current one when {@code now} is past it. (A record not sampled ends no interval: the next sampled one or
     * the engine's timer does.)
     *
     * @throws IllegalArgumentException as {@link HopSketches#update} does
     */
    public void update(long now, double weight, Object fromKey, Object toKey) {
        roll(now);
        sketches.update(fromKey, toKey, weight);
    }

    /**
     * Ends the current interval when {@code now} is at or past its end: hands its sketches to the publisher
     * (never blocks; unless empty), and starts the interval holding {@code now}.
     *
     * @return whether an interval ended
     */
    public boolean roll(long now) {
        if (now < interval.end()) {
            return false;
        }
        ship();
        interval = SketchInterval.containing(now, intervalMillis);
        return true;
    }

    /**
     * Hands what the current interval holds to the publisher and closes it, waiting at most {@code wait} for the
     * writes.
     *
     * @return true when everything handed over was written (or failed) within {@code wait}
     */
    public boolean close(Duration wait) throws InterruptedException {
        ship();
        return publisher.close(wait);
    }

    private void ship() {
        if (!sketches.isEmpty()) {
            publisher.submit(interval, sketches);
            sketches = sketches.fresh();
        }
    }
}
