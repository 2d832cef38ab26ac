package io.locality.store;

import io.locality.routing.RoutingConfiguration;
import io.locality.storage.StoreUnavailableException;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The versions this JVM loaded from each store, so that a reader that starts while its store cannot be read
 * (an outage) starts on what the JVM already served rather than failing or guessing.
 *
 * <p>An engine prepares its routing again inside a running JVM (a Storm worker re-preparing its groupings, a
 * Kafka Streams group leader assigning tasks at each rebalance). The store's readers keep the version they
 * have when the store cannot be read (docs/store-protocol.md, "Reading"); this class is that memory across
 * the engine's objects. A pinned version is immutable, so once loaded it is never read again; the version
 * {@code CURRENT} names is read at every call, and the last one read is what an outage falls back on. A
 * reader with nothing in memory waits for the store, bounded ({@link StoreRetry}). Damage and a missing
 * version are never covered up: they are thrown as they were.
 *
 * <p>While a store is out, a read may cost the client's whole timeout (a server that accepts connections and
 * never answers), and an engine prepares its routing many times in a row (a Storm worker, once per executor):
 * so for {@value #RECHECK_SECONDS} s after a read of {@code CURRENT} found the store unavailable, the other
 * readers that have a version to fall back on take it without reading.
 *
 * <p>It holds the last {@value #KEPT} versions of each store (a version's tables are the only large thing
 * in it), JVM-wide and thread-safe.
 */
public final class LastGoodVersions {
    /** Told when a reader starts on a version it had, because the store cannot be read now. */
    public interface Listener extends StoreRetry.Listener {
        /** No-op. */
        Listener NONE = new Listener() { };

        /** {@code CURRENT} could not be read ({@code why}): {@code kept} is the last version this JVM read. */
        default void keptVersion(RoutingConfiguration kept, IOException why) { }
    }

    /** Versions kept per store. */
    static final int KEPT = 4;
    /** How long after a read found the store unavailable the readers with a version to fall back on read no more. */
    static final int RECHECK_SECONDS = 10;

    private static final Map<String, Held> HELD = new LinkedHashMap<>();

    private LastGoodVersions() {}

    /**
     * The version {@code CURRENT} names, verified; when the store is unavailable, the last version this JVM
     * read from it, else the store's answer waited for within {@code retry}'s bound.
     *
     * @throws IOException when the store is damaged or has no version (at once), or did not answer in time
     *     and this JVM never read it
     */
    public static RoutingConfiguration current(ConfigStore store, StoreRetry retry, Listener listener)
            throws IOException {
        Optional<RoutingConfiguration> kept = latest(store);
        StoreUnavailableException recent = recentOutage(store);
        if (kept.isPresent() && recent != null) {
            listener.keptVersion(kept.get(), recent);
            return kept.get();
        }
        RoutingConfiguration loaded;
        try {
            loaded = store.load();
        } catch (StoreUnavailableException unavailable) {
            synchronized (HELD) {
                HELD.computeIfAbsent(store.uri(), uri -> new Held()).outage(unavailable);
            }
            if (kept.isPresent()) {
                listener.keptVersion(kept.get(), unavailable);
                return kept.get();
            }
            loaded = retry.read("the current version of " + store.uri(), store::load, listener);
        }
        remember(store, loaded);
        return loaded;
    }

    /** The unavailability a read of {@code store} met within the last {@link #RECHECK_SECONDS}, if any. */
    private static StoreUnavailableException recentOutage(ConfigStore store) {
        synchronized (HELD) {
            Held held = HELD.get(store.uri());
            return held == null ? null : held.recentOutage();
        }
    }

    /**
     * Version {@code version} of {@code store}, verified: the one this JVM loaded, else read, waiting for an
     * unavailable store within {@code retry}'s bound.
     *
     * @throws IOException when the version is missing or damaged (at once), or the store did not answer in time
     */
    public static RoutingConfiguration pinned(ConfigStore store, long version, StoreRetry retry,
            StoreRetry.Listener listener) throws IOException {
        synchronized (HELD) {
            Held held = HELD.get(store.uri());
            RoutingConfiguration known = held == null ? null : held.versions.get(version);
            if (known != null) {
                return known;
            }
        }
        RoutingConfiguration loaded = retry.read("version " + version + " of " + store.uri(),
                () -> store.load(version), listener);
        synchronized (HELD) {
            HELD.computeIfAbsent(store.uri(), uri -> new Held()).versions.put(version, loaded);
        }
        return loaded;
    }

    /** Keeps {@code loaded}, just read from {@code store}'s {@code CURRENT}, as the store's latest. */
    public static void remember(ConfigStore store, RoutingConfiguration loaded) {
        synchronized (HELD) {
            Held held = HELD.computeIfAbsent(store.uri(), uri -> new Held());
            held.versions.put(loaded.version(), loaded);
            held.latest = loaded.version();
            held.outage = null;
        }
    }

    /** The version this JVM last read as {@code store}'s current one, if it did. */
    public static Optional<RoutingConfiguration> latest(ConfigStore store) {
        synchronized (HELD) {
            Held held = HELD.get(store.uri());
            return held == null || held.latest == null ? Optional.empty()
                    : Optional.ofNullable(held.versions.get(held.latest));
        }
    }

    /** Forgets the outages met (for tests: as if {@link #RECHECK_SECONDS} had passed). */
    static void forgetOutages() {
        synchronized (HELD) {
            HELD.values().forEach(held -> held.outage = null);
        }
    }

    /** Forgets every store (for tests: each starts as a new JVM would). */
    static void forget() {
        synchronized (HELD) {
            HELD.clear();
        }
    }

    /** What one store gave this JVM: its last versions by number, and which of them was last current. */
    private static final class Held {
        private final Map<Long, RoutingConfiguration> versions = new LinkedHashMap<>(KEPT, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, RoutingConfiguration> eldest) {
                return size() > KEPT && !eldest.getKey().equals(latest);
            }
        };
        private Long latest;
        private StoreUnavailableException outage;
        private long outageAt;

        void outage(StoreUnavailableException unavailable) {
            outage = unavailable;
            outageAt = System.nanoTime();
        }

        StoreUnavailableException recentOutage() {
            return outage != null && System.nanoTime() - outageAt < RECHECK_SECONDS * 1_000_000_000L ? outage : null;
        }
    }
}
