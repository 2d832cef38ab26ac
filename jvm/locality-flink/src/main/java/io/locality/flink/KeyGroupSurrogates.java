package io.locality.flink;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

/**
 * The surrogate routing key of every key group: for a key type and {@code M} key groups, the candidate
 * with the smallest {@code n} whose key group, in Flink's own {@link KeyGroupRangeAssignment}, is that
 * group.
 *
 * <p>Keying a record on the surrogate of one of subtask {@code i}'s key groups sends it to subtask
 * {@code i}. The surrogates depend on {@code M} and the key type only (not on the parallelism), are the
 * same on every machine, and are those of Python's {@code flink_surrogates(FlinkKeyGroups(p, M),
 * key_type)}; finding them takes about {@code M ln M} hashes, done once per {@code (M, type)} in a JVM.
 */
public final class KeyGroupSurrogates {
    private static final Map<String, Object[]> FOUND = new ConcurrentHashMap<>();

    private KeyGroupSurrogates() {}

    /**
     * The surrogate of each key group {@code 0 .. maxParallelism - 1}.
     *
     * @return a fresh array; element {@code g} is the surrogate of key group {@code g}
     */
    public static Object[] of(int maxParallelism, KeyType type) {
        KeyGroupRangeAssignment.checkParallelismPreconditions(maxParallelism);
        return FOUND.computeIfAbsent(maxParallelism + "/" + type, ignored -> search(maxParallelism, type)).clone();
    }

    private static Object[] search(int maxParallelism, KeyType type) {
        Object[] first = new Object[maxParallelism];
        int missing = maxParallelism;
        for (long n = 0; missing > 0; n++) {
            if (n == type.reservedCount()) { // never seen: 2^20 candidates cover 32768 key groups
                throw new IllegalStateException("the " + n + " reserved " + type.label() + " values do not reach all "
                        + maxParallelism + " key groups");
            }
            Object candidate = type.candidate(n);
            int group = KeyGroupRangeAssignment.assignToKeyGroup(candidate, maxParallelism);
            if (first[group] == null) {
                first[group] = candidate;
                missing--;
            }
        }
        return first;
    }
}
