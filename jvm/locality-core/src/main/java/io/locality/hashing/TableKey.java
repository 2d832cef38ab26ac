package io.locality.hashing;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The form in which tables hold keys: a {@code String}, or a {@code Long} for every integral key.
 *
 * <p>locality's tables hold strings and 64-bit integers (Python {@code str} and {@code int}). A job may
 * key its records by {@code Integer} (an engine whose fallback says {@code int_type: int}) or by
 * {@code Long}; both find the same entry, since the lookup widens integral keys to {@code Long}. The
 * fallback hash, on the other hand, always sees the key as the job typed it, because the engines hash
 * {@code Integer} and {@code Long} differently.
 */
public final class TableKey {
    private TableKey() {}

    /** The lookup form of a job's key. */
    public static Object of(Object key) {
        if (key instanceof String) {
            return key;
        }
        if (key instanceof Long || key instanceof Integer || key instanceof Short || key instanceof Byte) {
            return ((Number) key).longValue();
        }
        throw new IllegalArgumentException("a routing key must be a String or an integral number (Long, Integer, "
                + "Short, Byte); got " + (key == null ? "null" : key.getClass().getName()));
    }

    /** A key as locality writes it in JSON: a string, or an integral number within a Java {@code long}. */
    public static Object fromJson(JsonNode node) {
        if (node.isTextual()) {
            return node.asText();
        }
        if (node.isIntegralNumber() && node.canConvertToLong()) {
            return node.asLong();
        }
        throw new IllegalArgumentException("a table key must be a JSON string or a 64-bit integer; got " + node);
    }

    /** The key as a job of the given Java key type holds it: {@code Integer} for {@code int_type: int}. */
    public static Object asJobKey(Object key, String intType) {
        if (key instanceof Long value && "int".equals(intType)) {
            return Math.toIntExact(value);
        }
        return key;
    }
}
