package io.locality.flink;

import io.locality.routing.RoutingTable;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * The Java type of a job's keys ({@code String}, {@code Long}, {@code Integer}), and the reserved values
 * of that type that serve as surrogates.
 *
 * <p>The same families as Python's {@code flink_surrogates}: candidate {@code n} is the String
 * {@code "\u0000locality:" + n}, the Long {@code Long.MIN_VALUE + n} ({@code n < 2^32}) or the Integer
 * {@code Integer.MIN_VALUE + n} ({@code n < 2^20}). A real key of a reserved form is refused, so a
 * surrogate never shares state with a real key. A surrogate has the key's own type, so the job's key
 * type does not change.
 */
public enum KeyType {
    STRING("string", String.class, Long.MAX_VALUE),
    LONG("long", Long.class, 1L << 32),
    INT("int", Integer.class, 1L << 20);

    /** What every String surrogate starts with (U+0000 then {@code locality:}). */
    public static final String SURROGATE_PREFIX = "\u0000locality:";

    private final String label;
    private final Class<?> javaClass;
    private final long reservedCount;

    KeyType(String label, Class<?> javaClass, long reservedCount) {
        this.label = label;
        this.javaClass = javaClass;
        this.reservedCount = reservedCount;
    }

    /** The name locality's files use: {@code string}, {@code long}, {@code int}. */
    public String label() {
        return label;
    }

    /** {@code String.class}, {@code Long.class} or {@code Integer.class}. */
    public Class<?> javaClass() {
        return javaClass;
    }

    /** How many candidates the family has (the size of its reserved range). */
    long reservedCount() {
        return reservedCount;
    }

    /** Candidate {@code n} of the family, {@code 0 <= n < reservedCount()}. */
    Object candidate(long n) {
        return switch (this) {
            case STRING -> SURROGATE_PREFIX + n;
            case LONG -> Long.MIN_VALUE + n;
            case INT -> (int) (Integer.MIN_VALUE + n);
        };
    }

    /** Whether {@code key} has the reserved form of a surrogate of this type. */
    public boolean isReserved(Object key) {
        return switch (this) {
            case STRING -> key instanceof String text && text.startsWith(SURROGATE_PREFIX);
            // value - MIN_VALUE, read unsigned, is the value's offset from MIN_VALUE
            case LONG -> key instanceof Long value && Long.compareUnsigned(value - Long.MIN_VALUE, reservedCount) < 0;
            case INT -> key instanceof Integer value && (long) value - Integer.MIN_VALUE < reservedCount;
        };
    }

    /**
     * The key as a job of this type holds it, from a table key ({@code String}, or {@code Long} for every
     * integral key) or a job key.
     *
     * @throws IllegalArgumentException when the key is not of this type (or an int key beyond {@code Integer})
     */
    public Object jobKey(Object key) {
        if (this == STRING && key instanceof String) {
            return key;
        }
        if (this != STRING && (key instanceof Long || key instanceof Integer)) {
            long value = ((Number) key).longValue();
            if (this == LONG) {
                return value;
            }
            if ((int) value == value) {
                return (int) value;
            }
        }
        throw new IllegalArgumentException("the keys are Java " + javaClass.getSimpleName() + " values; got "
                + (key == null ? "null" : key.getClass().getSimpleName() + " (" + key + ")"));
    }

    /** The type of the job keys of {@code javaClass}. */
    public static KeyType of(Class<?> javaClass) {
        return Stream.of(values()).filter(type -> type.javaClass == javaClass).findFirst().orElseThrow(
                () -> new IllegalArgumentException("a Flink routing key must be a String, Long or Integer; got "
                        + javaClass.getName()));
    }

    /**
     * The type of a table's keys: {@code STRING} for string keys, else the integer type its fallback
     * hashes ({@code int_type}), as Python's {@code RoutingKeySelector} infers it.
     *
     * @throws IllegalArgumentException for an empty table (its keys' type is unknown: name it) or one
     *     holding both strings and integers
     */
    public static KeyType of(RoutingTable table) {
        Supplier<Stream<Object>> keys = () -> Stream.concat(table.entries().keySet().stream(),
                table.splits().keySet().stream());
        Class<?> kind = keys.get().findAny().map(Object::getClass).orElseThrow(() -> new IllegalArgumentException(
                "the table of '" + table.operator() + "' is empty, so its keys' type is unknown; name it "
                        + "(KeyType.STRING, LONG or INT)"));
        if (keys.get().anyMatch(key -> key.getClass() != kind)) {
            throw new IllegalArgumentException("the table of '" + table.operator() + "' holds both string and "
                    + "integer keys; a Flink job keys on one Java type");
        }
        return kind == String.class ? STRING : table.fallbackSpec().intType().equals("int") ? INT : LONG;
    }
}
