package io.locality.flink.state;

import io.locality.flink.FlinkRoutingKeys;
import java.io.Serializable;
import java.util.List;

/**
 * One keyed operator of a rewrite: its state and the routes that keyed it before and key it after.
 *
 * @param operator the operator, its state and types
 * @param before the old version's routes
 * @param after the new version's routes
 */
record RewrittenOperator(RealKeyOperator operator, FlinkRoutingKeys before, FlinkRoutingKeys after)
        implements Serializable {

    int parallelism() {
        return before.parallelism();
    }

    /** Subtask {@code subtask} of operator {@code index}, numbered over all the operators' subtasks. */
    static int target(List<RewrittenOperator> operators, int index, int subtask) {
        int first = 0;
        for (int i = 0; i < index; i++) {
            first += operators.get(i).parallelism();
        }
        return first + subtask;
    }
}
