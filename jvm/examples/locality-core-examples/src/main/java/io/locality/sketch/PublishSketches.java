package io.locality.sketch;

import io.locality.storage.StoreUri;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Publishes sketch files into a store's {@code sketches/} with {@link SketchPublisher}: how the tests check that
 * what Java publishes is what Python's {@code read_sketches} reads, in a directory and in S3.
 *
 * <pre>
 * PublishSketches --store STORE --interval FROM-TO --publisher ID [--pairs A B FILE]... [--loads OP FILE]...
 * </pre>
 *
 * {@code FROM-TO} are the interval's bounds in epoch milliseconds; each {@code FILE} holds a sketch's bytes
 * ({@link SpaceSaving#toBytes()}, as Python's {@code to_bytes} or {@code SketchTool --out} write them). Prints the
 * names written as a JSON list. Exit status 0 on success, 2 when an argument, a file or a name is wrong, 1 when the
 * store cannot be written (the message on stderr names it).
 */
public final class PublishSketches {
    private PublishSketches() {}

    public static void main(String[] args) {
        JsonTool.main(args, PublishSketches::run);
    }

    static List<String> run(String[] args) throws IOException {
        String store = null;
        SketchInterval interval = null;
        String publisher = null;
        Map<Hop, SpaceSaving> pairs = new LinkedHashMap<>();
        Map<String, SpaceSaving> loads = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--store" -> store = value(args, ++i, "--store");
                case "--interval" -> interval = interval(value(args, ++i, "--interval"));
                case "--publisher" -> publisher = value(args, ++i, "--publisher");
                case "--pairs" -> {
                    Hop hop = new Hop(value(args, ++i, "--pairs"), value(args, ++i, "--pairs"));
                    pairs.put(hop, read(Path.of(value(args, ++i, "--pairs"))));
                }
                case "--loads" -> {
                    String operator = value(args, ++i, "--loads");
                    loads.put(operator, read(Path.of(value(args, ++i, "--loads"))));
                }
                default -> throw new IllegalArgumentException("unknown option '" + args[i] + "'");
            }
        }
        if (store == null || interval == null || publisher == null) {
            throw new IllegalArgumentException("--store, --interval and --publisher are required");
        }
        return new SketchPublisher(StoreUri.open(store)).publish(interval, publisher, pairs, loads);
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new IllegalArgumentException("option " + option + " needs more values");
        }
        return args[i];
    }

    private static SketchInterval interval(String text) {
        String[] bounds = text.split("-", -1);
        try {
            if (bounds.length == 2) {
                return new SketchInterval(Long.parseLong(bounds[0]), Long.parseLong(bounds[1]));
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("--interval must be FROM-TO in epoch milliseconds; got '" + text + "'");
    }

    private static SpaceSaving read(Path file) throws IOException {
        return SpaceSaving.fromBytes(Files.readAllBytes(file));
    }
}
