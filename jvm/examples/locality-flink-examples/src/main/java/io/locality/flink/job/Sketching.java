package io.locality.flink.job;

import io.locality.flink.KeyPairSketcher;
import io.locality.sketch.SketcherOptions;
import java.time.Duration;

/**
 * The two-stage job's sketcher options: where the {@link KeyPairSketcher} between its operators publishes, every
 * how many seconds, with how many counters per sketch, within how many sketch updates a second per subtask.
 *
 * @param store the store the sketches go to (a directory or {@code s3://bucket/prefix})
 * @param intervalSeconds the interval each sketch covers
 * @param capacity the counters of each sketch
 * @param updatesPerSecond the budget of sketch updates a second per subtask, above which records are sampled
 */
public record Sketching(String store, int intervalSeconds, int capacity, int updatesPerSecond) {
    /** Seconds per interval when {@code --sketch-interval} is not given. */
    static final int DEFAULT_INTERVAL = 60;
    /** Counters per sketch when {@code --sketch-capacity} is not given. */
    static final int DEFAULT_CAPACITY = 100_000;
    /** Sketch updates a second per subtask when {@code --sketch-updates-per-second} is not given: the sketcher's. */
    static final int DEFAULT_UPDATES_PER_SECOND = SketcherOptions.DEFAULT_UPDATES_PER_SECOND;

    /** The sketcher between {@code first} and {@code second}, its locality measured on {@code second}'s keying. */
    KeyPairSketcher<TraceRecord> sketcher(Stage first, Stage second, long version) {
        return KeyPairSketcher.builder(first.operator(), Stage.realKey(first.position()), second.operator(),
                        Stage.realKey(second.position()))
                .store(store)
                .interval(Duration.ofSeconds(intervalSeconds))
                .capacity(capacity)
                .updatesPerSecond(updatesPerSecond)
                .routing(second.key(), second.parallelism(), second.maxParallelism())
                .version(version)
                .build();
    }
}
