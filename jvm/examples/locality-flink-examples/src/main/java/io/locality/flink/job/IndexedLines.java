package io.locality.flink.job;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
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
 * emitted. Each source subtask holds the lines in memory (read through Flink's file systems, so the path
 * may be any URI the TaskManagers can read).
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
        long count = read(new Path(input)).size();
        if (count == 0) {
            throw new IllegalArgumentException("--input " + input + " has no line");
        }
        return new DataGeneratorSource<>(new IndexedLines(input), count, RateLimiterStrategy.perSecond(rate),
                Types.STRING);
    }

    @Override
    public void open(SourceReaderContext readerContext) throws IOException {
        lines = read(new Path(input));
    }

    @Override
    public String map(Long index) {
        return lines.get(Math.toIntExact(index));
    }

    /** The lines of a file, or of the files of a directory in the order of their names (hidden files skipped). */
    static List<String> read(Path input) throws IOException {
        FileSystem fs = input.getFileSystem();
        FileStatus status = fs.getFileStatus(input);
        List<Path> files = new ArrayList<>();
        if (status.isDir()) {
            Arrays.stream(fs.listStatus(input)).filter(file -> !file.isDir())
                    .map(FileStatus::getPath).filter(path -> !path.getName().startsWith("."))
                    .sorted(Comparator.comparing(Path::getName)).forEach(files::add);
        } else {
            files.add(input);
        }
        List<String> lines = new ArrayList<>();
        for (Path file : files) {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(fs.open(file),
                    StandardCharsets.UTF_8))) {
                reader.lines().forEach(lines::add);
            }
        }
        return lines;
    }
}
