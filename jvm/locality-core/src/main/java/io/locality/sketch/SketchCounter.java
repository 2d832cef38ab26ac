package io.locality.sketch;

/**
 * One counter of a {@link SpaceSaving} sketch: a monitored key, its count and the most the count over-estimates.
 *
 * <p>The key's true weight {@code f} satisfies {@code lowerBound() <= f <= upperBound()}; the estimate is the upper
 * bound, as in the Python sketch's {@code top_k} rows {@code (key, estimate, lower, upper)}.
 *
 * @param key the monitored key
 * @param count the counter, an over-estimate of the key's weight
 * @param error the most {@code count} over-estimates it by
 */
public record SketchCounter(SketchKey key, double count, double error) {
    /** The estimated weight: the count. */
    public double estimate() {
        return count;
    }

    /** {@code count - error}: the key weighs at least this. */
    public double lowerBound() {
        return count - error;
    }

    /** The count: the key weighs at most this. */
    public double upperBound() {
        return count;
    }
}
