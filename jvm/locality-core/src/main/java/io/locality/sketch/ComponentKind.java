package io.locality.sketch;

/**
 * The type of one key component of a {@link SpaceSaving} sketch: a 64-bit integer or a string, or not yet known.
 *
 * <p>The codes are those of the serialized form ({@link SpaceSaving#toBytes()}), and the names those of the Python
 * sketch's messages ({@code int}, {@code str}).
 */
public enum ComponentKind {
    /** No key yet at this position: the first update fixes it. */
    UNSET(0, "unset"),
    /** A Java {@code long}, a Python {@code int} within int64. */
    INT(1, "int"),
    /** A Java {@code String}, a Python {@code str}; serialized as UTF-8. */
    STR(2, "str");

    private final int code;
    private final String label;

    ComponentKind(int code, String label) {
        this.code = code;
        this.label = label;
    }

    /** The byte that stands for this kind in the serialized form. */
    public int code() {
        return code;
    }

    /** The kind's name as both languages' messages write it: {@code int}, {@code str} or {@code unset}. */
    public String label() {
        return label;
    }

    /** The kind of a serialized code, or {@code null} for an unknown one. */
    static ComponentKind ofCode(int code) {
        for (ComponentKind kind : values()) {
            if (kind.code == code) {
                return kind;
            }
        }
        return null;
    }
}
