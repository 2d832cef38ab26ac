package io.locality.flink.state;

import java.io.Serializable;
import java.util.List;

/**
 * Where one rewritten operator's keyed state lies, without its routes: its state, its subtasks and key
 * groups. What the rewrite's writing tasks need; only its reading tasks carry the routes (which can be
 * millions of entries per version).
 *
 * @param operator the operator, its state and types
 * @param parallelism its number of subtasks (the same in both versions)
 * @param maxParallelism its number of key groups (the same in both versions)
 */
record KeyedLayout(RealKeyOperator operator, int parallelism, int maxParallelism) implements Serializable {

    /** Subtask {@code subtask} of operator {@code index}, numbered over all the operators' subtasks. */
    static int target(List<KeyedLayout> operators, int index, int subtask) {
        int first = 0;
        for (int i = 0; i < index; i++) {
            first += operators.get(i).parallelism();
        }
        return first + subtask;
    }
}
