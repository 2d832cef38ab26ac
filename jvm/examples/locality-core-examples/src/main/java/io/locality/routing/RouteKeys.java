package io.locality.routing;

import io.locality.hashing.TableKey;
import io.locality.store.ConfigStore;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Routes a file of keys through one operator's table of a store, from the command line:
 * {@code java io.locality.routing.RouteKeys STORE OPERATOR KEYS OUT [VERSION]}.
 *
 * <p>{@code STORE} is a directory or an {@code s3://bucket/prefix} URI ({@link ConfigStore#open(String)}).
 * {@code KEYS} holds one key per line as JSON (a string, or an integer); {@code OUT} receives one
 * instance per line. Integral keys are routed as the job's key type ({@code Integer} when the table's
 * fallback says {@code int_type: int}, else {@code Long}). It is how a platform engineer checks what a
 * Java job will do with a key, and how the tests compare the JVM's routes with Python's. Exit status 0
 * on success, 2 when the store or a file cannot be used (the message names it).
 */
public final class RouteKeys {
    private RouteKeys() {}

    public static void main(String[] args) {
        if (args.length < 4 || args.length > 5) {
            System.err.println("usage: RouteKeys STORE OPERATOR KEYS OUT [VERSION]");
            System.exit(2);
        }
        try {
            ConfigStore store = ConfigStore.open(args[0]);
            RoutingConfiguration configuration =
                    args.length == 5 ? store.load(Long.parseLong(args[4])) : store.load();
            int routed = route(configuration.table(args[1]), Path.of(args[2]), Path.of(args[3]));
            System.err.printf("routed %,d keys of %s through version %d%n", routed, args[1], configuration.version());
        } catch (IOException | IllegalArgumentException | IllegalStateException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(2);
        }
    }

    /**
     * Routes every key of {@code keys} into {@code out}, written beside it and moved into place once whole: a bad
     * key (named with its file and line) or a failed read leaves no {@code out} behind. An {@code out} that is not a
     * regular file ({@code /dev/stdout}, a FIFO) is written to as it is, never replaced.
     */
    static int route(RoutingTable table, Path keys, Path out) throws IOException {
        if (Files.exists(out) && !Files.isRegularFile(out)) {
            try (BufferedWriter writer = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
                return route(table, keys, writer);
            }
        }
        Path absolute = out.toAbsolutePath();
        Path partial = Files.createTempFile(absolute.getParent(), "." + absolute.getFileName(), ".partial");
        try {
            int routed;
            try (BufferedWriter writer = Files.newBufferedWriter(partial, StandardCharsets.UTF_8)) {
                routed = route(table, keys, writer);
            }
            Files.move(partial, out, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            return routed;
        } finally {
            Files.deleteIfExists(partial);
        }
    }

    private static int route(RoutingTable table, Path keys, BufferedWriter writer) throws IOException {
        String intType = table.fallbackSpec().intType();
        int routed = 0;
        try (BufferedReader in = Files.newBufferedReader(keys, StandardCharsets.UTF_8)) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                Object key;
                try {
                    key = TableKey.asJobKey(RoutingConfiguration.keyFromJson(line), intType);
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException(keys + ", line " + (routed + 1) + ": " + e.getMessage());
                }
                writer.write(Integer.toString(table.route(key)));
                writer.newLine();
                routed++;
            }
        }
        return routed;
    }
}
