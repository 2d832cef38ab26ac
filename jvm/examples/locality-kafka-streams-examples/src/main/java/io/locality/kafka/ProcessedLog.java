package io.locality.kafka;

import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Path;
import org.apache.kafka.streams.processor.TaskId;

/**
 * {@link ProcessedRecords} as a JSON-lines file, one line per record a stage processed:
 * {@code {"server": "s3", "operator": "location", "task": "0_3", "partition": 3, "key": "GB/England",
 * "count": 17, "value": "..."}}. One file per application instance; the file is replaced when the
 * instance starts.
 */
public final class ProcessedLog implements ProcessedRecords, Closeable {
    private final JsonLinesFile out;

    /** A log of the instance running on {@code server}, written to {@code file}. */
    public ProcessedLog(Path file, String server) throws IOException {
        this.out = new JsonLinesFile(file, server, false);
    }

    @Override
    public void processed(String operator, TaskId task, Object key, Object value, long count) {
        out.write(out.line()
                .put("operator", operator)
                .put("task", task.toString())
                .put("partition", task.partition())
                .put("key", String.valueOf(key))
                .put("count", count)
                .put("value", String.valueOf(value)));
    }

    @Override
    public void close() throws IOException {
        out.close();
    }
}
