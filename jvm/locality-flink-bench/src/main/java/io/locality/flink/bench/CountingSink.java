package io.locality.flink.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/**
 * A sink that discards records and counts them: every {@code intervalMillis}, and when its input ends,
 * subtask {@code i} replaces {@code <directory>/sink-<i>.txt} with one line, {@code <epoch ms> <records>}.
 *
 * <p>The throughput at the sink is read from these files, not from Flink's REST API, whose record counts
 * are cached for up to {@code metrics.fetcher.update-interval} (10 s by default) and carry no timestamp.
 * The file is written aside and renamed, so a reader never sees half a line.
 *
 * @param <T> the record type
 */
public final class CountingSink<T> implements Sink<T> {
    private static final long serialVersionUID = 1L;

    private final String directory;
    private final long intervalMillis;

    public CountingSink(Path directory, long intervalMillis) {
        this.directory = directory.toString();
        this.intervalMillis = intervalMillis;
    }

    @Override
    public SinkWriter<T> createWriter(WriterInitContext context) throws IOException {
        Path dir = Path.of(directory);
        Files.createDirectories(dir);
        return new Writer<>(dir.resolve("sink-" + context.getTaskInfo().getIndexOfThisSubtask() + ".txt"),
                intervalMillis);
    }

    static final class Writer<T> implements SinkWriter<T> {
        private final Path file;
        private final Path aside;
        private final long intervalMillis;
        private long records;
        private long nextReport;

        Writer(Path file, long intervalMillis) throws IOException {
            this.file = file;
            this.aside = file.resolveSibling(file.getFileName() + ".tmp");
            this.intervalMillis = intervalMillis;
            report(System.currentTimeMillis());
        }

        @Override
        public void write(T record, Context context) throws IOException {
            records++;
            if ((records & 0x3F) == 0) { // the clock every 64 records, not every record
                long now = System.currentTimeMillis();
                if (now >= nextReport) {
                    report(now);
                }
            }
        }

        @Override
        public void flush(boolean endOfInput) throws IOException {
            if (endOfInput) {
                report(System.currentTimeMillis());
            }
        }

        private void report(long now) throws IOException {
            Files.writeString(aside, now + " " + records + "\n", StandardCharsets.UTF_8);
            Files.move(aside, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            nextReport = now + intervalMillis;
        }

        @Override
        public void close() {
        }
    }
}
