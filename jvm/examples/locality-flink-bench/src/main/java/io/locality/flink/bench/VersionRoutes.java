package io.locality.flink.bench;

import io.locality.flink.RoutingKeySelector;
import io.locality.routing.LocalityStore;
import io.locality.routing.RoutingConfiguration;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;

/**
 * The first keyed operator's routing key under each store version: what {@link TraceReplaySource} partitions
 * the trace by, for the version the job runs and, after a switch, for the version it ran before.
 */
@FunctionalInterface
public interface VersionRoutes extends Serializable {
    /** The first operator's routing key under {@code version}. */
    KeySelector<Tuple3<String, String, byte[]>, String> first(long version);

    /**
     * The tables of {@code store} ({@code tables}), or the raw first key whatever the version ({@code hash}).
     * The store's URI travels with the job: each subtask that needs a version reads it from the store itself.
     */
    static VersionRoutes of(String store, String mode) {
        if (mode.equals("hash")) {
            return version -> new FieldKey(0);
        }
        return version -> {
            try {
                RoutingConfiguration configuration = LocalityStore.open(store).load(version);
                return RoutingKeySelector.of(configuration.table(configuration.topology().operators().get(0)),
                        String.class, new FieldKey(0));
            } catch (IOException e) {
                throw new UncheckedIOException("cannot load version " + version + " of the store " + store, e);
            }
        };
    }
}
