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
import org.apache.kafka.streams.processor.TaskId;

/**
 * {@link ProcessedRecords} as a JSON-lines file, one line per record a stage processed:
 * {@code {"server": "s3", "operator": "location", "task": "0_3", "partition": 3, "key": "GB/England",
 * "count": 17, "value": "..."}}. One file per application instance; the file is replaced when the
 * instance starts.
 */
public final class ProcessedLog implements ProcessedRecords, Closeable {
    private final ObjectMapper json = new ObjectMapper();
    private final String server;
    private final BufferedWriter out;

    /** A log of the instance running on {@code server}, written to {@code file}. */
    public ProcessedLog(Path file, String server) throws IOException {
        this.server = server;
        this.out = Files.newBufferedWriter(file, StandardCharsets.UTF_8);
    }

    @Override
    public synchronized void processed(String operator, TaskId task, Object key, Object value, long count) {
        ObjectNode line = json.createObjectNode()
                .put("server", server)
                .put("operator", operator)
                .put("task", task.toString())
                .put("partition", task.partition())
                .put("key", String.valueOf(key))
                .put("count", count)
                .put("value", String.valueOf(value));
        try {
            out.write(json.writeValueAsString(line));
            out.newLine();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the processed-records log of server " + server, e);
        }
    }

    @Override
    public synchronized void close() throws IOException {
        out.close();
    }
}
