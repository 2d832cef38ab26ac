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

    /** Its state's layout, without the routes. */
    KeyedLayout layout() {
        return new KeyedLayout(operator, before.parallelism(), before.maxParallelism());
    }

    /** The layouts of {@code operators}, in their order. */
    static List<KeyedLayout> layouts(List<RewrittenOperator> operators) {
        return operators.stream().map(RewrittenOperator::layout).toList();
    }
}
