package io.locality.storm;

import io.locality.hashing.FallbackHash;
import java.util.Collections;
import org.apache.storm.utils.TupleUtils;

/**
 * Storm's fields grouping on one field (engine {@code storm}), computed by Storm's own code.
 *
 * <p>Storm's {@code FieldsGrouper} sends a tuple to {@code targetTasks.get(TupleUtils.chooseTaskIndex(
 * groupingValues, numTasks))}, the target tasks sorted ascending by id; this is that index for a single
 * grouping value, {@code floorMod(Arrays.deepHashCode({key}), numTasks)}. The key is hashed as the job holds
 * it ({@code Long} and {@code Integer} hash differently), exactly as Python's {@code StormFieldsGrouping}
 * with the matching {@code int_type}.
 */
public final class StormFieldsGrouping implements FallbackHash {
    private final int numTasks;

    /** Storm's fields grouping over {@code numTasks} target tasks. */
    public StormFieldsGrouping(int numTasks) {
        if (numTasks < 1) {
            throw new IllegalArgumentException("a fields grouping needs numTasks >= 1; got " + numTasks);
        }
        this.numTasks = numTasks;
    }

    @Override
    public int instanceOf(Object key) {
        return TupleUtils.chooseTaskIndex(Collections.singletonList(key), numTasks);
    }
}
