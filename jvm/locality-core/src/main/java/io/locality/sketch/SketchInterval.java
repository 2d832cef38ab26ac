package io.locality.sketch;

import java.util.Locale;

/**
 * An interval of wall-clock time {@code [start, end)} in epoch milliseconds (UTC): what one published sketch covers.
 * The Java twin of Python's {@code locality.engine_sketches.Interval}: the same bounds give the same folder name,
 * {@code <start>-<end>} with 13 digits each, zero-padded, so that names sort by time (until the year 2286).
 *
 * @param start the first millisecond of the interval, in {@code [0, 10^13)}
 * @param end the first millisecond after it, {@code > start} and {@code < 10^13}
 */
public record SketchInterval(long start, long end) {
    /** The digits of each bound in a folder name. */
    private static final int DIGITS = 13;
    private static final long LIMIT = 10_000_000_000_000L;

    /**
     * @throws IllegalArgumentException when a bound is outside {@code [0, 10^13)} or {@code end <= start}
     */
    public SketchInterval {
        check(start, "start");
        check(end, "end");
        if (end <= start) {
            throw new IllegalArgumentException("a SketchInterval must end after it starts; got start " + start
                    + " and end " + end + " (epoch ms)");
        }
    }

    private static void check(long bound, String name) {
        if (bound < 0 || bound >= LIMIT) {
            throw new IllegalArgumentException("the '" + name + "' parameter of SketchInterval must be epoch "
                    + "milliseconds in [0, " + (LIMIT - 1) + "]; got " + bound);
        }
    }

    /**
     * The interval of {@code length} ms holding {@code moment}, aligned on the epoch, as Python's
     * {@code Interval.containing} cuts it: every publisher that cuts time this way puts its sketches of one interval
     * in one folder.
     *
     * @throws IllegalArgumentException when {@code length < 1} or the interval is outside the 13 digits
     */
    public static SketchInterval containing(long moment, long length) {
        if (length < 1) {
            throw new IllegalArgumentException("the 'length' parameter of SketchInterval.containing must be >= 1 ms; "
                    + "got " + length);
        }
        long start = moment - Math.floorMod(moment, length);
        return new SketchInterval(start, start + length);
    }

    /** The interval's folder name: {@code <start>-<end>}, 13 digits each. */
    public String name() {
        return String.format(Locale.ROOT, "%0" + DIGITS + "d-%0" + DIGITS + "d", start, end);
    }
}
