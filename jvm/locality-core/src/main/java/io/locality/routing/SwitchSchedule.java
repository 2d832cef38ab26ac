package io.locality.routing;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Which store version is in force from which point (event time in ms, or an epoch the engine gives
 * every record), and up to which point that is settled: the store's {@code SCHEDULE}, as the Python
 * {@code locality.schedule.SwitchSchedule} writes it.
 *
 * <p>Every instance routing a record by the version in force at its point routes it the same way, so
 * all instances switch at the same point without a coordinator. A point at or past {@link #sealedUntil()}
 * is not settled yet: read the schedule again, and wait, instead of routing it (docs/switch.md).
 */
public final class SwitchSchedule {
    /** The point before every other: where the version in force when scheduling began starts. */
    public static final long BEGINNING = Long.MIN_VALUE;

    private final long[] starts;
    private final int[] versions;
    private final long sealedUntil;
    private final List<Switch> switches;

    SwitchSchedule(long[] starts, int[] versions, long sealedUntil) {
        this.starts = starts;
        this.versions = versions;
        this.sealedUntil = sealedUntil;
        List<Switch> changes = new ArrayList<>();
        for (int i = 1; i < versions.length; i++) {
            if (versions[i] != versions[i - 1]) {
                changes.add(new Switch(starts[i], versions[i - 1], versions[i]));
            }
        }
        this.switches = List.copyOf(changes);
    }

    static SwitchSchedule empty() {
        return new SwitchSchedule(new long[0], new int[0], BEGINNING);
    }

    static SwitchSchedule fromJson(JsonNode doc) {
        JsonNode entries = doc.path("entries");
        if (!entries.isArray() || !doc.path("sealed_until").canConvertToLong()) {
            throw new IllegalArgumentException("a schedule needs 'entries' and 'sealed_until'; got " + doc);
        }
        long[] starts = new long[entries.size()];
        int[] versions = new int[entries.size()];
        for (int i = 0; i < starts.length; i++) {
            JsonNode entry = entries.get(i);
            if (!entry.path("from").canConvertToLong() || !entry.path("version").canConvertToInt()) {
                throw new IllegalArgumentException("a schedule entry needs 'version' and 'from'; got " + entry);
            }
            starts[i] = entry.get("from").asLong();
            versions[i] = entry.get("version").asInt();
            if (i > 0 && starts[i] <= starts[i - 1]) {
                throw new IllegalArgumentException("the starts of a schedule must increase; got " + entries);
            }
        }
        return new SwitchSchedule(starts, versions, doc.get("sealed_until").asLong());
    }

    /** True when the version of {@code point} is settled (the point lies below the seal). */
    public boolean covers(long point) {
        return point < sealedUntil;
    }

    /** No version will ever be scheduled before this point. */
    public long sealedUntil() {
        return sealedUntil;
    }

    /** True when nothing was scheduled yet. */
    public boolean isEmpty() {
        return versions.length == 0;
    }

    /**
     * Every change of version the schedule holds, in the order of their points: entry {@code i}'s version
     * takes over from entry {@code i - 1}'s at entry {@code i}'s start. An entry that schedules the version
     * already in force (a rollback to it, a republication) changes nothing and is left out.
     */
    public List<Switch> switches() {
        return switches;
    }

    /** The switches whose point lies after {@code point}, in order (a view: a job with a long schedule looks only ahead). */
    public List<Switch> switchesAfter(long point) {
        int low = 0;
        int high = switches.size();
        while (low < high) { // the first switch whose point is > point
            int middle = (low + high) >>> 1;
            if (switches.get(middle).point() <= point) {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        return switches.subList(low, switches.size());
    }

    /**
     * The version in force at {@code point}.
     *
     * @throws IllegalStateException when the schedule is empty
     */
    public int versionAt(long point) {
        if (versions.length == 0) {
            throw new IllegalStateException("the store has no schedule yet: publish a version for a point first");
        }
        int found = Arrays.binarySearch(starts, point);
        int index = found >= 0 ? found : -found - 2; // the last start <= point
        return versions[Math.max(index, 0)];
    }

    /**
     * A change of version: {@code to} is in force from {@code point} on, {@code from} just before it.
     *
     * @param point the first point routed with {@code to}
     * @param from the version in force before {@code point}
     * @param to the version in force from {@code point}
     */
    public record Switch(long point, int from, int to) {}
}
