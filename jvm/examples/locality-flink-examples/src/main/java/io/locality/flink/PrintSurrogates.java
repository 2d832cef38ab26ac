package io.locality.flink;

import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The surrogate of every key group, from the command line:
 * {@code java io.locality.flink.PrintSurrogates MAX_PARALLELISM string|long|int}, one JSON value per line
 * (line {@code g} for key group {@code g}), as Python's {@code flink_surrogates} lists them. Exit status 2
 * on a bad argument.
 */
public final class PrintSurrogates {
    private PrintSurrogates() {}

    public static void main(String[] args) throws Exception {
        KeyType type = null;
        for (KeyType candidate : KeyType.values()) {
            type = args.length == 2 && candidate.label().equals(args[1]) ? candidate : type;
        }
        if (type == null || !args[0].matches("[0-9]{1,5}")) {
            System.err.println("usage: PrintSurrogates MAX_PARALLELISM string|long|int");
            System.exit(2);
        }
        ObjectMapper json = new ObjectMapper();
        StringBuilder out = new StringBuilder();
        try {
            for (Object surrogate : KeyGroupSurrogates.of(Integer.parseInt(args[0]), type)) {
                out.append(json.writeValueAsString(surrogate)).append('\n');
            }
        } catch (IllegalArgumentException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(2);
        }
        System.out.print(out);
    }
}
