package io.locality.sketch;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Builds, reads, merges and writes {@link SpaceSaving} sketches from the command line: how the tests compare the
 * Java sketch with the Python one on the shared traces.
 *
 * <pre>
 * SketchTool (--capacity M [--arity A] | --read SKETCH) [--ints I,J] [--weighted] [--keys TSV]... [--merge SKETCH]...
 *            [--out SKETCH] [--query TSV] [--top K]
 * </pre>
 *
 * The sketch starts empty ({@code --capacity}, {@code --arity}, default 1) or as the bytes of {@code --read} (of
 * the arity {@code --arity} says, if given); takes
 * every row of each {@code --keys} file, in order, with {@link SpaceSaving#update(SketchKey, double)}; then merges
 * each {@code --merge} sketch, in order; writes its bytes to {@code --out}. A key file holds one record per line,
 * its {@code arity} components separated by tabs (then its weight when {@code --weighted}, else weight 1), the
 * columns listed by {@code --ints} (from 0) as 64-bit integers and the others as strings, where {@code \\},
 * {@code \t}, {@code \n} and {@code \r} stand for a backslash, a tab, a line feed and a carriage return. Prints one
 * JSON object on stdout: {@code capacity}, {@code arity}, {@code size}, {@code total}, {@code minCount}; with
 * {@code --query}, {@code estimates}: {@code [estimate, lower, upper]} for each key row of that file; with
 * {@code --top K}, {@code top}: {@code [[components...], estimate, lower, upper]} rows of {@link SpaceSaving#topK}.
 * Exit status 0 on success, 2 when an argument, a file or a sketch's bytes cannot be used (the message on stderr
 * names it).
 */
public final class SketchTool {
    private SketchTool() {}

    public static void main(String[] args) {
        try {
            Map<String, Object> summary = run(args);
            System.out.println(new ObjectMapper().writeValueAsString(summary));
        } catch (IOException | IllegalArgumentException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(2);
        }
    }

    static Map<String, Object> run(String[] args) throws IOException {
        Options options = Options.parse(args);
        SpaceSaving sketch = options.read != null
                ? SpaceSaving.fromBytes(Files.readAllBytes(options.read))
                : new SpaceSaving(options.capacity, options.arity == null ? 1 : options.arity);
        if (options.arity != null && options.arity != sketch.arity()) {
            throw new IllegalArgumentException("--arity " + options.arity + " but " + options.read + " holds a sketch "
                    + "of arity " + sketch.arity());
        }
        Rows rows = new Rows(sketch.arity(), options.ints, options.weighted);
        for (Path keys : options.keys) {
            rows.read(keys, sketch::update);
        }
        for (Path other : options.merges) {
            sketch.merge(SpaceSaving.fromBytes(Files.readAllBytes(other)));
        }
        if (options.out != null) {
            Files.write(options.out, sketch.toBytes());
        }
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("capacity", sketch.capacity());
        summary.put("arity", sketch.arity());
        summary.put("size", sketch.size());
        summary.put("total", sketch.totalWeight());
        summary.put("minCount", sketch.minCount());
        if (options.query != null) {
            List<double[]> estimates = new ArrayList<>();
            new Rows(sketch.arity(), options.ints, false).read(options.query, (key, weight) -> estimates.add(
                    new double[] {sketch.estimate(key), sketch.lowerBound(key), sketch.upperBound(key)}));
            summary.put("estimates", estimates);
        }
        if (options.top >= 0) {
            List<List<Object>> top = new ArrayList<>();
            for (SketchCounter counter : sketch.topK(options.top)) {
                List<Object> components = new ArrayList<>();
                for (int p = 0; p < sketch.arity(); p++) {
                    components.add(counter.key().component(p));
                }
                top.add(List.of(components, counter.estimate(), counter.lowerBound(), counter.upperBound()));
            }
            summary.put("top", top);
        }
        return summary;
    }

    /** The command line, checked. */
    private static final class Options {
        int capacity = -1;
        Integer arity; // null: 1, or the arity of the --read sketch
        Path read;
        Set<Integer> ints = new HashSet<>();
        boolean weighted;
        List<Path> keys = new ArrayList<>();
        List<Path> merges = new ArrayList<>();
        Path out;
        Path query;
        int top = -1;

        static Options parse(String[] args) {
            Options options = new Options();
            for (int i = 0; i < args.length; i++) {
                String flag = args[i];
                if (flag.equals("--weighted")) {
                    options.weighted = true;
                    continue;
                }
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(flag + " needs a value; " + USAGE);
                }
                String value = args[++i];
                switch (flag) {
                    case "--capacity" -> options.capacity = integer(flag, value);
                    case "--arity" -> options.arity = integer(flag, value);
                    case "--read" -> options.read = Path.of(value);
                    case "--ints" -> {
                        for (String column : value.split(",")) {
                            options.ints.add(integer(flag, column));
                        }
                    }
                    case "--keys" -> options.keys.add(Path.of(value));
                    case "--merge" -> options.merges.add(Path.of(value));
                    case "--out" -> options.out = Path.of(value);
                    case "--query" -> options.query = Path.of(value);
                    case "--top" -> options.top = integer(flag, value);
                    default -> throw new IllegalArgumentException("unknown option " + flag + "; " + USAGE);
                }
            }
            if ((options.read == null) == (options.capacity < 0)) {
                throw new IllegalArgumentException("give either --capacity or --read; " + USAGE);
            }
            return options;
        }

        private static int integer(String flag, String value) {
            try {
                return Integer.parseInt(value);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(flag + " takes an integer; got " + value);
            }
        }
    }

    private static final String USAGE = "usage: SketchTool (--capacity M [--arity A] | --read SKETCH) [--ints I,J] "
            + "[--weighted] [--keys TSV]... [--merge SKETCH]... [--out SKETCH] [--query TSV] [--top K]";

    /** What is done with each row of a key file. */
    private interface RowSink {
        void accept(SketchKey key, double weight);
    }

    /** Key rows of a TSV file: components, then a weight when weighted; escapes undone. */
    private record Rows(int arity, Set<Integer> ints, boolean weighted) {
        void read(Path file, RowSink sink) throws IOException {
            int fields = arity + (weighted ? 1 : 0);
            int line = 0;
            try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
                for (String text = in.readLine(); text != null; text = in.readLine()) {
                    line++;
                    String[] parts = text.split("\t", -1);
                    if (parts.length != fields) {
                        throw new IllegalArgumentException(file + ", line " + line + ": " + parts.length
                                + " fields, expected " + fields);
                    }
                    Object[] components = new Object[arity];
                    try {
                        for (int p = 0; p < arity; p++) {
                            String field = unescape(parts[p]);
                            components[p] = ints.contains(p) ? (Object) integer(p, field) : field;
                        }
                        sink.accept(SketchKey.of(components), weighted ? Double.parseDouble(parts[arity]) : 1.0);
                    } catch (IllegalArgumentException e) { // a bad field, key or weight
                        throw new IllegalArgumentException(file + ", line " + line + ": " + e.getMessage(), e);
                    }
                }
            }
        }

        private static long integer(int column, String field) {
            try {
                return Long.parseLong(field);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("column " + column + " holds 64-bit integers (--ints); got "
                        + field);
            }
        }

        private static String unescape(String field) {
            if (field.indexOf('\\') < 0) {
                return field;
            }
            StringBuilder out = new StringBuilder(field.length());
            for (int i = 0; i < field.length(); i++) {
                char c = field.charAt(i);
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char next = ++i < field.length() ? field.charAt(i) : ' ';
                switch (next) {
                    case '\\' -> out.append('\\');
                    case 't' -> out.append('\t');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    default -> throw new IllegalArgumentException("a backslash must start \\\\, \\t, \\n or \\r; got "
                            + field);
                }
            }
            return out.toString();
        }
    }
}
