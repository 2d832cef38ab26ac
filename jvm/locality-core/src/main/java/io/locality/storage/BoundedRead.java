package io.locality.storage;

import java.io.IOException;
import java.io.InputStream;
import java.util.OptionalLong;

/**
 * The bytes of an object read whole, but never more than its reader may take: the size the store
 * announced (a file's length, an S3 object's Content-Length) is checked first, then at most one byte
 * past the limit is read, in case the object grew since.
 */
final class BoundedRead {
    /** The largest byte array a JVM allocates. */
    private static final long MAX_ARRAY = Integer.MAX_VALUE - 8;

    private BoundedRead() {}

    /**
     * All of {@code in}, at most {@code limit} bytes.
     *
     * @param object how messages name the object
     * @param size the size the store announced, or -1 when it announced none
     * @throws ObjectTooLargeException when the object holds more than {@code limit} bytes
     * @throws IOException when it cannot be read, or is too large for one array
     */
    static byte[] bytes(InputStream in, long size, long limit, String object) throws IOException {
        if (size > limit) {
            throw new ObjectTooLargeException(object, OptionalLong.of(size), limit);
        }
        int cap = (int) Math.min(limit, MAX_ARRAY - 1) + 1; // one byte past the limit shows a file that grew
        byte[] data = in.readNBytes(cap);
        if (data.length > limit) {
            throw new ObjectTooLargeException(object, OptionalLong.empty(), limit);
        }
        if (data.length == cap) {
            throw new IOException("cannot read " + object + ": it holds more bytes than one array holds");
        }
        return data;
    }
}
