package io.locality.routing;

import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The version in force at a record's point, read from a store's {@code SCHEDULE} and followed as the
 * publisher extends it: the Java counterpart of the Python {@code Router.at}.
 *
 * <p>Every instance of a job that routes a record by the version in force at its point routes it alike,
 * because a point below the schedule's seal has its final version (docs/switch.md). A point at or past
 * the seal is not settled yet: {@link #settle(long)} reads the schedule again every {@code pollInterval}
 * until the seal has moved past the point, and gives up after {@code maxWait} with a
 * {@link ScheduleExpiredException} rather than guess. Versions are immutable, so each one is loaded (and
 * verified against its manifest) once and kept. One follower may serve every thread of a job.
 */
public final class ScheduleFollower {
    /** Told when a point starts waiting for the seal to move past it, and how long it waited. */
    public interface WaitListener {
        /** No-op. */
        WaitListener NONE = new WaitListener() { };

        /** A record of {@code point} waits: the schedule is sealed until {@code sealedUntil} only. */
        default void waiting(long point, long sealedUntil) { }

        /** The record of {@code point} waited {@code millis} ms, and goes on. */
        default void waited(long point, long millis) { }
    }

    private final LocalityStore store;
    private final Duration pollInterval;
    private final Duration maxWait;
    private final WaitListener waits;
    private final Map<Integer, RoutingConfiguration> loaded = new ConcurrentHashMap<>();
    private volatile SwitchSchedule schedule;

    /**
     * Follows the schedule of {@code store}.
     *
     * @param pollInterval how often a point past the seal reads the schedule again
     * @param maxWait how long a point past the seal waits before {@link ScheduleExpiredException}
     * @param waits told of every point that had to wait
     * @throws IOException when the schedule cannot be read (the message names the file)
     */
    public ScheduleFollower(LocalityStore store, Duration pollInterval, Duration maxWait, WaitListener waits)
            throws IOException {
        if (pollInterval.isNegative() || pollInterval.isZero() || maxWait.isNegative()) {
            throw new IllegalArgumentException("a schedule follower needs pollInterval > 0 and maxWait >= 0; got "
                    + pollInterval + " and " + maxWait);
        }
        this.store = store;
        this.pollInterval = pollInterval;
        this.maxWait = maxWait;
        this.waits = waits;
        this.schedule = store.schedule();
    }

    /** The schedule as last read (it may not cover the points to come). */
    public SwitchSchedule schedule() {
        return schedule;
    }

    /**
     * A schedule that settles {@code point}: the one last read when it does, else the store's, read again
     * until its seal passes the point.
     *
     * @throws ScheduleExpiredException when the seal has not passed the point within {@code maxWait}
     * @throws IOException when the schedule cannot be read
     */
    public SwitchSchedule settle(long point) throws IOException {
        SwitchSchedule known = schedule;
        if (known.covers(point)) {
            return known;
        }
        synchronized (this) { // one reader polls the store; the others find its answer
            long started = System.nanoTime();
            long deadline = started + maxWait.toNanos();
            boolean slept = false;
            while (true) {
                known = schedule.covers(point) ? schedule : store.schedule();
                schedule = known;
                if (known.covers(point)) {
                    if (slept) {
                        waits.waited(point, Duration.ofNanos(System.nanoTime() - started).toMillis());
                    }
                    return known;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new ScheduleExpiredException("the switch schedule of " + store.root() + " is sealed until "
                            + known.sealedUntil() + ": the record at point " + point + " waited " + maxWait.toMillis()
                            + " ms for it to move; is the job that extends it late (`locality reconfigure "
                            + "--switch-after`, `locality seal`)?");
                }
                if (!slept) {
                    waits.waiting(point, known.sealedUntil());
                    slept = true;
                }
                try {
                    Thread.sleep(Math.max(1, Math.min(pollInterval.toMillis(), left / 1_000_000)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new ScheduleExpiredException("interrupted while point " + point + " waited for the schedule "
                            + "of " + store.root() + " to be sealed past it");
                }
            }
        }
    }

    /**
     * The tables in force at {@code point} (waits as {@link #settle(long)} does).
     *
     * @throws IllegalStateException when the store has no schedule
     */
    public RoutingConfiguration configurationAt(long point) throws IOException {
        return configuration(settle(point).versionAt(point));
    }

    /** Version {@code version} of the store, loaded and verified on first use. */
    public RoutingConfiguration configuration(int version) throws IOException {
        RoutingConfiguration known = loaded.get(version);
        if (known == null) {
            known = store.load(version);
            loaded.put(version, known);
        }
        return known;
    }
}
