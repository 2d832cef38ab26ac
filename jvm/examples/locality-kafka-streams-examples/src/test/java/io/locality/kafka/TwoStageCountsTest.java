package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.routing.RoutingConfiguration;
import java.util.Map;
import org.apache.kafka.streams.TopologyDescription;
import org.junit.jupiter.api.Test;

class TwoStageCountsTest {

    @Test
    void theSecondKeyIsTheValuesFieldNamedAfterTheSecondOperator() {
        assertEquals("#paris", TwoStageCounts.field("{\"seq\": 3, \"hashtag\": \"#paris\"}", "hashtag"));
        assertEquals("7", TwoStageCounts.field("{\"hashtag\": 7}", "hashtag"));
        assertNull(TwoStageCounts.field("{\"seq\": 3}", "hashtag"));
        IllegalArgumentException notJson = assertThrows(IllegalArgumentException.class,
                () -> TwoStageCounts.field("#paris", "hashtag"));
        assertTrue(notJson.getMessage().contains("'hashtag' field"), notJson.getMessage());
    }

    @Test
    void twoSubtopologiesJoinedByTheSecondOperatorsRepartitionTopic() throws Exception {
        RoutingConfiguration tables = Tables.twoStages(6, "kafka", "[]");
        TopologyDescription description = TwoStageCounts.build("in", "out", () -> tables, ProcessedRecords.NONE).describe();
        assertEquals(2, description.subtopologies().size());
        String text = description.toString();
        assertTrue(text.contains("topics: [in]") && text.contains("hashtag-repartition") && text.contains("topic: out"), text);
    }

    @Test
    void optionsNameWhatIsMissingOrUnknown() {
        String[] ok = {"--bootstrap-servers", "h:1", "--store", "s", "--server", "a", "--input", "i", "--output", "o"};
        assertEquals("h:1", TwoStageCountsApp.options(ok).get("bootstrap-servers"));
        IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
                () -> TwoStageCountsApp.options(new String[] {"--store", "s"}));
        assertTrue(missing.getMessage().contains("--bootstrap-servers, --server, --input, --output"), missing.getMessage());
        assertThrows(IllegalArgumentException.class, () -> TwoStageCountsApp.options(new String[] {"--colour", "red"}));
        Map<String, String> options = TwoStageCountsApp.options(ok);
        assertEquals("a", TwoStageCountsApp.streamsConfig(options).get("client.tag.locality.server"));
    }
}
