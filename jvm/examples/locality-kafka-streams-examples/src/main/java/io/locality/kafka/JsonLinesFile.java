package io.locality.kafka;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.Closeable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A JSON-lines file that stream threads append to: what the application instance on one server records for
 * the tests and benchmarks to read, every line naming the server. The file is replaced when opened; lines
 * reach it when it is closed or the buffer fills, or each at once when asked.
 */
public final class JsonLinesFile implements Closeable {
    private final ObjectMapper json = new ObjectMapper();
    private final Path file;
    private final String server;
    private final BufferedWriter out;
    private final boolean flushEachLine;

    /** The log of the instance on {@code server}: lines buffered, or written out one by one with {@code flushEachLine}. */
    public JsonLinesFile(Path file, String server, boolean flushEachLine) throws IOException {
        this.file = file;
        this.server = server;
        this.out = Files.newBufferedWriter(file, StandardCharsets.UTF_8);
        this.flushEachLine = flushEachLine;
    }

    /** A new line, holding the server, to fill and {@link #write}. */
    public ObjectNode line() {
        return json.createObjectNode().put("server", server);
    }

    public synchronized void write(ObjectNode line) {
        try {
            out.write(line.toString());
            out.newLine();
            if (flushEachLine) {
                out.flush();
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + file, e);
        }
    }

    @Override
    public synchronized void close() throws IOException {
        out.close();
    }
}
