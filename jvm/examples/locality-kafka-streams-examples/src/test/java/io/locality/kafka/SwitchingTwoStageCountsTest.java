package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.kafka.switching.SwitchEvents;
import io.locality.routing.RoutingConfiguration;
import io.locality.store.ConfigStore;
import io.locality.store.ScheduleFollower;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.streams.TopologyDescription;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The switching job's three sub-topologies: the source routes, each stage reads its routed and handover topics. */
class SwitchingTwoStageCountsTest {
    @TempDir
    Path store;

    @Test
    void eachStageReadsItsRoutedAndHandoverTopicsAndKeepsItsStores() throws Exception {
        Files.writeString(store.resolve("SCHEDULE"),
                "{\"entries\": [{\"from\": -9223372036854775808, \"version\": 1}], \"sealed_until\": 10}");
        RoutingConfiguration tables = Tables.twoStages(6, "kafka", "[]");
        ScheduleFollower schedule = new ScheduleFollower(new ConfigStore(store), Duration.ofMillis(10),
                Duration.ofSeconds(1), SwitchEvents.NONE);
        TopologyDescription description = SwitchingTwoStageCounts.build("app", "in", 4, "out", tables, schedule,
                Duration.ofMinutes(1), ProcessedRecords.NONE, SwitchEvents.NONE).describe();
        List<TopologyDescription.Subtopology> subtopologies = description.subtopologies().stream()
                .sorted((a, b) -> Integer.compare(a.id(), b.id())).toList();
        assertEquals(3, subtopologies.size());
        assertEquals(Set.of("in"), topics(subtopologies.get(0)));
        assertEquals(Set.of("app-location-routed", "app-location-handover"), topics(subtopologies.get(1)));
        assertEquals(Set.of("app-hashtag-routed", "app-hashtag-handover"), topics(subtopologies.get(2)));
        String stage = subtopologies.get(2).toString();
        assertTrue(stage.contains("hashtag-counts") && stage.contains("hashtag-held") && stage.contains("hashtag-switches")
                && stage.contains("topic: out"), stage);
        assertEquals("-,location,hashtag", SwitchingTwoStageCounts.subtopologyOperators(tables));
        assertEquals(Set.of("app-location-routed", "app-location-handover", "app-hashtag-routed",
                "app-hashtag-handover"), SwitchTopics.of("app", tables));
    }

    @Test
    void theAppTakesFollowScheduleAsAFlag() {
        Map<String, String> options = TwoStageCountsApp.options(new String[] {"--bootstrap-servers", "h:1",
            "--follow-schedule", "--store", "s", "--server", "a", "--input", "i", "--output", "o"});
        assertEquals("true", options.get("follow-schedule"));
        assertEquals("s", options.get("store"));
    }

    private static Set<String> topics(TopologyDescription.Subtopology subtopology) {
        Set<String> topics = new TreeSet<>();
        for (TopologyDescription.Node node : subtopology.nodes()) {
            if (node instanceof TopologyDescription.Source source) {
                topics.addAll(source.topicSet());
            }
        }
        return topics;
    }
}
