package io.locality.flink;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.routing.RoutingConfiguration;
import io.locality.store.ConfigStore;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * What a Flink job keys each key of a file on, from the command line:
 * {@code java io.locality.flink.PrintRoutingKeys STORE OPERATOR KEYS OUT [SERVER]}.
 *
 * <p>{@code STORE} is a directory or an {@code s3://bucket/prefix} URI ({@code ConfigStore.open}).
 * {@code KEYS} holds one key per line as JSON (a string or an integer); {@code OUT} receives, per
 * line, the routing key as JSON ({@link FlinkRoutingKeys#routingKey(Object)}, or the split part for
 * server position {@code SERVER} when given), or {@code null} where the key is refused (a reserved form,
 * or not of the table's key type). It is how a platform engineer sees what a job will do with a key, and
 * how the tests compare Java's routing keys with Python's {@code RoutingKeySelector}. Exit status 0 on
 * success, 2 when the store, the table or a file cannot be used (the message names it).
 */
public final class PrintRoutingKeys {
    private PrintRoutingKeys() {}

    public static void main(String[] args) {
        if (args.length < 4 || args.length > 5) {
            System.err.println("usage: PrintRoutingKeys STORE OPERATOR KEYS OUT [SERVER]");
            System.exit(2);
        }
        try {
            RoutingConfiguration configuration = ConfigStore.open(args[0]).load();
            FlinkRoutingKeys routes = FlinkRoutingKeys.of(configuration.table(args[1]));
            Integer server = args.length == 5 ? Integer.valueOf(args[4]) : null;
            int printed = print(routes, server, Path.of(args[2]), Path.of(args[3]));
            System.err.printf("%,d routing keys of %s (version %d, max parallelism %d, parallelism %d)%n", printed,
                    args[1], configuration.version(), routes.maxParallelism(), routes.parallelism());
        } catch (IOException | IllegalArgumentException | IllegalStateException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(2);
        }
    }

    static int print(FlinkRoutingKeys routes, Integer server, Path keys, Path out) throws IOException {
        ObjectMapper json = new ObjectMapper();
        int printed = 0;
        try (BufferedReader in = Files.newBufferedReader(keys, StandardCharsets.UTF_8);
                BufferedWriter writer = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                Object routingKey;
                try {
                    Object key = routes.keyType().jobKey(RoutingConfiguration.keyFromJson(line));
                    routingKey = server == null ? routes.routingKey(key) : routes.routingKey(key, server);
                } catch (IllegalArgumentException refused) {
                    routingKey = null;
                }
                writer.write(json.writeValueAsString(routingKey));
                writer.newLine();
                printed++;
            }
        }
        return printed;
    }
}
