package io.locality.sketch;

/**
 * Bytes that should hold a {@link SpaceSaving} sketch do not: truncated, corrupt, of another format or of an
 * unsupported format version. The message says which, and where, as the Python reader's
 * {@code SerializationError} does.
 */
public class SketchFormatException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public SketchFormatException(String message) {
        super(message);
    }

    public SketchFormatException(String message, Throwable cause) {
        super(message, cause);
    }
}
