package io.locality.examples.kafka;

import io.locality.kafka.ServerTaskAssignor;
import io.locality.kafka.TablePartitioner;
import io.locality.routing.RoutingConfiguration;
import io.locality.store.ConfigStore;
import java.io.IOException;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;

/**
 * The smallest Kafka Streams application on locality-kafka-streams' drop-in jar: counts the hashtags of topic
 * {@code hashtags} (keyed by location) into {@code hashtag-counts}, each hashtag in the partition its table
 * names, each task on its server. {@code HashtagCounts STORE SERVER BOOTSTRAP}, one instance per server.
 */
public final class HashtagCounts {
    private HashtagCounts() {}

    public static void main(String[] args) throws IOException {
        String store = args[0]; // a directory or s3://bucket/prefix
        String server = args[1]; // the server of the tables' topology this instance runs on
        RoutingConfiguration tables = ConfigStore.open(store).load();
        TablePartitioner<String, String> byHashtag = new TablePartitioner<>(() -> tables.table("hashtag"));

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("hashtags", Consumed.with(Serdes.String(), Serdes.String())) // location -> hashtag
                .selectKey((location, hashtag) -> hashtag)
                .repartition(Repartitioned.<String, String>as("by-hashtag")
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.String())
                        .withNumberOfPartitions(tables.table("hashtag").numInstances())
                        .withStreamPartitioner(byHashtag))
                .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .to("hashtag-counts", Produced.with(Serdes.String(), Serdes.Long()));

        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, "hashtag-counts");
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[2]);
        config.put(StreamsConfig.clientTagPrefix(ServerTaskAssignor.SERVER_TAG), server);
        config.put(StreamsConfig.TASK_ASSIGNOR_CLASS_CONFIG, ServerTaskAssignor.class.getName());
        config.put(ServerTaskAssignor.STORE_CONFIG, store);
        config.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "classic"); // task assignors run in the classic protocol
        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
    }
}
