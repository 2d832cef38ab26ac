package io.locality.sketch;

import java.util.SplittableRandom;
import java.util.function.LongSupplier;

/**
 * Which of one engine instance's records go into its sketches, and with what weight, so that sketching costs at
 * most a budget of sketch updates per second however fast the records come. An update of a hop's sketches costs
 * 0.2-0.4 µs while its sketches hold every key, 1.3 µs once they evict ({@link HopSketches#update}: three key
 * objects and hash-map lookups, memory-bound): sketching every record cost a CPU-bound Flink job 38-46% of its
 * throughput. So above the budget the instance sketches a sample, weighted to estimate what it did not sketch.
 *
 * <p>While the instance sees at most {@code updatesPerSecond} records a second, every record is sketched with
 * weight 1: the sketches are those of the whole stream, byte for byte. Above it, each record is sketched with
 * probability {@code p = updatesPerSecond / rate} and weight {@code 1/p} (the Horvitz-Thompson estimator), so the
 * sketches take about {@code updatesPerSecond} updates a second. {@code rate} is the instance's records a second
 * over the last window of at least {@value #WINDOW_MILLIS} ms (the slowest the millisecond clock's readings allow, so
 * that a stream at the budget is never sampled): the sampler reads its clock once every
 * {@value #RECORDS_PER_CLOCK_READ} records, so a record left out costs no clock read, and a window ends at the
 * first read {@value #WINDOW_MILLIS} ms or more after it began. A burst after a slower window is thus sketched at
 * the slower window's {@code p} for at most its first {@value #WINDOW_MILLIS} ms; a clock that steps back starts
 * a new window and keeps {@code p}.
 *
 * <h2>Error</h2>
 *
 * Each record is sketched or not independently of the others, with a probability {@code p_i} fixed before its
 * draw (by how many records came before it and when, not by which were sampled). So for a key with {@code f}
 * records in an interval, the weight the sampled stream gives it, {@code f^ = sum of 1/p_i} over its sampled
 * records, is unbiased ({@code E f^ = f}), with variance {@code sum over its f records of (1/p_i - 1) <= f (1/p_min
 * - 1)}, {@code p_min} the smallest {@code p} of the interval; the same holds for each pair, and for the total
 * weight, which estimates the interval's records without bias. Space-Saving's own bound applies on top, to the
 * sampled stream: a key's count exceeds {@code f^} by at most {@code W/capacity}, {@code W} the total weight
 * ({@link SpaceSaving}). While the rate stays within the budget nothing is sampled: the counts are exact, as far as
 * Space-Saving's are. For instance at 500,000 records a second against a budget of 10,000, {@code p = 0.02}: a key
 * of 10,000 records in an interval has a standard deviation of at most {@code sqrt(10,000 x 49) = 700} (7%), one of
 * 1,000,000 records 0.7%.
 *
 * <h2>Cost</h2>
 *
 * Rather than a random draw per record, the sampler draws how many records to skip before the next sampled one,
 * from the geometric distribution of parameter {@code p} (independent draws per record give the same skips), with
 * a {@link SplittableRandom}; it draws again when {@code p} changes, which the distribution's lack of memory makes
 * exact. So a record left out costs two counter decrements, and its caller need not compute its keys.
 *
 * <p>Not thread-safe: the instance's counting thread asks it, once per record.
 */
public final class RecordSampler {
    /** Records between two reads of the clock. */
    static final int RECORDS_PER_CLOCK_READ = 1024;
    /** The shortest window the rate is measured over. */
    static final long WINDOW_MILLIS = 100;

    private final int updatesPerSecond;
    private final LongSupplier clock;
    private final SplittableRandom random;
    private int untilClockRead = RECORDS_PER_CLOCK_READ;
    private long windowStart; // epoch ms
    private long windowRecords; // records of the window before the last clock read
    private double weight = 1; // 1/p
    private double logMiss; // ln(1 - p), while p < 1
    private long skip; // records to skip before the next sampled one

    /**
     * A sampler of {@code updatesPerSecond} sketch updates a second, on {@code clock} (epoch ms), seeded anew.
     *
     * @throws IllegalArgumentException when {@code updatesPerSecond < 1} or there is no clock
     */
    public RecordSampler(int updatesPerSecond, LongSupplier clock) {
        this(updatesPerSecond, clock, new SplittableRandom());
    }

    /** A sampler whose draws follow from {@code seed}: the same records at the same moments, the same weights. */
    RecordSampler(int updatesPerSecond, LongSupplier clock, long seed) {
        this(updatesPerSecond, clock, new SplittableRandom(seed));
    }

    private RecordSampler(int updatesPerSecond, LongSupplier clock, SplittableRandom random) {
        if (updatesPerSecond < 1) {
            throw new IllegalArgumentException("the 'updatesPerSecond' parameter of RecordSampler must be an int >= 1; "
                    + "got " + updatesPerSecond);
        }
        if (clock == null) {
            throw new IllegalArgumentException("the 'clock' parameter of RecordSampler must be a LongSupplier of "
                    + "epoch ms; got null");
        }
        this.updatesPerSecond = updatesPerSecond;
        this.clock = clock;
        this.random = random;
        this.windowStart = clock.getAsLong();
    }

    /**
     * The weight of the instance's next record: 0 when it is not sketched, 1 while the rate is within the budget,
     * {@code 1/p} above it. Ask once for every record, sampled or not: the rate counts them all.
     */
    public double next() {
        if (--untilClockRead == 0) {
            untilClockRead = RECORDS_PER_CLOCK_READ;
            measureRate();
        }
        if (skip > 0) {
            skip--;
            return 0;
        }
        if (weight > 1) {
            skip = nextSkip();
        }
        return weight;
    }

    /** At a clock read: ends the window if it lasted long enough, and takes the weight its rate gives. */
    private void measureRate() {
        windowRecords += RECORDS_PER_CLOCK_READ;
        long now = clock.getAsLong();
        long elapsed = now - windowStart;
        if (elapsed >= 0 && elapsed < WINDOW_MILLIS) {
            return;
        }
        double rate = windowRecords * 1000.0 / (elapsed + 1); // a ms clock: the slowest rate its readings allow
        windowStart = now;
        windowRecords = 0;
        if (elapsed > 0) { // else the clock stepped back: a new window, the same p
            reweigh(rate > updatesPerSecond ? rate / updatesPerSecond : 1);
        }
    }

    private void reweigh(double next) {
        if (next == weight) {
            return;
        }
        weight = next;
        skip = 0; // a new p: the skip drawn with the old one no longer holds
        if (next > 1) {
            logMiss = Math.log1p(-1 / next);
            skip = nextSkip();
        }
    }

    /** Records to skip before the next sampled one: geometric, {@code P(k) = (1 - p)^k p}. */
    private long nextSkip() {
        double uniform = 1 - random.nextDouble(); // in (0, 1]: its logarithm is finite
        return (long) (Math.log(uniform) / logMiss);
    }
}
