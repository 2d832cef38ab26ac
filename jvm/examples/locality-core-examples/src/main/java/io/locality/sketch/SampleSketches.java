package io.locality.sketch;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.storage.StoreUri;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * Sketches records as an engine's sketchers would at a given rate, sampled by {@link RecordSampler} within a budget,
 * and publishes each publisher's sketches of each interval into a store: how the tests and benchmarks measure what
 * sampling costs the tables learned from the sketches, on real traces, with the engines' own sampler.
 *
 * <pre>
 * SampleSketches --store STORE --input RECORDS.jsonl --from A --to B --rate R --budget B --capacity C [--seed S]
 * </pre>
 *
 * Each line of {@code RECORDS.jsonl} is one record, {@code {"from": ms, "to": ms, "publisher": "ID", "a": key,
 * "b": key}} (a key a JSON string or integer), in the order each publisher passes them: the interval of the record
 * and the publisher (an engine's instance) that sketches it, the key of operator {@code A} and of {@code B}. Every
 * publisher passes its records at {@code R} a second of a clock of its own (its {@code n}-th record at {@code n / R}
 * s), so its sampler (a budget of {@code B} updates a second, seeded with {@code S} and the publisher's id) leaves
 * out a share {@code 1 - B / R} of them. When a publisher's interval ends (its next record is of another one, or the
 * input ends) its sketches of {@code C} counters are published ({@link HopSketches#publish}) and fresh ones begin.
 * Prints {@code {"records": n, "sketched": m, "objects": k}}. Exit status 0 on success, 2 when an argument or a line
 * is wrong (the message names it), 1 when the input cannot be read or the store written.
 */
public final class SampleSketches {
    private SampleSketches() {}

    /** One publisher's sampler, clock and sketches of its current interval. */
    private static final class Publisher {
        final String id;
        final RecordSampler sampler;
        final double secondsPerRecord;
        long passed;
        HopSketches sketches;
        SketchInterval interval;

        Publisher(String id, Hop hop, Options options) {
            this.id = id;
            this.secondsPerRecord = 1.0 / options.rate;
            this.sampler = new RecordSampler(options.budget, () -> (long) (passed * secondsPerRecord * 1000),
                    options.seed ^ id.hashCode());
            this.sketches = new HopSketches(hop, options.capacity, true);
        }
    }

    private record Options(String store, Path input, Hop hop, double rate, int budget, int capacity, long seed) {}

    public static void main(String[] args) {
        JsonTool.main(args, given -> run(options(given)));
    }

    static Map<String, Long> run(Options options) throws IOException {
        SketchPublisher store = new SketchPublisher(StoreUri.open(options.store()));
        ObjectMapper json = new ObjectMapper();
        Map<String, Publisher> publishers = new HashMap<>();
        long records = 0;
        long sketched = 0;
        long objects = 0;
        try (BufferedReader lines = Files.newBufferedReader(options.input())) {
            String line;
            while ((line = lines.readLine()) != null) {
                records++;
                JsonNode record = json.readTree(line);
                String id = field(record, "publisher", records).asText();
                Publisher publisher = publishers.computeIfAbsent(id, p -> new Publisher(p, options.hop(), options));
                SketchInterval interval = new SketchInterval(field(record, "from", records).asLong(),
                        field(record, "to", records).asLong());
                if (publisher.interval != null && !interval.equals(publisher.interval)) {
                    objects += publish(store, publisher);
                }
                publisher.interval = interval;
                double weight = publisher.sampler.next();
                publisher.passed++;
                if (weight > 0) {
                    sketched++;
                    publisher.sketches.update(key(field(record, "a", records)), key(field(record, "b", records)),
                            weight);
                }
            }
        }
        for (Publisher publisher : publishers.values()) {
            if (publisher.interval != null) {
                objects += publish(store, publisher);
            }
        }
        return Map.of("records", records, "sketched", sketched, "objects", objects);
    }

    private static int publish(SketchPublisher store, Publisher publisher) throws IOException {
        int written = publisher.sketches.isEmpty() ? 0
                : publisher.sketches.publish(store, publisher.interval, publisher.id).size();
        publisher.sketches = publisher.sketches.fresh();
        return written;
    }

    private static JsonNode field(JsonNode record, String name, long line) {
        JsonNode value = record.get(name);
        if (value == null || value.isNull()) {
            throw new IllegalArgumentException("line " + line + " of the input has no '" + name + "'");
        }
        return value;
    }

    private static Object key(JsonNode value) {
        return value.isIntegralNumber() ? (Object) value.asLong() : value.asText();
    }

    private static Options options(String[] args) {
        Map<String, String> given = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --option value pairs; got '" + args[i] + "'");
            }
            given.put(args[i], args[i + 1]);
        }
        for (String required : new String[] {"--store", "--input", "--from", "--to", "--rate", "--budget",
            "--capacity"}) {
            if (!given.containsKey(required)) {
                throw new IllegalArgumentException(required + " is required");
            }
        }
        try {
            return new Options(given.get("--store"), Path.of(given.get("--input")),
                    new Hop(given.get("--from"), given.get("--to")), Double.parseDouble(given.get("--rate")),
                    Integer.parseInt(given.get("--budget")), Integer.parseInt(given.get("--capacity")),
                    Long.parseLong(given.getOrDefault("--seed", "0")));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--rate, --budget, --capacity and --seed are numbers: " + e.getMessage());
        }
    }
}
