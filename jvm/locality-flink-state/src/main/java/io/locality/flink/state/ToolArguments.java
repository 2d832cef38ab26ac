package io.locality.flink.state;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The {@code --name value} arguments of a tool's main: each option once, except those that may repeat.
 *
 * @param values option -> its values, in the order given
 */
record ToolArguments(Map<String, List<String>> values) {

    /**
     * @throws IllegalArgumentException naming an unknown, repeated, value-less or missing option
     */
    static ToolArguments parse(String[] args, Set<String> once, Set<String> repeated, Set<String> required) {
        Map<String, List<String>> values = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            String name = args[i];
            if (!once.contains(name) && !repeated.contains(name)) {
                throw new IllegalArgumentException("unknown option '" + name + "'");
            }
            if (i + 1 == args.length) {
                throw new IllegalArgumentException("option " + name + " needs a value");
            }
            List<String> given = values.computeIfAbsent(name, n -> new ArrayList<>());
            if (once.contains(name) && !given.isEmpty()) {
                throw new IllegalArgumentException("option " + name + " is given twice");
            }
            given.add(args[i + 1]);
        }
        for (String name : required) {
            if (!values.containsKey(name)) {
                throw new IllegalArgumentException("option " + name + " is required");
            }
        }
        return new ToolArguments(values);
    }

    /** The value of an option given once, or null. */
    String get(String name) {
        List<String> given = values.get(name);
        return given == null ? null : given.get(0);
    }

    /** Every value of a repeatable option. */
    List<String> all(String name) {
        return values.getOrDefault(name, List.of());
    }

    /**
     * An integer option in {@code minimum..maximum}, or null when it is not given (store versions are
     * {@code long}, as the store numbers them; parallelisms {@code int}).
     */
    Long integer(String name, long minimum, long maximum) {
        String text = get(name);
        if (text == null) {
            return null;
        }
        try {
            long value = Long.parseLong(text);
            if (value >= minimum && value <= maximum) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(name + " must be an integer in " + minimum + ".." + maximum + "; got '"
                + text + "'");
    }
}
