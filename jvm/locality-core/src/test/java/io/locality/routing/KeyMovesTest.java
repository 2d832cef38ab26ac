package io.locality.routing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.hashing.ConsistentHashRing;
import java.util.Comparator;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The keys a switch moves are those with an entry in either table whose instance differs. */
class KeyMovesTest {
    private static RoutingTable table(int instances, String entries) throws Exception {
        String doc = "{\"format_version\": 2, \"topology\": {\"servers\": [\"s0\", \"s1\"], \"operators\": [\"tag\"],"
                + " \"placement\": {\"tag\": [" + "\"s0\", \"s1\", ".repeat(instances / 2).replaceAll(", $", "")
                + "]}}, \"fallbacks\": {\"tag\": {\"engine\": \"ring\", \"n_instances\": " + instances
                + ", \"parameters\": {\"virtual_nodes\": 16}}}, \"tables\": {\"tag\": " + entries + "}}";
        return RoutingConfiguration.fromJson(1, new ObjectMapper().readTree(doc)).table("tag");
    }

    @Test
    void movesExactlyTheKeysWhoseInstanceChanges() throws Exception {
        ConsistentHashRing ring = new ConsistentHashRing(4, 16);
        int paris = ring.instanceOf("paris");
        int rome = ring.instanceOf("rome");
        RoutingTable before = table(4, "[[\"paris\", " + (paris + 1) % 4 + "], [\"oslo\", 2]]");
        RoutingTable after = table(4, "[[\"rome\", " + (rome + 2) % 4 + "], [\"oslo\", 2]]");
        List<KeyMoves.Move> moves = KeyMoves.between(before, after).stream()
                .sorted(Comparator.comparing(move -> move.key().toString())).toList();
        assertEquals(List.of(new KeyMoves.Move("paris", (paris + 1) % 4, paris),
                new KeyMoves.Move("rome", rome, (rome + 2) % 4)), moves);
        assertTrue(KeyMoves.between(before, before).isEmpty());
    }

    @Test
    void refusesTablesOverAnotherNumberOfInstances() throws Exception {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> KeyMoves.between(table(4, "[]"), table(6, "[]")));
        assertTrue(e.getMessage().contains("redeployment"), e.getMessage());
    }
}
