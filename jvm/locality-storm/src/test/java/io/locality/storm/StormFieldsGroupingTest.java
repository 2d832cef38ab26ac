package io.locality.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.hashing.FallbackHashes;
import io.locality.hashing.FallbackSpec;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.IntStream;
import org.apache.storm.Thrift;
import org.apache.storm.daemon.GrouperFactory;
import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.tuple.Fields;
import org.junit.jupiter.api.Test;

/** The fallback places keys where Storm's own fields grouper and Python's {@code StormFieldsGrouping} do. */
class StormFieldsGroupingTest {

    /** Strings from ASCII to non-BMP, longs and ints over their whole range, seeded. */
    static List<Object> probeKeys(int n, long seed) {
        Random random = new Random(seed);
        List<Object> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int[] codePoints = IntStream.range(0, random.nextInt(12))
                    .map(c -> random.nextInt(4) == 0 ? 0x1F300 + random.nextInt(200) : 32 + random.nextInt(0x2FF))
                    .toArray();
            keys.add(new String(codePoints, 0, codePoints.length));
            keys.add(random.nextLong());
            keys.add(random.nextInt());
        }
        return keys;
    }

    @Test
    void choosesTheTaskStormsFieldsGrouperChooses() {
        for (int numTasks : new int[] {1, 6, 48}) {
            List<Integer> targets = IntStream.range(0, numTasks).map(i -> 100 + 3 * i).boxed().toList();
            GrouperFactory.FieldsGrouper storm = new GrouperFactory.FieldsGrouper(new Fields("seq", "key"),
                    Thrift.prepareFieldsGrouping(List.of("key")));
            storm.prepare(null, new GlobalStreamId("spout", "default"), targets);
            StormFieldsGrouping hash = new StormFieldsGrouping(numTasks);
            for (Object key : probeKeys(2_000, numTasks)) {
                int task = storm.chooseTasks(1, List.of(7L, key)).get(0);
                assertEquals(targets.indexOf(task), hash.instanceOf(key), () -> "key " + key);
            }
        }
    }

    @Test
    void placesKeysAsPythonDoes() {
        StormFieldsGrouping four = new StormFieldsGrouping(4);
        assertEquals(List.of(1, 2, 0, 3, 3),
                List.of("hello", "#bigdata", "a", "", "paris-é🙂").stream().map(four::instanceOf).toList());
        StormFieldsGrouping seven = new StormFieldsGrouping(7);
        assertEquals(List.of(3, 4, 3, 1, 1, 5), List.of(0L, 1L, -1L, Long.MAX_VALUE, Long.MIN_VALUE, 123456789012L)
                .stream().map(seven::instanceOf).toList());
        assertEquals(List.of(3, 4, 2, 0, 1, 0), List.of(0, 1, -1, Integer.MAX_VALUE, Integer.MIN_VALUE, 123456)
                .stream().map(seven::instanceOf).toList(), "Integer keys hash as Storm hashes an Integer");
    }

    @Test
    void isTheFallbackOfStormTables() throws Exception {
        FallbackSpec spec = new FallbackSpec("storm", 4, new ObjectMapper().readTree("{\"int_type\": \"long\"}"));
        assertEquals(new StormFieldsGrouping(4).instanceOf("hello"), FallbackHashes.of(spec).instanceOf("hello"));
        assertEquals(1, FallbackHashes.of(spec).instanceOf("hello"));
    }
}
