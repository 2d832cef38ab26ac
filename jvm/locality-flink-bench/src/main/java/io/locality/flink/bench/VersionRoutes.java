package io.locality.flink.bench;

import io.locality.flink.RoutingKeySelector;
import io.locality.routing.LocalityStore;
import io.locality.routing.RoutingConfiguration;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.file.Path;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;

/**
 * The first keyed operator's routing key under each store version: what {@link TraceReplaySource} partitions
 * the trace by, for the version the job runs and, after a switch, for the version it ran before.
 */
@FunctionalInterface
public interface VersionRoutes extends Serializable {
    /** The first operator's routing key under {@code version}. */
    KeySelector<Tuple3<String, String, byte[]>, String> first(int version);

    /** The tables of {@code store} ({@code tables}), or the raw first key whatever the version ({@code hash}). */
    static VersionRoutes of(Path store, String mode) {
        String root = store.toString();
        if (mode.equals("hash")) {
            return version -> new FieldKey(0);
        }
        return version -> {
            try {
                RoutingConfiguration configuration = new LocalityStore(Path.of(root)).load(version);
                return RoutingKeySelector.of(configuration.table(configuration.topology().operators().get(0)),
                        String.class, new FieldKey(0));
            } catch (IOException e) {
                throw new UncheckedIOException("cannot load version " + version + " of the store " + root, e);
            }
        };
    }
}
