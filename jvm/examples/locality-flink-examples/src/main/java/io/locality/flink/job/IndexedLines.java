package io.locality.flink.job;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import io.locality.flink.SharedCopies;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.core.fs.FileStatus;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;

/**
 * The lines of an input file (or of a directory's files, by name) replayed at a fixed rate by a source a
 * savepoint resumes: line {@code i} is record {@code i} of a {@link DataGeneratorSource}.
 *
 * <p>A file source reads as fast as the job goes, so a job over a finished file cannot be stopped in the
 * middle of its input. Flink's generator source emits the indices {@code 0..n-1} at {@code rate} records
 * per second (over all its subtasks), and its checkpointed state is the range of indices each subtask
 * has left: a job stopped with a savepoint and restored from it emits exactly the lines it had not
 * emitted. The source's subtasks on one TaskManager share one copy of the lines in memory (read through
 * Flink's file systems, so the path may be any URI the TaskManagers can read); the job's main only counts
 * them.
 */
public final class IndexedLines implements GeneratorFunction<Long, String> {
    private static final long serialVersionUID = 1L;

    private final String input;
    private transient List<String> lines;

    private IndexedLines(String input) {
        this.input = input;
    }

    /**
     * A source of the lines of {@code input} at {@code rate} records per second, bounded by their number.
     *
     * @throws IllegalArgumentException when the input has no line
     */
    public static DataGeneratorSource<String> source(String input, int rate) throws IOException {
        long count = 0; // counted, not held: the job's main may run in a JobManager with little heap
        for (FileStatus file : files(new Path(input))) {
            try (BufferedReader reader = open(file)) {
                count += reader.lines().count();
            }
        }
        if (count == 0) {
            throw new IllegalArgumentException("--input " + input + " has no line");
        }
        return new DataGeneratorSource<>(new IndexedLines(input), count, RateLimiterStrategy.perSecond(rate),
                Types.STRING);
    }

    /** Reads the lines once per TaskManager: the source's subtasks there share them. */
    @Override
    public void open(SourceReaderContext readerContext) throws IOException {
        List<FileStatus> files = files(new Path(input));
        StringBuilder name = new StringBuilder("lines");
        files.forEach(file -> name.append(' ').append(file.getPath()).append('@').append(file.getLen())
                .append('@').append(file.getModificationTime()));
        lines = SharedCopies.of(name.toString(), () -> read(files));
    }

    @Override
    public String map(Long index) {
        return lines.get(Math.toIntExact(index));
    }

    private static List<String> read(List<FileStatus> files) throws IOException {
        List<String> lines = new ArrayList<>();
        for (FileStatus file : files) {
            try (BufferedReader reader = open(file)) {
                reader.lines().forEach(lines::add);
            }
        }
        return lines;
    }

    /** A file, or the files of a directory in the order of their names (hidden files skipped). */
    private static List<FileStatus> files(Path input) throws IOException {
        FileSystem fs = input.getFileSystem();
        FileStatus status = fs.getFileStatus(input);
        if (!status.isDir()) {
            return List.of(status);
        }
        return Arrays.stream(fs.listStatus(input)).filter(file -> !file.isDir())
                .filter(file -> !file.getPath().getName().startsWith("."))
                .sorted(Comparator.comparing(file -> file.getPath().getName())).toList();
    }

    private static BufferedReader open(FileStatus file) throws IOException {
        return new BufferedReader(new InputStreamReader(file.getPath().getFileSystem().open(file.getPath()),
                StandardCharsets.UTF_8));
    }
}
