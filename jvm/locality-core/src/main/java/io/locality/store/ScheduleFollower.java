package io.locality.store;

import io.locality.routing.RoutingConfiguration;
import io.locality.schedule.ScheduleExpiredException;
import io.locality.schedule.SwitchSchedule;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
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
 *
 * <p><b>When the store cannot be read</b> (its server is down or unreachable), the follower keeps what it
 * knows, as docs/store-protocol.md ("Reading") asks of every reader: the schedule it read last answers
 * every point below its seal without a read, and it is replaced only by a schedule that extends it
 * ({@link SwitchSchedule#isExtensionOf}): never by an empty (missing), older or unreadable one. A point past
 * the seal waits as it waits for a late publisher, within the same {@code maxWait}, and goes on within one
 * {@code pollInterval} once the store answers with a schedule that covers it. The versions a newly read
 * schedule names are loaded as soon as it is read, so an outage that starts after the read does not stop
 * their records; a version still to load while the store is out is tried again every {@code pollInterval},
 * within {@code maxWait} ({@link StoreRetry}).
 */
public final class ScheduleFollower {
    /** Told when a point waits for the seal, and what the follower makes of each read of the schedule. */
    public interface WaitListener extends StoreRetry.Listener {
        /** No-op. */
        WaitListener NONE = new WaitListener() { };

        /** A record of {@code point} waits: the schedule is sealed until {@code sealedUntil} only. */
        default void waiting(long point, long sealedUntil) { }

        /** The record of {@code point} waited {@code millis} ms, and goes on. */
        default void waited(long point, long millis) { }

        /** The store's schedule was read and taken: it extends the one known, and tells something new. */
        default void scheduleTaken(SwitchSchedule schedule) { }

        /**
         * The store's schedule was not taken ({@code why}: it cannot be read, or it does not extend the one
         * known); {@code known} stays. Told once for a run of reads that fail alike.
         */
        default void scheduleKept(SwitchSchedule known, String why) { }
    }

    private final ConfigStore store;
    private final Duration pollInterval;
    private final Duration maxWait;
    private final WaitListener waits;
    private final StoreRetry retry;
    private final Map<Long, RoutingConfiguration> loaded = new ConcurrentHashMap<>();
    private volatile SwitchSchedule schedule;
    /** Why the last read was not taken, while reads keep failing alike (guarded by this). */
    private String keptWhy;

    /**
     * Follows the schedule of {@code store}, and loads the version in force at its seal.
     *
     * @param pollInterval how often a point past the seal reads the schedule again
     * @param maxWait how long a point past the seal waits before {@link ScheduleExpiredException}, and a
     *     version waits for an unavailable store before a {@link io.locality.storage.StoreUnavailableException}
     * @param waits told of every point that had to wait and of every read of the schedule
     * @throws IOException when the schedule cannot be read (the message names the file): a job that starts
     *     knows no schedule to keep
     */
    public ScheduleFollower(ConfigStore store, Duration pollInterval, Duration maxWait, WaitListener waits)
            throws IOException {
        if (pollInterval.isNegative() || pollInterval.isZero() || maxWait.isNegative()) {
            throw new IllegalArgumentException("a schedule follower needs pollInterval > 0 and maxWait >= 0; got "
                    + pollInterval + " and " + maxWait);
        }
        this.store = store;
        this.pollInterval = pollInterval;
        this.maxWait = maxWait;
        this.waits = waits;
        this.retry = new StoreRetry(pollInterval, maxWait);
        this.schedule = store.schedule();
        schedule.lastVersion().ifPresent(version -> prefetch(List.of(version)));
    }

    /** The schedule as last taken (it may not cover the points to come). */
    public SwitchSchedule schedule() {
        return schedule;
    }

    /**
     * Reads the store's schedule now and takes it if it extends the one known; the schedule known after.
     * An unreadable store, or a schedule that does not extend the one known, leaves it as it is (and the
     * listener hears why, once for a run of such reads).
     */
    public synchronized SwitchSchedule refresh() {
        SwitchSchedule known = schedule;
        SwitchSchedule read;
        try {
            read = store.schedule();
        } catch (IOException e) {
            return kept(known, "the store's schedule cannot be read: " + e.getMessage());
        }
        if (!read.isExtensionOf(known)) {
            return kept(known, "the store's schedule (" + read + ") does not extend the one known");
        }
        keptWhy = null;
        if (!read.equals(known)) {
            schedule = read;
            waits.scheduleTaken(read);
            prefetch(read.versionsNewSince(known));
        }
        return read;
    }

    private SwitchSchedule kept(SwitchSchedule known, String why) {
        if (!why.equals(keptWhy)) {
            keptWhy = why;
            waits.scheduleKept(known, why);
        }
        return known;
    }

    /**
     * A schedule that settles {@code point}: the one last taken when it does, else the store's, read again
     * until its seal passes the point.
     *
     * @throws ScheduleExpiredException when the seal has not passed the point within {@code maxWait}; the
     *     message says whether the store could be read meanwhile
     */
    public SwitchSchedule settle(long point) throws ScheduleExpiredException {
        SwitchSchedule known = schedule;
        if (known.covers(point)) {
            return known;
        }
        synchronized (this) { // one reader polls the store; the others find its answer
            long started = System.nanoTime();
            long deadline = started + maxWait.toNanos();
            boolean slept = false;
            while (true) {
                known = schedule.covers(point) ? schedule : refresh();
                if (known.covers(point)) {
                    if (slept) {
                        waits.waited(point, Duration.ofNanos(System.nanoTime() - started).toMillis());
                    }
                    return known;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new ScheduleExpiredException("the switch schedule of " + store.uri() + " is sealed until "
                            + known.sealedUntil() + ": the record at point " + point + " waited " + maxWait.toMillis()
                            + " ms for it to move; " + (keptWhy == null ? "is the job that extends it late "
                            + "(`locality reconfigure --switch-after`, `locality seal`)?" : "the store could not "
                            + "tell: " + keptWhy));
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
                            + "of " + store.uri() + " to be sealed past it");
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

    /**
     * Version {@code version} of the store, loaded and verified on first use; while the store is unavailable,
     * tried again every {@code pollInterval} within {@code maxWait}.
     *
     * @throws io.locality.storage.StoreUnavailableException when the store did not answer within
     *     {@code maxWait}
     * @throws IOException when the version is missing or damaged (at once: waiting does not mend it)
     */
    public RoutingConfiguration configuration(long version) throws IOException {
        RoutingConfiguration known = loaded.get(version);
        if (known == null) {
            known = retry.read("version " + version + " of " + store.uri(), () -> store.load(version), waits);
            loaded.put(version, known);
        }
        return known;
    }

    /** Loads the versions not loaded yet, now that the store answers; one it cannot load waits for its first use. */
    private void prefetch(List<Long> versions) {
        for (long version : versions) {
            if (!loaded.containsKey(version)) {
                try {
                    loaded.put(version, store.load(version));
                } catch (IOException | RuntimeException e) {
                    // its first use loads it again, and reports what is wrong with it there
                }
            }
        }
    }
}
