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
 * <p>Not thread-safe: the instance's counting thread calls {@link #update}, {@link #roll} and {@link #close}; the
 * publisher's own thread only writes what was handed over.
 */
public final class IntervalSketches {
    private final long intervalMillis;
    private final AsyncSketchPublisher publisher;
    private HopSketches sketches;
    private SketchInterval interval;

    /**
     * @param empty the sketches to fill first (their hop, capacity and kinds are every interval's)
     * @param intervalMillis the length of each interval, at least 1 ms
     * @param now the moment (epoch ms) the first interval holds
     * @throws IllegalArgumentException when {@code intervalMillis < 1}
     */
    public IntervalSketches(HopSketches empty, long intervalMillis, AsyncSketchPublisher publisher, long now) {
        this.intervalMillis = intervalMillis;
        this.publisher = publisher;
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
     * One record from the hop's first operator (keyed {@code fromKey}) to its second ({@code toKey}) at
     * {@code now}: into the interval holding {@code now}, after ending the current one when {@code now} is past it.
     *
     * @throws IllegalArgumentException as {@link HopSketches#update} does
     */
    public void update(long now, Object fromKey, Object toKey) {
        roll(now);
        sketches.update(fromKey, toKey);
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
