package io.locality.flink;

import io.locality.hashing.FallbackHash;
import io.locality.hashing.FallbackHashProvider;
import io.locality.hashing.FallbackSpec;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

/**
 * The fallback of tables learned with {@code --hash flink}: where Flink's own {@code keyBy} puts a key.
 *
 * <p>A Java job keyed on the value itself ({@code keyBy(r -> r.key)}) sends a key to
 * {@code KeyGroupRangeAssignment.assignKeyToParallelOperator(key, maxParallelism, parallelism)}; this
 * provider calls exactly that, with the table's {@code max_parallelism} (Flink's default for the
 * parallelism when the header has none), so a key without an entry goes where Flink sends it. The key
 * must be typed as the job types it ({@code Integer} for {@code int_type: int}, else {@code Long}), since
 * Flink hashes {@code key.hashCode()}. Tables learned with {@code --hash pyflink} are for PyFlink's
 * {@code key_by}, which wraps the key in a {@code Row}: they have no provider here.
 */
public final class FlinkKeyGroupsProvider implements FallbackHashProvider {

    @Override
    public String engine() {
        return "flink";
    }

    @Override
    public FallbackHash create(FallbackSpec spec) {
        int parallelism = spec.numInstances();
        int maxParallelism = maxParallelism(spec);
        return key -> KeyGroupRangeAssignment.assignKeyToParallelOperator(key, maxParallelism, parallelism);
    }

    /**
     * The number of key groups a table with this fallback was learned for.
     *
     * @throws IllegalArgumentException when it is outside {@code parallelism .. 32768}
     */
    public static int maxParallelism(FallbackSpec spec) {
        int parallelism = spec.numInstances();
        int maxParallelism = spec.intParameter("max_parallelism",
                KeyGroupRangeAssignment.computeDefaultMaxParallelism(parallelism));
        if (maxParallelism < parallelism || maxParallelism > KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM) {
            throw new IllegalArgumentException("the flink fallback has max_parallelism " + maxParallelism
                    + ", which must lie in " + parallelism + " (the parallelism).."
                    + KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM);
        }
        return maxParallelism;
    }
}
