package io.locality.examples.flink;

import io.locality.flink.JobVersion;
import io.locality.flink.RealKeyedProcessFunction;
import io.locality.flink.RoutingKeySelector;
import io.locality.routing.RoutingConfiguration;
import io.locality.store.ConfigStore;
import java.util.Arrays;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;

/**
 * The smallest Flink job on locality-flink's drop-in jar: counts hashtags, each on the subtask the store's
 * table puts it on. {@code HashtagCounts STORE HASHTAG...}, STORE a directory or {@code s3://bucket/prefix}.
 */
public final class HashtagCounts {
    private HashtagCounts() {}

    public static void main(String[] args) throws Exception {
        RoutingConfiguration tables = ConfigStore.open(args[0]).load(); // the current version, verified
        KeySelector<String, String> hashtag = tag -> tag;
        RoutingKeySelector<String, String> byTable = RoutingKeySelector.of(tables.table("hashtag"), String.class,
                hashtag);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        JobVersion.declare(env, tables.version()); // for `locality switch flink`
        env.fromData(Arrays.copyOfRange(args, 1, args.length))
                .keyBy(byTable) // the routing key: the hashtag itself, or a surrogate of its subtask
                .process(new Count(hashtag), Types.STRING)
                .setParallelism(byTable.routes().parallelism())
                .setMaxParallelism(byTable.routes().maxParallelism())
                .print();
        env.execute("hashtag counts");
    }

    /** Counts per hashtag: several hashtags share a surrogate, so each keeps its count in the MapState. */
    static final class Count extends RealKeyedProcessFunction<String, String, Long, String> {
        private static final long serialVersionUID = 1L;

        Count(KeySelector<String, String> hashtag) {
            super("count-per-hashtag", hashtag, Types.STRING, Types.LONG);
        }

        @Override
        protected Long process(String tag, Long count, String record, Context ctx, Collector<String> out) {
            long seen = count == null ? 1 : count + 1;
            out.collect(tag + " " + seen);
            return seen;
        }
    }
}
