package io.locality.routing;

import io.locality.hashing.FallbackHash;
import io.locality.hashing.FallbackHashes;
import io.locality.hashing.FallbackSpec;
import io.locality.hashing.TableKey;
import java.util.Collections;
import java.util.Map;
import java.util.OptionalInt;

/**
 * The routing table of one operator: explicit {@code key -> instance} entries, split plans for hot keys,
 * and the engine's own hash for every other key.
 *
 * <p>{@link #route(Object)} gives exactly what the Python {@code RoutingTable.route} gives. Immutable,
 * so one table may be shared by every thread of a job.
 */
public final class RoutingTable {
    private final String operator;
    private final FallbackSpec fallbackSpec;
    private final Map<Object, Integer> entries;
    private final Map<Object, int[]> splits;
    private volatile FallbackHash fallback;

    RoutingTable(String operator, FallbackSpec fallbackSpec, Map<Object, Integer> entries, Map<Object, int[]> splits) {
        this.operator = operator;
        this.fallbackSpec = fallbackSpec;
        this.entries = Collections.unmodifiableMap(entries);
        this.splits = Collections.unmodifiableMap(splits);
    }

    public String operator() {
        return operator;
    }

    /** The fallback hash as the table's header describes it (engine, instances, parameters). */
    public FallbackSpec fallbackSpec() {
        return fallbackSpec;
    }

    public int numInstances() {
        return fallbackSpec.numInstances();
    }

    /** The explicit entries, keys in their lookup form ({@link TableKey}). */
    public Map<Object, Integer> entries() {
        return entries;
    }

    /** Hot keys split over servers: per key, the instance for each server position. */
    public Map<Object, int[]> splits() {
        return splits;
    }

    /** The entry of {@code key}, if the table has one. */
    public OptionalInt entry(Object key) {
        Integer instance = entries.get(TableKey.of(key));
        return instance == null ? OptionalInt.empty() : OptionalInt.of(instance);
    }

    /** Instance of {@code key}: its entry, else the fallback hash (a split key goes to its home instance). */
    public int route(Object key) {
        Integer instance = entries.get(TableKey.of(key));
        return instance != null ? instance : fallback().instanceOf(key);
    }

    /**
     * Instance of {@code key} for a tuple whose neighbouring key sits on server position {@code server}:
     * a split key's plan for that server, else {@link #route(Object)}.
     */
    public int route(Object key, int server) {
        int[] plan = splits.get(TableKey.of(key));
        if (plan != null) {
            if (server < 0 || server >= plan.length) {
                throw new IllegalArgumentException("server position " + server + " outside 0.." + (plan.length - 1)
                        + " of the split plans of operator '" + operator + "'");
            }
            return plan[server];
        }
        return route(key);
    }

    /** The fallback hash, made on first use from the providers on the classpath. */
    public FallbackHash fallback() {
        FallbackHash made = fallback;
        if (made == null) {
            made = FallbackHashes.of(fallbackSpec);
            fallback = made;
        }
        return made;
    }
}
