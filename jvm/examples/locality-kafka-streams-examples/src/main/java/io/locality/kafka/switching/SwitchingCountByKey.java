package io.locality.kafka.switching;

import io.locality.kafka.CountByKey;
import io.locality.kafka.ProcessedRecords;
import io.locality.routing.KeyMoves;
import io.locality.schedule.SwitchSchedule;
import java.time.Duration;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * A counting stage that switches versions of its operator's table with its state: the handover of the core
 * paper's reconfiguration protocol (Caneill et al., Middleware 2016, section 3.4) in a Kafka Streams task.
 *
 * <p>Task {@code i} of the stage reads partition {@code i} of two topics: the stage's <em>routed</em> topic,
 * where the tasks upstream write each record to the partition of the version in force at its point
 * ({@link RouteByPoint}) and, at each switch point, a marker ({@link MarkSwitchPoints}); and the stage's
 * <em>handover</em> topic, where the stage's own tasks send each other the state of the keys that move. At
 * the switch at point T (from version a to b):
 *
 * <ol>
 *   <li>A record of a key that b moves onto this task from task j, with a point at or after T, is
 *       <b>held</b> ({@link HeldRecords}) until task j's handover is done.
 *   <li>Once the marker of T has come from every upstream task, every record before T has arrived (Kafka
 *       keeps each producer's records in order within a partition). Then, after the earlier switches are
 *       complete here, the task <b>hands over</b>: the count of every key that b moves away from it goes to
 *       the new owner's partition of the handover topic and leaves the store, then a <em>done</em> message
 *       goes to every partition.
 *   <li>A state that arrives becomes the key's count; a done message from task j releases the records held
 *       for j's keys, in the order they came. Since j's states and its done message travel in order in one
 *       partition, every key j had state for has it here by then (a key without a state starts from 0).
 *   <li>Once the markers of T are in and nothing before T is held, the task sends its own marker of T on to
 *       the next stage: the switch propagates in pipeline order. The switch is complete at this task when it
 *       has sent its marker and its states and has a done message from every task of the stage.
 * </ol>
 *
 * <p>A record that reaches the old owner of its key after the owner handed the key over (input out of order
 * by more than the switch: its point is before T but it came after the marker) is not counted there: it goes
 * on to the new owner through the handover topic, behind the state. Progress and held records live in state
 * stores ({@link SwitchLedger}, {@link HeldRecords}), so a restarted task resumes its switch. A record held
 * longer than {@code maxHold} fails the task with a message naming what it waits for (an upstream input
 * partition that gets no record at or past T never sends its marker).
 *
 * <p>The processor reads two topics of different types (records of {@code K}, {@code V}; handover messages as
 * bytes), hence its {@code Object} type parameters.
 *
 * @param <K> the key type
 * @param <V> the value type
 */
public final class SwitchingCountByKey<K, V> implements Processor<Object, Object, Object, Object> {
    private static final Serde<Long> COUNT = Serdes.Long();
    private static final Duration HOLD_CHECK = Duration.ofSeconds(1);

    private final SwitchPlans plans;
    private final Stage<K, V> stage;
    private ProcessorContext<Object, Object> context;
    private KeyValueStore<K, Long> counts;
    private HeldRecords held;
    private SwitchLedger ledger;
    private int me;

    /**
     * What the stage is, beside its tables.
     *
     * @param keySerde serde of the keys (records, state and handover messages)
     * @param valueSerde serde of the record values
     * @param instances the operator's number of instances: the partitions of its routed and handover topics
     * @param next the child that gets each counted record (and, with {@code propagatesMarkers}, the markers)
     * @param handover the child sink of the stage's handover topic
     * @param propagatesMarkers whether a switching stage follows (send markers on) or not (the last stage)
     * @param maxHold how long a record may be held before the task fails
     * @param processed told of every record counted
     * @param events told of what each switch does
     */
    public record Stage<K, V>(Serde<K> keySerde, Serde<V> valueSerde, int instances, String next, String handover,
            boolean propagatesMarkers, Duration maxHold, ProcessedRecords processed, SwitchEvents events) {}

    private SwitchingCountByKey(SwitchPlans plans, Stage<K, V> stage) {
        this.plans = plans;
        this.stage = stage;
    }

    /** The stage of {@code plans}' operator with its three stores (counts, held records, switch ledger). */
    public static <K, V> ProcessorSupplier<Object, Object, Object, Object> supplier(SwitchPlans plans, Stage<K, V> stage) {
        String operator = plans.operator();
        StoreBuilder<KeyValueStore<K, Long>> counts = Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(CountByKey.storeName(operator)), stage.keySerde(), COUNT);
        Set<StoreBuilder<?>> stores = Set.of(counts, HeldRecords.storeBuilder(operator),
                SwitchLedger.storeBuilder(operator));
        return new ProcessorSupplier<>() {
            @Override
            public Processor<Object, Object, Object, Object> get() {
                return new SwitchingCountByKey<>(plans, stage);
            }

            @Override
            public Set<StoreBuilder<?>> stores() {
                return stores;
            }
        };
    }

    @Override
    public void init(ProcessorContext<Object, Object> context) {
        this.context = context;
        this.me = context.taskId().partition();
        this.counts = context.getStateStore(CountByKey.storeName(plans.operator()));
        this.held = new HeldRecords(context.getStateStore(HeldRecords.storeName(plans.operator())));
        this.ledger = new SwitchLedger(context.getStateStore(SwitchLedger.storeName(plans.operator())));
        context.schedule(HOLD_CHECK, PunctuationType.WALL_CLOCK_TIME, this::checkHold);
    }

    @Override
    @SuppressWarnings("unchecked")
    public void process(Record<Object, Object> record) {
        Headers headers = record.headers();
        OptionalLong marker = SwitchHeaders.markerPoint(headers);
        Optional<SwitchHeaders.Kind> handover = SwitchHeaders.handover(headers);
        if (marker.isPresent()) {
            onMarker(marker.getAsLong(), (int) SwitchHeaders.number(headers, SwitchHeaders.FROM),
                    (int) SwitchHeaders.number(headers, SwitchHeaders.UPSTREAMS));
        } else if (handover.isEmpty()) {
            onRecord((K) record.key(), (V) record.value(), record.timestamp(), headers, OptionalLong.empty());
        } else {
            long point = SwitchHeaders.number(headers, SwitchHeaders.SWITCH);
            int from = (int) SwitchHeaders.number(headers, SwitchHeaders.FROM);
            switch (handover.get()) {
                case STATE -> onState(point, from, (byte[]) record.key(), (byte[]) record.value());
                case DONE -> onDone(point, from);
                case LATE -> onRecord(key((byte[]) record.key()), value((byte[]) record.value()), record.timestamp(),
                        headers, OptionalLong.of(point));
            }
        }
        advance();
    }

    /**
     * A record of the stage, from the routed topic, or forwarded as late by the task that handed its key over
     * at the switch at {@code forwardedAt}.
     */
    private void onRecord(K key, V value, long point, Headers headers, OptionalLong forwardedAt) {
        if (key == null) { // no key, no state: passes uncounted
            context.forward(new Record<>(null, value, point, SwitchHeaders.withoutProtocol(headers)), stage.next());
            return;
        }
        SwitchSchedule schedule = plans.settle(point);
        long completed = ledger.completedThrough();
        if (forwardedAt.isEmpty() && plans.tableAt(point).route(key) != me) {
            throw new IllegalStateException("a record of key '" + key + "' at point " + point + " came to partition "
                    + me + " of '" + plans.operator() + "', but the version in force there routes it to "
                    + plans.tableAt(point).route(key) + ": do all instances read the same store?");
        }
        long owned = forwardedAt.orElse(point); // this task owns the key in the version in force here
        for (SwitchSchedule.Switch change : schedule.switchesAfter(owned)) { // handed over since? the new owner's
            if (change.point() > completed && !ledger.progress(change.point()).sent) {
                break;
            }
            int to = plans.table(change.to()).route(key);
            if (plans.table(change.from()).route(key) == me && to != me) {
                Headers late = SwitchHeaders.handoverTo(SwitchHeaders.Kind.LATE, change.point(), me, to, headers);
                context.forward(new Record<>(keyBytes(key), valueBytes(value), point, late), stage.handover());
                stage.events().late(plans.operator(), context.taskId(), key, point, to);
                return;
            }
        }
        if (forwardedAt.isEmpty()) { // a forwarded record comes behind its key's state: it never waits
            for (SwitchSchedule.Switch change : schedule.switchesAfter(completed)) { // moved here, state not in?
                if (change.point() > point) {
                    break;
                }
                int from = plans.table(change.from()).route(key);
                if (from != me && plans.table(change.to()).route(key) == me
                        && !ledger.progress(change.point()).done.contains(from)) {
                    held.hold(change.point(), from, point, System.currentTimeMillis(), keyBytes(key),
                            valueBytes(value), SwitchHeaders.withoutProtocol(headers));
                    return;
                }
            }
        }
        count(key, value, point, headers);
    }

    private void count(K key, V value, long point, Headers headers) {
        Long before = counts.get(key);
        long count = before == null ? 1 : before + 1;
        counts.put(key, count);
        stage.processed().processed(plans.operator(), context.taskId(), key, value, count);
        context.forward(new Record<>(key, value, point, SwitchHeaders.withoutProtocol(headers)), stage.next());
    }

    private void onMarker(long point, int from, int upstreams) {
        if (point <= ledger.completedThrough()) {
            return; // a marker sent again after an upstream restart
        }
        boolean known = plans.settle(point).switches().stream().anyMatch(change -> change.point() == point);
        if (!known) {
            throw new IllegalStateException("a marker of a switch at " + point + " came to '" + plans.operator()
                    + "', but the schedule has no switch there: do all instances read the same store?");
        }
        SwitchLedger.Progress progress = ledger.progress(point);
        progress.marker(from, upstreams);
        ledger.save(progress);
    }

    private void onState(long point, int from, byte[] keyBytes, byte[] stateBytes) {
        K key = key(keyBytes);
        if (counts.get(key) != null) {
            throw new IllegalStateException("the state of key '" + key + "' came to partition " + me + " of '"
                    + plans.operator() + "' from " + from + " at the switch at " + point + ", but this task already "
                    + "has a state for it: it counted records of the key before its state arrived");
        }
        Long state = COUNT.deserializer().deserialize(plans.operator(), stateBytes);
        counts.put(key, state);
        stage.events().stateReceived(plans.operator(), context.taskId(), point, key, from, state);
    }

    private void onDone(long point, int from) {
        if (point <= ledger.completedThrough()) {
            return;
        }
        SwitchLedger.Progress progress = ledger.progress(point);
        if (progress.done.add(from)) {
            ledger.save(progress);
        }
        long now = System.currentTimeMillis();
        for (HeldRecords.Held record : held.release(point, from)) {
            K key = key(record.key());
            stage.events().released(plans.operator(), context.taskId(), point, key, record.point(),
                    now - record.heldAtMs());
            count(key, value(record.value()), record.point(), record.headers());
        }
    }

    /** Takes every step the switches in progress allow, in the order of their points. */
    private void advance() {
        long completed = ledger.completedThrough();
        boolean earlierComplete = true;
        for (SwitchSchedule.Switch change : plans.known().switchesAfter(completed)) {
            SwitchLedger.Progress progress = ledger.progress(change.point());
            if (!progress.allMarkersIn()) {
                break; // each upstream sends its markers in order: the later switches' are not in either
            }
            boolean changed = false;
            if (!progress.marked && nothingHeldBefore(change.point())) {
                if (stage.propagatesMarkers()) {
                    context.forward(new Record<>(null, null, change.point(),
                            SwitchHeaders.marker(change.point(), me, stage.instances())), stage.next());
                }
                progress.marked = changed = true;
            }
            if (!progress.sent && earlierComplete) {
                handOver(change);
                progress.sent = changed = true;
            }
            if (changed) {
                ledger.save(progress);
            }
            if (earlierComplete && progress.marked && progress.sent && progress.done.size() == stage.instances()) {
                ledger.complete(change.point());
                stage.events().switched(plans.operator(), context.taskId(), change.point());
            } else {
                earlierComplete = false;
            }
        }
    }

    private boolean nothingHeldBefore(long point) {
        OptionalLong earliest = held.earliestPoint();
        return earliest.isEmpty() || earliest.getAsLong() >= point;
    }

    /** Sends the state of every key {@code change} moves away from this task, then the done message. */
    @SuppressWarnings("unchecked")
    private void handOver(SwitchSchedule.Switch change) {
        for (KeyMoves.Move move : plans.moves(change)) {
            if (move.from() != me) {
                continue;
            }
            K key = (K) move.key();
            Long state = counts.get(key);
            if (state == null) {
                continue; // a moved key this task never saw has no state to send
            }
            byte[] keyBytes = keyBytes(key);
            byte[] stateBytes = COUNT.serializer().serialize(plans.operator(), state);
            Headers headers = SwitchHeaders.handoverTo(SwitchHeaders.Kind.STATE, change.point(), me, move.to(),
                    new RecordHeaders());
            context.forward(new Record<>(keyBytes, stateBytes, change.point(), headers), stage.handover());
            counts.delete(key);
            stage.events().stateSent(plans.operator(), context.taskId(), change.point(), key, move.to(),
                    keyBytes.length + stateBytes.length);
        }
        context.forward(new Record<>(null, null, change.point(), SwitchHeaders.handoverDone(change.point(), me)),
                stage.handover());
    }

    /** Fails the task when a record has been held longer than the stage allows, naming what it waits for. */
    private void checkHold(long now) {
        HeldRecords.Held oldest = held.oldest();
        if (oldest != null && now - oldest.heldAtMs() > stage.maxHold().toMillis()) {
            throw new IllegalStateException("partition " + me + " of '" + plans.operator() + "' has held a record of key '"
                    + key(oldest.key()) + "' for " + (now - oldest.heldAtMs()) + " ms, waiting for the handover of "
                    + "task " + oldest.from() + " at the switch at point " + oldest.switchPoint() + ". Task "
                    + oldest.from() + " hands over once the marker of that switch came from every upstream task; "
                    + "an upstream task sends it when its input reaches the point: does every input partition "
                    + "still get records?");
        }
    }

    private K key(byte[] bytes) {
        return stage.keySerde().deserializer().deserialize(plans.operator(), bytes);
    }

    private V value(byte[] bytes) {
        return stage.valueSerde().deserializer().deserialize(plans.operator(), bytes);
    }

    private byte[] keyBytes(K key) {
        return stage.keySerde().serializer().serialize(plans.operator(), key);
    }

    private byte[] valueBytes(V value) {
        return stage.valueSerde().serializer().serialize(plans.operator(), value);
    }
}
