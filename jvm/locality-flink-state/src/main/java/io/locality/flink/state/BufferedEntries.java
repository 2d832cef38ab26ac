package io.locality.flink.state;

import java.io.IOException;
import java.io.InputStream;

/**
 * A buffer over a savepoint file's stream for reading its entries: {@link java.io.BufferedInputStream}
 * without its lock (each entry's lengths are single-byte reads, and each lock taken costs more than the
 * byte). Reads the underlying stream only when the buffer is empty, in chunks of its size; never asks it
 * for {@code available()}, which a local file answers with system calls. Not thread-safe; closing it does
 * not close the underlying stream.
 */
final class BufferedEntries extends InputStream {
    private final InputStream in;
    private final byte[] buffer;
    private int position;
    private int limit;

    BufferedEntries(InputStream in, int bufferBytes) {
        this.in = in;
        this.buffer = new byte[bufferBytes];
    }

    @Override
    public int read() throws IOException {
        if (position == limit && !fill()) {
            return -1;
        }
        return buffer[position++] & 0xff;
    }

    @Override
    public int read(byte[] target, int offset, int length) throws IOException {
        if (length == 0) {
            return 0;
        }
        if (position == limit) {
            if (length >= buffer.length) {
                return in.read(target, offset, length); // a large value: straight into its array
            }
            if (!fill()) {
                return -1;
            }
        }
        int copied = Math.min(length, limit - position);
        System.arraycopy(buffer, position, target, offset, copied);
        position += copied;
        return copied;
    }

    private boolean fill() throws IOException {
        int read = in.read(buffer, 0, buffer.length);
        position = 0;
        limit = Math.max(read, 0);
        return read > 0;
    }
}
