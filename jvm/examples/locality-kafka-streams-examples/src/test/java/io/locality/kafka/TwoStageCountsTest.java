package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.routing.RoutingConfiguration;
import java.util.Arrays;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorSupplier;
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
        assertEquals("t.txt", TwoStageCountsApp.options(with(ok, "--throughput-log", "t.txt")).get("throughput-log"));
    }

    @Test
    void sketchPhasesNeedSketchesAndMakeThePhasedSketcher() throws Exception {
        RoutingConfiguration tables = Tables.twoStages(6, "kafka", "[]");
        String[] ok = {"--bootstrap-servers", "h:1", "--store", "s", "--server", "a", "--input", "i", "--output", "o"};
        IllegalArgumentException alone = assertThrows(IllegalArgumentException.class,
                () -> TwoStageCountsApp.sketcher(TwoStageCountsApp.options(with(ok, "--sketch-phases", "10")), tables));
        assertTrue(alone.getMessage().contains("--sketch-phases need --sketches STORE"), alone.getMessage());
        String[] sketching = with(ok, "--sketches", "sketches/");
        assertInstanceOf(KeyPairSketcher.class, TwoStageCountsApp.sketcher(TwoStageCountsApp.options(sketching), tables));
        FixedKeyProcessorSupplier<String, String, String> phased =
                TwoStageCountsApp.sketcher(TwoStageCountsApp.options(with(sketching, "--sketch-phases", "10")), tables);
        assertEquals(10_000, assertInstanceOf(PhasedSketcher.class, phased).phaseMillis());
        IllegalArgumentException zero = assertThrows(IllegalArgumentException.class,
                () -> TwoStageCountsApp.sketcher(TwoStageCountsApp.options(with(sketching, "--sketch-phases", "0")), tables));
        assertTrue(zero.getMessage().contains("--sketch-phases must be a whole number >= 1"), zero.getMessage());
        TopologyDescription description = TwoStageCounts.build("in", "out", () -> tables, ProcessedRecords.NONE,
                phased).describe();
        assertTrue(description.toString().contains("sketch-location-hashtag"), description.toString());
        assertEquals(2, description.subtopologies().size()); // processValues adds no repartition topic
    }

    private static String[] with(String[] args, String... more) {
        return Stream.concat(Arrays.stream(args), Arrays.stream(more)).toArray(String[]::new);
    }
}
