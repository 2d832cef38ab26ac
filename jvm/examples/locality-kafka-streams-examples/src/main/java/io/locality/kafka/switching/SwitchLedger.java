package io.locality.kafka.switching;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.HashMap;
import java.util.Map;
import java.util.SortedSet;
import java.util.TreeSet;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * How far one task of a switching stage is through each switch, kept in a state store so that a restarted
 * task resumes where it was.
 *
 * <p>Per switch point: the upstream tasks whose marker arrived (and how many there are), whether this task
 * has sent its own marker downstream and handed over the keys it gives away, and the tasks whose handover
 * is done. A switch completes when all of that is in; switches complete in the order of their points (a
 * task hands over at a switch only after the earlier ones completed), so the ledger keeps the point of the
 * last one completed and forgets the rest, and ignores messages of completed switches (a restarted
 * upstream sends its markers again).
 */
final class SwitchLedger {
    /** Key of the entry holding the last completed switch point. */
    private static final long COMPLETED = Long.MIN_VALUE;
    private static final ObjectMapper JSON = new ObjectMapper();

    /** The progress of one switch at this task; mutable, saved with {@link SwitchLedger#save}. */
    static final class Progress {
        final long point;
        int upstreams = -1;
        final SortedSet<Integer> markers = new TreeSet<>();
        boolean marked;
        boolean sent;
        final SortedSet<Integer> done = new TreeSet<>();

        Progress(long point) {
            this.point = point;
        }

        /** Every upstream task's marker is in: every record before the point has arrived. */
        boolean allMarkersIn() {
            return upstreams > 0 && markers.size() == upstreams;
        }

        /**
         * One more upstream marker.
         *
         * @throws IllegalStateException when the markers disagree on how many upstream tasks there are
         */
        void marker(int from, int count) {
            if (upstreams > 0 && upstreams != count) {
                throw new IllegalStateException("the markers of the switch at " + point + " disagree on the number "
                        + "of upstream tasks: " + upstreams + " and " + count + " (did the input topic change?)");
            }
            upstreams = count;
            markers.add(from);
        }
    }

    private final KeyValueStore<Long, String> store;
    /** The progress read so far (the store is read once per switch, on every record during a handover). */
    private final Map<Long, Progress> known = new HashMap<>();
    private long completedThrough;

    SwitchLedger(KeyValueStore<Long, String> store) {
        this.store = store;
        String completed = store.get(COMPLETED);
        this.completedThrough = completed == null ? Long.MIN_VALUE : Long.parseLong(completed);
    }

    static StoreBuilder<KeyValueStore<Long, String>> storeBuilder(String operator) {
        return Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(storeName(operator)), Serdes.Long(),
                Serdes.String());
    }

    static String storeName(String operator) {
        return operator + "-switches";
    }

    /** The last switch point this task completed (every earlier one is complete too). */
    long completedThrough() {
        return completedThrough;
    }

    /** The progress of the switch at {@code point} (a fresh one when nothing arrived for it yet). */
    Progress progress(long point) {
        return known.computeIfAbsent(point, p -> {
            String text = store.get(p);
            return text == null ? new Progress(p) : decode(p, text);
        });
    }

    void save(Progress progress) {
        store.put(progress.point, encode(progress));
    }

    /** The switch at {@code point} is complete: forget its progress. */
    void complete(long point) {
        known.remove(point);
        store.delete(point);
        store.put(COMPLETED, Long.toString(point));
        completedThrough = point;
    }

    private static String encode(Progress progress) {
        ObjectNode doc = JSON.createObjectNode().put("upstreams", progress.upstreams).put("marked", progress.marked)
                .put("sent", progress.sent);
        progress.markers.forEach(doc.putArray("markers")::add);
        progress.done.forEach(doc.putArray("done")::add);
        return doc.toString();
    }

    private static Progress decode(long point, String text) {
        JsonNode doc;
        try {
            doc = JSON.readTree(text);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("the switch ledger's entry for " + point + " is damaged: " + text, e);
        }
        Progress progress = new Progress(point);
        progress.upstreams = doc.path("upstreams").asInt(-1);
        progress.marked = doc.path("marked").asBoolean();
        progress.sent = doc.path("sent").asBoolean();
        doc.path("markers").forEach(node -> progress.markers.add(node.asInt()));
        doc.path("done").forEach(node -> progress.done.add(node.asInt()));
        return progress;
    }
}
