package io.locality.flink.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import org.apache.flink.api.common.operators.ProcessingTimeService;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;

/**
 * A sink that discards records and counts them: every {@code intervalMillis} (a processing-time timer, so the
 * count is current even when no record comes), at every checkpoint or savepoint (Flink flushes a sink before
 * its barrier) and when the sink closes, subtask {@code i} replaces {@code <directory>/sink-<i>.txt} with one
 * line, {@code <epoch ms> <records>}. So once a job has ended, and once its input has stood still for
 * {@code intervalMillis}, the files hold exactly the records that reached the sink.
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
        Writer<T> writer = new Writer<>(dir.resolve("sink-" + context.getTaskInfo().getIndexOfThisSubtask() + ".txt"));
        reportEvery(context.getProcessingTimeService(), writer);
        return writer;
    }

    private void reportEvery(ProcessingTimeService clock, Writer<T> writer) {
        clock.registerTimer(clock.getCurrentProcessingTime() + intervalMillis, time -> {
            writer.report();
            reportEvery(clock, writer);
        });
    }

    static final class Writer<T> implements SinkWriter<T> {
        private final Path file;
        private final Path aside;
        private long records;

        Writer(Path file) throws IOException {
            this.file = file;
            this.aside = file.resolveSibling(file.getFileName() + ".tmp");
            report();
        }

        @Override
        public void write(T record, Context context) {
            records++;
        }

        @Override
        public void flush(boolean endOfInput) throws IOException {
            report();
        }

        void report() throws IOException {
            Files.writeString(aside, System.currentTimeMillis() + " " + records + "\n", StandardCharsets.UTF_8);
            Files.move(aside, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        }

        @Override
        public void close() throws IOException {
            report();
        }
    }
}
