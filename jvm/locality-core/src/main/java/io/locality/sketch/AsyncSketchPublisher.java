package io.locality.sketch;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * Publishes an instance's sketches from a thread of its own, so that the thread that counts never waits on the
 * store: {@link #submit} hands an interval's sketches over and returns at once.
 *
 * <p>One thread writes, one interval after another. While it writes, one more interval may wait; an interval
 * handed over beyond that is dropped (the store is slower than the intervals come), and so is one the store
 * refuses: the sketches are statistics, and an engine must never fail or block because its store is out (issue
 * 35's rule). So at most two intervals' sketches are held besides the live ones. The {@link Listener} hears the
 * first failure of each run of failures, the return of the store after one, and each interval dropped for want
 * of time; it is called on the writing thread (drops on the submitting one).
 */
public final class AsyncSketchPublisher implements AutoCloseable {
    /** What becomes of the sketches handed over. */
    public interface Listener {
        /** {@code names} were written for {@code interval}. */
        default void published(SketchInterval interval, List<String> names) { }

        /**
         * The store refused or did not answer, the first time after a success (or ever): {@code interval}'s
         * sketches are dropped, and so will be those of the next intervals that fail, silently, until one is
         * written.
         */
        default void failing(SketchInterval interval, Exception why) { }

        /** {@code interval}'s sketches were written after {@code dropped} intervals failed in a row. */
        default void resumed(SketchInterval interval, int dropped) { }

        /** {@code interval}'s sketches were dropped unwritten: two intervals are still waiting, or it is closed. */
        default void dropped(SketchInterval interval, String why) { }
    }

    private final SketchPublisher publisher;
    private final String publisherId;
    private final Listener listener;
    private final ThreadPoolExecutor writer;
    private int failedInARow; // the writer's thread only

    /**
     * @param publisherId the id the sketches are published under ({@link SketchPublisher#NAME_RULE})
     * @param threadName the name of the writing thread (a daemon)
     * @throws IllegalArgumentException when {@code publisherId} breaks the rule
     */
    public AsyncSketchPublisher(SketchPublisher publisher, String publisherId, Listener listener, String threadName) {
        this.publisher = publisher;
        this.publisherId = SketchPublisher.checkName(publisherId, "publisherId", "AsyncSketchPublisher");
        this.listener = listener;
        this.writer = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS, new ArrayBlockingQueue<>(1), task -> {
            Thread thread = new Thread(task, threadName);
            thread.setDaemon(true);
            return thread;
        });
    }

    /** The id the sketches are published under. */
    public String publisherId() {
        return publisherId;
    }

    /**
     * Hands {@code sketches} of {@code interval} over to be written; never blocks.
     *
     * @return false when they were dropped (two intervals are still waiting, or this is closed)
     */
    public boolean submit(SketchInterval interval, HopSketches sketches) {
        try {
            writer.execute(() -> write(interval, sketches));
            return true;
        } catch (RejectedExecutionException e) {
            listener.dropped(interval, writer.isShutdown() ? "the publisher is closed"
                    : "the store is still writing two earlier intervals");
            return false;
        }
    }

    private void write(SketchInterval interval, HopSketches sketches) {
        try {
            List<String> names = sketches.publish(publisher, interval, publisherId);
            if (failedInARow > 0) {
                listener.resumed(interval, failedInARow);
            }
            failedInARow = 0;
            listener.published(interval, names);
        } catch (IOException | RuntimeException e) {
            if (failedInARow++ == 0) {
                listener.failing(interval, e);
            }
        }
    }

    /**
     * Writes what was handed over, waiting at most {@code wait} for it; then the writing thread ends.
     *
     * @return true when everything handed over was written (or failed) within {@code wait}
     */
    public boolean close(Duration wait) throws InterruptedException {
        writer.shutdown();
        return writer.awaitTermination(wait.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** {@link #close(Duration)} without waiting. */
    @Override
    public void close() {
        writer.shutdown();
    }
}
