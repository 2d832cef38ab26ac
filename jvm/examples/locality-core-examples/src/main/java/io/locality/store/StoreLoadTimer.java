package io.locality.store;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.storage.ObjectStore;
import io.locality.storage.StoreUri;
import java.util.Arrays;

/**
 * What {@code benchmarks/bench_store.py --java} times: a first load of a store's current version in this
 * JVM ({@link ConfigStore#load()}: {@code CURRENT}, the manifest, every configuration file checked
 * against its SHA-256, {@code configuration.json} parsed), beside reading and parsing the same
 * {@code configuration.json} bytes alone. The store's client is made before either is timed, and the two
 * alternate three times (medians printed), so that neither pays alone for the JVM warming up.
 *
 * <p>Usage: {@code StoreLoadTimer URI}; prints {@code load=SECONDS bytes_alone=SECONDS}.
 */
public final class StoreLoadTimer {
    private static final ObjectMapper JSON = new ObjectMapper();

    private StoreLoadTimer() {}

    public static void main(String[] args) throws Exception {
        ObjectStore objects = StoreUri.open(args[0]);
        ConfigStore store = new ConfigStore(objects);
        long version = store.currentVersion().orElseThrow();
        String document = String.format("versions/%06d/configuration/configuration.json", version);
        double[] load = new double[3];
        double[] alone = new double[3];
        for (int run = 0; run < load.length; run++) {
            long start = System.nanoTime();
            store.load();
            load[run] = (System.nanoTime() - start) / 1e9;
            start = System.nanoTime();
            JSON.readTree(objects.read(document, Long.MAX_VALUE).orElseThrow());
            alone[run] = (System.nanoTime() - start) / 1e9;
        }
        System.out.printf("load=%.3f bytes_alone=%.3f%n", median(load), median(alone));
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
