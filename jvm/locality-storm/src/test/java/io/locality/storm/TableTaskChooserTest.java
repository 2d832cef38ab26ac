package io.locality.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import java.util.List;
import org.apache.storm.Thrift;
import org.apache.storm.daemon.GrouperFactory;
import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.tuple.Fields;
import org.junit.jupiter.api.Test;

/** A table's entries go to the sorted target tasks they name; every other key where Storm's fields grouper goes. */
class TableTaskChooserTest {
    private static final Fields STREAM = new Fields("seq", "location", "hashtag");
    /** Target tasks as Storm might list them: the chooser indexes them sorted, 11, 12, 13, 20. */
    private static final List<Integer> TARGETS = List.of(20, 12, 11, 13);

    private static RoutingTable table(String engine, int tasks) throws Exception {
        String placement = "[" + "\"s0\", \"s1\", ".repeat(tasks / 2).replaceAll(", $", "") + "]";
        String configuration = """
                {"format_version": 1, "parameters": {},
                 "fallbacks": {"hashtag": {"engine": "%1$s", "n_instances": %2$d, "parameters": {}}},
                 "tables": {"hashtag": [["jazz", 3], ["blues", 0], ["rock", 2]]},
                 "topology": {"servers": ["s0", "s1"], "operators": ["hashtag"], "placement": {"hashtag": %3$s}}}
                """.formatted(engine, tasks, placement);
        return RoutingConfiguration.fromJson(1, new ObjectMapper().readTree(configuration)).table("hashtag");
    }

    private static TableTaskChooser chooser(RoutingTable table, List<Integer> targets) {
        return TableTaskChooser.of(table, "count-location:default", STREAM, "hashtag", targets);
    }

    @Test
    void sendsTableKeysToTheirTaskAndOthersWhereStormWould() throws Exception {
        TableTaskChooser chooser = chooser(table("storm", 4), TARGETS);
        assertEquals(List.of(20), chooser.chooseTasks(List.of(1L, "paris", "jazz")));
        assertEquals(List.of(11), chooser.chooseTasks(List.of(2L, "paris", "blues")));
        assertEquals(List.of(13), chooser.chooseTasks(List.of(3L, "paris", "rock")));

        GrouperFactory.FieldsGrouper storm = new GrouperFactory.FieldsGrouper(STREAM,
                Thrift.prepareFieldsGrouping(List.of("hashtag")));
        storm.prepare(null, new GlobalStreamId("count-location", "default"), List.of(11, 12, 13, 20));
        int checked = 0;
        for (Object key : StormFieldsGroupingTest.probeKeys(1_000, 4)) {
            if (!List.of("jazz", "blues", "rock").contains(key)) {
                List<Object> tuple = List.of(9L, "paris", key);
                assertEquals(storm.chooseTasks(1, tuple), chooser.chooseTasks(tuple), () -> "key " + key);
                checked++;
            }
        }
        assertEquals(3_000, checked);
    }

    @Test
    void refusesATableOfAnotherEngineOrSizeAndAMissingField() throws Exception {
        IllegalArgumentException engine = assertThrows(IllegalArgumentException.class,
                () -> chooser(table("kafka", 4), TARGETS));
        assertTrue(engine.getMessage().contains("falls back to the 'kafka' hash, not Storm's fields grouping: learn it "
                + "with --hash storm"), engine.getMessage());

        IllegalArgumentException size = assertThrows(IllegalArgumentException.class,
                () -> chooser(table("storm", 6), TARGETS));
        assertTrue(size.getMessage().contains("is for 6 tasks; the bolt fed by count-location:default has 4"),
                size.getMessage());

        IllegalArgumentException field = assertThrows(IllegalArgumentException.class,
                () -> TableTaskChooser.of(table("storm", 4), "count-location:default", STREAM, "tag", TARGETS));
        assertTrue(field.getMessage().contains("has no field 'tag'; its fields are [seq, location, hashtag]"),
                field.getMessage());
    }
}
