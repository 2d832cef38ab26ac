package io.locality.examples.storm;

import io.locality.storm.LocalityGrouping;
import java.util.HashMap;
import java.util.Map;
import org.apache.storm.Config;
import org.apache.storm.StormSubmitter;
import org.apache.storm.testing.TestWordSpout;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Tuple;

/**
 * The smallest Storm topology on locality-storm's drop-in jar: counts words, each on the task the store's
 * {@code hashtag} table names (every other word where {@code fieldsGrouping} would put it).
 * {@code HashtagTopology STORE VERSION}, STORE a directory every worker reaches or {@code s3://bucket/prefix}.
 */
public final class HashtagTopology {
    private HashtagTopology() {}

    public static void main(String[] args) throws Exception {
        String store = args[0];
        long version = Long.parseLong(args[1]); // pinned: every worker follows the same tables

        TopologyBuilder builder = new TopologyBuilder();
        builder.setSpout("words", new TestWordSpout(), 1); // emits the field "word"
        builder.setBolt("count", new Count(), 6) // as many tasks as the table has instances
                .customGrouping("words", new LocalityGrouping(store, "hashtag", "word").atVersion(version));

        Config conf = new Config();
        conf.setNumWorkers(3);
        StormSubmitter.submitTopology("hashtag-counts", conf, builder.createTopology());
    }

    /** Counts the tuples of each word it is sent. */
    static final class Count extends BaseBasicBolt {
        private static final long serialVersionUID = 1L;
        private final Map<String, Long> counts = new HashMap<>();

        @Override
        public void execute(Tuple tuple, BasicOutputCollector collector) {
            counts.merge(tuple.getStringByField("word"), 1L, Long::sum);
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer declarer) {}
    }
}
