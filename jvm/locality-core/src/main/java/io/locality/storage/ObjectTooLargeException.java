package io.locality.storage;

import java.util.OptionalLong;

/**
 * An object holds more bytes than its reader may take: a {@code CURRENT} past 64 bytes, a manifest past
 * 64 MiB, a table longer than its manifest recorded. It is damage, named, and never read whole: an endless
 * file cannot exhaust the heap.
 */
public final class ObjectTooLargeException extends StoreDamagedException {
    private static final long serialVersionUID = 1L;

    /** -1 when unknown (an OptionalLong would not serialize with the exception). */
    private final long size;

    /**
     * @param object how messages name the object
     * @param size its size, when known (a file that grew while it was read has none)
     * @param limit the bytes it may hold
     */
    public ObjectTooLargeException(String object, OptionalLong size, long limit) {
        super(String.format("%s is damaged: it holds %s bytes; it should hold at most %,d", object,
                size.isPresent() ? String.format("%,d", size.getAsLong()) : String.format("more than %,d", limit),
                limit));
        this.size = size.orElse(-1);
    }

    /** The object's size, when known. */
    public OptionalLong size() {
        return size < 0 ? OptionalLong.empty() : OptionalLong.of(size);
    }
}
