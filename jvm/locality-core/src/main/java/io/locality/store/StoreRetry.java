package io.locality.store;

import io.locality.storage.StoreUnavailableException;
import java.io.IOException;
import java.time.Duration;

/**
 * A read of the store tried again while the store is unavailable (an outage), every {@code poll}, for at
 * most {@code bound}: how a reader that has nothing to serve yet (a version it never loaded) rides out an
 * outage without guessing, and without waiting forever.
 *
 * <p>Only {@link StoreUnavailableException} is tried again: damage and a missing version or store are not
 * mended by waiting and are thrown at once. The read is tried again within one {@code poll} of the store's
 * return. Past the bound, a {@link StoreUnavailableException} names what was read, the store, how long it
 * was waited for, and the last error.
 */
public final class StoreRetry {
    /** Told when a read starts waiting for the store, and when it got its answer after waiting. */
    public interface Listener {
        /** No-op. */
        Listener NONE = new Listener() { };

        /** {@code what} could not be read ({@code why}): it is tried again every poll. */
        default void storeWaiting(String what, IOException why) { }

        /** {@code what} was read after the store had been unavailable for {@code millis} ms. */
        default void storeResumed(String what, long millis) { }
    }

    /** A read of the store. */
    @FunctionalInterface
    public interface Read<T> {
        T read() throws IOException;
    }

    private final Duration poll;
    private final Duration bound;

    /**
     * @param poll the pause between two tries (&gt; 0)
     * @param bound how long a read may wait for the store in all (&gt;= 0)
     */
    public StoreRetry(Duration poll, Duration bound) {
        if (poll.isNegative() || poll.isZero() || bound.isNegative()) {
            throw new IllegalArgumentException("a store retry needs poll > 0 and bound >= 0; got " + poll + " and "
                    + bound);
        }
        this.poll = poll;
        this.bound = bound;
    }

    /** How long a read may wait for the store. */
    public Duration bound() {
        return bound;
    }

    /**
     * The answer of {@code read}, tried again while the store is unavailable.
     *
     * @param what what is read, for messages ("version 7 of s3://bucket/store")
     * @throws StoreUnavailableException when the store did not answer within the bound
     * @throws IOException what {@code read} throws otherwise, at once
     */
    public <T> T read(String what, Read<T> read, Listener listener) throws IOException {
        long started = System.nanoTime();
        long deadline = started + bound.toNanos();
        boolean waited = false;
        while (true) {
            try {
                T answer = read.read();
                if (waited) {
                    listener.storeResumed(what, Duration.ofNanos(System.nanoTime() - started).toMillis());
                }
                return answer;
            } catch (StoreUnavailableException unavailable) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new StoreUnavailableException("cannot read " + what + ": the store did not answer for "
                            + Duration.ofNanos(System.nanoTime() - started).toMillis() + " ms (at most "
                            + bound.toMillis() + " ms are waited for it): " + unavailable.getMessage(), unavailable);
                }
                if (!waited) {
                    listener.storeWaiting(what, unavailable);
                    waited = true;
                }
                try {
                    Thread.sleep(Math.max(1, Math.min(poll.toMillis(), left / 1_000_000)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new StoreUnavailableException("interrupted while waiting for the store to read " + what,
                            unavailable);
                }
            }
        }
    }
}
