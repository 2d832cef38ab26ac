package io.locality.sketch;

import java.util.Arrays;

/**
 * A key of a {@link SpaceSaving} sketch: {@code arity} components, each a {@code long} or a {@code String}.
 *
 * <p>One component is a key load of an operator ({@code SketchKey.of("paris")}); two are a key pair of two
 * consecutive operators ({@code SketchKey.of("paris", "#jazz")}). Integral components of any Java type
 * ({@code Long}, {@code Integer}, {@code Short}, {@code Byte}) are held as {@code Long}, so {@code 42} and
 * {@code 42L} are one key, as in Python; {@code 42} and {@code "42"} are two. Immutable, with its hash computed
 * once: each component's own hash mixed ({@link #mix}) before they are combined, as {@link Arrays#hashCode}'s
 * {@code 31 a + b} would give every pair {@code (a + k, b - 31 k)} one hash. Keys of engines are that regular (ids
 * counted up, names that differ in their last digits): a sketch of such pairs spent most of each update comparing
 * keys of one hash.
 *
 * <p>Keys are ordered component by component, integers by value and strings by Unicode code point (Python's
 * order of {@code str}); {@link SpaceSaving#topK(int)} breaks ties in that order.
 */
public final class SketchKey implements Comparable<SketchKey> {
    private final Object[] components;
    private final int hash;

    private SketchKey(Object[] components) {
        this.components = components;
        int combined = components.length;
        for (Object component : components) {
            combined = combined * 0x9E3779B1 + mix(component.hashCode());
        }
        this.hash = mix(combined);
    }

    /** MurmurHash3's 32-bit finalizer: every bit of {@code h} flips each bit of the result with odds near 1/2. */
    private static int mix(int h) {
        h ^= h >>> 16;
        h *= 0x85EBCA6B;
        h ^= h >>> 13;
        h *= 0xC2B2AE35;
        return h ^ (h >>> 16);
    }

    /** The key of one string component. */
    public static SketchKey of(String component) {
        return of(new Object[] {component});
    }

    /** The key of one integer component. */
    public static SketchKey of(long component) {
        return new SketchKey(new Object[] {component});
    }

    /**
     * The key of these components, in order.
     *
     * @throws IllegalArgumentException when there is no component, or one is neither a {@code String} nor an
     *     integral number (the message names its position)
     */
    public static SketchKey of(Object... components) {
        if (components == null || components.length == 0) {
            throw new IllegalArgumentException(
                    "the 'components' parameter of SketchKey.of must hold at least one component; got none");
        }
        Object[] held = new Object[components.length];
        for (int i = 0; i < components.length; i++) {
            held[i] = component(components[i], i);
        }
        return new SketchKey(held);
    }

    private static Object component(Object value, int position) {
        if (value instanceof String) {
            return value;
        }
        if (value instanceof Long || value instanceof Integer || value instanceof Short || value instanceof Byte) {
            return ((Number) value).longValue();
        }
        throw new IllegalArgumentException("the 'components' parameter of SketchKey.of must hold a String or an "
                + "integral number (Long, Integer, Short, Byte) at key position " + position + "; got "
                + (value == null ? "null" : value.getClass().getName() + " " + value));
    }

    /** Number of components. */
    public int arity() {
        return components.length;
    }

    /** Component {@code position}: a {@code Long} or a {@code String}. */
    public Object component(int position) {
        return components[position];
    }

    /** The kind of component {@code position}: {@link ComponentKind#INT} or {@link ComponentKind#STR}. */
    public ComponentKind kind(int position) {
        return components[position] instanceof String ? ComponentKind.STR : ComponentKind.INT;
    }

    @Override
    public int compareTo(SketchKey other) {
        int shared = Math.min(components.length, other.components.length);
        for (int i = 0; i < shared; i++) {
            int order = compareComponents(components[i], other.components[i]);
            if (order != 0) {
                return order;
            }
        }
        return Integer.compare(components.length, other.components.length);
    }

    private static int compareComponents(Object a, Object b) {
        if (a instanceof Long x && b instanceof Long y) {
            return Long.compare(x, y);
        }
        if (a instanceof String x && b instanceof String y) {
            return compareCodePoints(x, y);
        }
        return a instanceof Long ? -1 : 1; // an int before a str: not within one sketch, whose kinds are fixed
    }

    /** Strings by code point, as Python orders them (Java's {@code compareTo} orders UTF-16 units). */
    private static int compareCodePoints(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int x = a.codePointAt(i);
            int y = b.codePointAt(j);
            if (x != y) {
                return Integer.compare(x, y);
            }
            i += Character.charCount(x);
            j += Character.charCount(y);
        }
        return Boolean.compare(i < a.length(), j < b.length());
    }

    @Override
    public boolean equals(Object other) {
        return this == other
                || other instanceof SketchKey key && hash == key.hash && Arrays.equals(components, key.components);
    }

    @Override
    public int hashCode() {
        return hash;
    }

    /** {@code "paris"}, {@code 42}, or {@code ("paris", "#jazz")} for several components. */
    @Override
    public String toString() {
        StringBuilder text = new StringBuilder(components.length == 1 ? "" : "(");
        for (int i = 0; i < components.length; i++) {
            text.append(i == 0 ? "" : ", ");
            text.append(components[i] instanceof String s ? '"' + s + '"' : components[i]);
        }
        return text.append(components.length == 1 ? "" : ")").toString();
    }
}
