package io.locality.kafka.switching;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

/** The protocol's headers, and the partitioner that obeys them. */
class SwitchHeadersTest {
    private final HeaderPartitioner<String, String> partitioner = new HeaderPartitioner<>();

    @Test
    void aMarkerGoesToEveryPartitionAndSaysItsPointSenderAndHowManySend() {
        Headers marker = SwitchHeaders.marker(1_420_070_419_474L, 3, 4);
        assertEquals(OptionalLong.of(1_420_070_419_474L), SwitchHeaders.markerPoint(marker));
        assertEquals(3, SwitchHeaders.number(marker, SwitchHeaders.FROM));
        assertEquals(4, SwitchHeaders.number(marker, SwitchHeaders.UPSTREAMS));
        assertEquals(Optional.of(Set.of(0, 1, 2, 3, 4, 5)), partitioner.partitions("t", null, null, marker, 6));
        assertEquals(Optional.empty(), SwitchHeaders.handover(marker));
    }

    @Test
    void handoverMessagesCarryTheirKindSwitchSenderAndTarget() {
        Headers user = new RecordHeaders().add("trace-id", "abc".getBytes(StandardCharsets.UTF_8));
        Headers state = SwitchHeaders.handoverTo(SwitchHeaders.Kind.STATE, 900, 2, 5, user);
        assertEquals(Optional.of(SwitchHeaders.Kind.STATE), SwitchHeaders.handover(state));
        assertEquals(900, SwitchHeaders.number(state, SwitchHeaders.SWITCH));
        assertEquals(2, SwitchHeaders.number(state, SwitchHeaders.FROM));
        assertEquals(Optional.of(Set.of(5)), partitioner.partitions("t", "k", "v", state, 6));
        assertEquals("abc", new String(state.lastHeader("trace-id").value(), StandardCharsets.UTF_8));
        Headers done = SwitchHeaders.handoverDone(900, 2);
        assertEquals(Optional.of(SwitchHeaders.Kind.DONE), SwitchHeaders.handover(done));
        assertEquals(Optional.of(Set.of(0, 1, 2)), partitioner.partitions("t", null, null, done, 3));
        Headers plain = SwitchHeaders.withoutProtocol(state);
        assertEquals(1, plain.toArray().length, "only the user's own header is left");
    }

    @Test
    void aRecordGoesWhereItsHeaderSaysAndARoutedRecordWithoutOneIsABug() {
        assertEquals(Optional.of(Set.of(4)),
                partitioner.partitions("t", "k", "v", SwitchHeaders.toPartition(new RecordHeaders(), 4), 6));
        assertEquals(Optional.empty(), partitioner.partitions("t", null, "v", new RecordHeaders(), 6));
        IllegalStateException unrouted = assertThrows(IllegalStateException.class,
                () -> partitioner.partitions("t", "k", "v", new RecordHeaders(), 6));
        assertTrue(unrouted.getMessage().contains("RouteByPoint"), unrouted.getMessage());
        IllegalStateException outside = assertThrows(IllegalStateException.class,
                () -> partitioner.partitions("t", "k", "v", SwitchHeaders.toPartition(new RecordHeaders(), 6), 6));
        assertTrue(outside.getMessage().contains("has 6 partitions"), outside.getMessage());
        IllegalStateException malformed = assertThrows(IllegalStateException.class,
                () -> SwitchHeaders.number(new RecordHeaders(), SwitchHeaders.SWITCH));
        assertTrue(malformed.getMessage().contains("'locality.switch'"), malformed.getMessage());
    }
}
