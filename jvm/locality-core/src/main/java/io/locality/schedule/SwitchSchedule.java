package io.locality.schedule;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalLong;

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
    private final long[] versions;
    private final long sealedUntil;
    private final List<Switch> switches;

    SwitchSchedule(long[] starts, long[] versions, long sealedUntil) {
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

    /** The schedule of a store that has none: no version in force at any point. */
    public static SwitchSchedule empty() {
        return new SwitchSchedule(new long[0], new long[0], BEGINNING);
    }

    /**
     * Parses a {@code SCHEDULE} document. Fields beside {@code entries} and {@code sealed_until} (the
     * {@code writer} token that fences writers) are not a reader's concern.
     */
    public static SwitchSchedule fromJson(JsonNode doc) {
        JsonNode entries = doc.path("entries");
        if (!entries.isArray() || !isLong(doc.path("sealed_until"))) {
            throw new IllegalArgumentException("a schedule needs 'entries' and 'sealed_until'; got " + doc);
        }
        long[] starts = new long[entries.size()];
        long[] versions = new long[entries.size()];
        for (int i = 0; i < starts.length; i++) {
            JsonNode entry = entries.get(i);
            if (!isLong(entry.path("from")) || !isLong(entry.path("version"))) {
                throw new IllegalArgumentException("a schedule entry needs 'version' and 'from'; got " + entry);
            }
            starts[i] = entry.get("from").asLong();
            versions[i] = entry.get("version").asLong();
            if (i > 0 && starts[i] <= starts[i - 1]) {
                throw new IllegalArgumentException("the starts of a schedule must increase; got " + entries);
            }
        }
        return new SwitchSchedule(starts, versions, doc.get("sealed_until").asLong());
    }

    private static boolean isLong(JsonNode node) {
        return node.isIntegralNumber() && node.canConvertToLong();
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
     * Whether this schedule may replace {@code known} in a reader: the same past, a seal no earlier (Python's
     * {@code SwitchSchedule.extends}).
     *
     * <p>Every entry {@code known} settled (one that starts before its seal) is here too, at the same place,
     * and the seal did not move back. A schedule read from a store restored from an old backup, emptied, or
     * missing (read as the empty schedule) is not taken: the points a reader routed stay routed as they were.
     */
    public boolean isExtensionOf(SwitchSchedule known) {
        if (sealedUntil < known.sealedUntil) {
            return false;
        }
        for (int i = 0; i < known.starts.length && known.starts[i] < known.sealedUntil; i++) {
            if (i >= starts.length || starts[i] != known.starts[i] || versions[i] != known.versions[i]) {
                return false;
            }
        }
        return true;
    }

    /** The same entries and seal. */
    @Override
    public boolean equals(Object other) {
        return other instanceof SwitchSchedule that && sealedUntil == that.sealedUntil
                && Arrays.equals(starts, that.starts) && Arrays.equals(versions, that.versions);
    }

    @Override
    public int hashCode() {
        return 31 * (31 * Long.hashCode(sealedUntil) + Arrays.hashCode(starts)) + Arrays.hashCode(versions);
    }

    /** The entries and the seal, for messages. */
    @Override
    public String toString() {
        StringBuilder text = new StringBuilder("[");
        for (int i = 0; i < starts.length; i++) {
            text.append(i == 0 ? "" : ", ").append("v").append(versions[i]).append(" from ")
                    .append(starts[i] == BEGINNING ? "the beginning" : Long.toString(starts[i]));
        }
        return text.append("] sealed until ").append(sealedUntil).toString();
    }

    /** The version of the last entry (in force at the seal and past it); empty for an empty schedule. */
    public OptionalLong lastVersion() {
        return versions.length == 0 ? OptionalLong.empty() : OptionalLong.of(versions[versions.length - 1]);
    }

    /** The versions of the entries this schedule has and {@code known} has not (by position), in order. */
    public List<Long> versionsNewSince(SwitchSchedule known) {
        List<Long> fresh = new ArrayList<>();
        for (int i = 0; i < starts.length; i++) {
            if (i >= known.starts.length || starts[i] != known.starts[i] || versions[i] != known.versions[i]) {
                fresh.add(versions[i]);
            }
        }
        return fresh;
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
    public long versionAt(long point) {
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
    public record Switch(long point, long from, long to) {}
}
