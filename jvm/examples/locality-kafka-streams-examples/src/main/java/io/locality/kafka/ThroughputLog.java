package io.locality.kafka;

import java.io.Closeable;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.apache.kafka.streams.processor.TaskId;

/**
 * {@link ProcessedRecords} as a count over time: the records one stage of the instance processed so far, every
 * {@code interval} written to a file that holds one line, {@code <epoch ms> <records>}, replaced each time (written
 * aside and renamed over it, so a reader never sees half a line); once more when closed. How the testbed reads an
 * application's throughput with the times it was reached at, without a line per record (a {@link ProcessedLog}
 * costs more than the stages) and without Kafka Streams' metrics, whose rates are averaged over their own window.
 *
 * <p>A stream thread adds one to a counter per record of the stage; a daemon thread of its own writes the file, so
 * the stream threads never wait on it. A write that fails is said once on stderr, and the next ones are tried.
 */
public final class ThroughputLog implements ProcessedRecords, Closeable {
    private final Path file;
    private final Path aside;
    private final String operator;
    private final LongAdder records = new LongAdder();
    private final ScheduledExecutorService writer;
    private boolean failed; // only the writer's thread, then the closing one, once the writer stopped

    /**
     * A log of the records {@code operator} processed, in {@code file}, every {@code interval}; its first line
     * (0 records) is written before this returns.
     */
    public ThroughputLog(Path file, String operator, Duration interval) throws IOException {
        this.file = file;
        this.aside = file.resolveSibling(file.getFileName() + ".tmp");
        this.operator = operator;
        write();
        writer = Executors.newSingleThreadScheduledExecutor(task -> {
            Thread thread = new Thread(task, "throughput-log");
            thread.setDaemon(true);
            return thread;
        });
        long every = interval.toMillis();
        writer.scheduleAtFixedRate(this::report, every, every, TimeUnit.MILLISECONDS);
    }

    @Override
    public void processed(String operator, TaskId task, Object key, Object value, long count) {
        if (this.operator.equals(operator)) {
            records.increment();
        }
    }

    private void report() {
        try {
            write();
        } catch (IOException e) {
            if (!failed) {
                System.err.println("error: cannot write the throughput log " + file + ": " + e);
                failed = true;
            }
        }
    }

    private void write() throws IOException {
        Files.writeString(aside, System.currentTimeMillis() + " " + records.sum() + "\n", StandardCharsets.UTF_8);
        Files.move(aside, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    /** Stops the writer and writes the last count. */
    @Override
    public void close() throws IOException {
        writer.shutdown(); // a write under way ends; no other begins
        try {
            writer.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        write();
    }
}
