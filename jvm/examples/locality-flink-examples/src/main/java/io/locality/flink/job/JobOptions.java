package io.locality.flink.job;

import io.locality.store.ConfigStore;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The two-stage job's command line:
 * {@code --store STORE [--version N] --input FILE_OR_DIR --mode tables|raw [--parallelism P]
 * [--max-parallelism M] [--output DIR] [--rate R] [--sketches STORE [--sketch-interval SECONDS]
 * [--sketch-capacity COUNTERS] [--sketch-updates-per-second N]]}.
 *
 * @param store the store: a directory or an {@code s3://bucket/prefix} URI ({@link ConfigStore#open(String)})
 * @param version the store version to read; null for the current one
 * @param parallelism the keyed operators' parallelism; null for the tables'
 * @param maxParallelism their max parallelism; null for the tables'
 * @param output where to write one JSON line per record; null to discard the records
 * @param rate records per second the input is replayed at, by a source a savepoint resumes
 *     ({@link IndexedLines}); null to read it as fast as the job goes
 * @param sketching where and how a {@code KeyPairSketcher} between the two operators publishes its sketches
 *     ({@code --sketches}, {@code --sketch-interval}: seconds, default {@value Sketching#DEFAULT_INTERVAL},
 *     {@code --sketch-capacity}: default {@value Sketching#DEFAULT_CAPACITY}, {@code --sketch-updates-per-second}:
 *     default {@value Sketching#DEFAULT_UPDATES_PER_SECOND}); null for no sketcher
 */
public record JobOptions(String store, Long version, String input, Mode mode, Integer parallelism,
        Integer maxParallelism, String output, Integer rate, Sketching sketching) {

    static final String USAGE = "usage: TwoStageJob --store STORE [--version N] --input FILE_OR_DIR --mode tables|raw "
            + "[--parallelism P] [--max-parallelism M] [--output DIR] [--rate R] "
            + "[--sketches STORE [--sketch-interval SECONDS] [--sketch-capacity COUNTERS] "
            + "[--sketch-updates-per-second N]]";
    private static final List<String> NAMES = List.of("--store", "--version", "--input", "--mode", "--parallelism",
            "--max-parallelism", "--output", "--rate", "--sketches", "--sketch-interval", "--sketch-capacity",
            "--sketch-updates-per-second");

    /**
     * Parses and checks the arguments.
     *
     * @throws IllegalArgumentException naming the option that is unknown, missing, repeated or malformed
     */
    public static JobOptions parse(String... args) {
        Map<String, String> given = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!NAMES.contains(args[i])) {
                throw new IllegalArgumentException("unknown option '" + args[i] + "'");
            }
            if (i + 1 == args.length) {
                throw new IllegalArgumentException("option " + args[i] + " needs a value");
            }
            if (given.put(args[i], args[i + 1]) != null) {
                throw new IllegalArgumentException("option " + args[i] + " is given twice");
            }
        }
        for (String required : List.of("--store", "--input", "--mode")) {
            if (!given.containsKey(required)) {
                throw new IllegalArgumentException("option " + required + " is required");
            }
        }
        String store = given.get("--store");
        ConfigStore.open(store); // an unserved scheme is refused here, a missing store when it is read
        Long version = positive(given, "--version", Long.MAX_VALUE);
        return new JobOptions(store, version, given.get("--input"), Mode.parse(given.get("--mode")),
                positiveInt(given, "--parallelism"), positiveInt(given, "--max-parallelism"), given.get("--output"),
                positiveInt(given, "--rate"), sketching(given));
    }

    /** The sketcher's options, or null without {@code --sketches}. */
    private static Sketching sketching(Map<String, String> given) {
        String store = given.get("--sketches");
        Integer interval = positiveInt(given, "--sketch-interval");
        Integer capacity = positiveInt(given, "--sketch-capacity");
        Integer budget = positiveInt(given, "--sketch-updates-per-second");
        if (store == null) {
            if (interval != null || capacity != null || budget != null) {
                throw new IllegalArgumentException("--sketch-interval, --sketch-capacity and "
                        + "--sketch-updates-per-second need --sketches STORE");
            }
            return null;
        }
        ConfigStore.open(store); // an unserved scheme is refused here
        return new Sketching(store, interval == null ? Sketching.DEFAULT_INTERVAL : interval,
                capacity == null ? Sketching.DEFAULT_CAPACITY : capacity,
                budget == null ? Sketching.DEFAULT_UPDATES_PER_SECOND : budget);
    }

    private static Integer positiveInt(Map<String, String> given, String name) {
        Long value = positive(given, name, Integer.MAX_VALUE);
        return value == null ? null : value.intValue();
    }

    private static Long positive(Map<String, String> given, String name, long maximum) {
        String text = given.get(name);
        if (text == null) {
            return null;
        }
        try {
            long value = Long.parseLong(text);
            if (value >= 1 && value <= maximum) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(name + " must be an integer >= 1; got '" + text + "'");
    }
}
