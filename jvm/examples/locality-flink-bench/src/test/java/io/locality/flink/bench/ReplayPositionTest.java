package io.locality.flink.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import org.junit.jupiter.api.Test;

/** A replay position survives a savepoint whatever the store's version number, and older savepoints still read. */
class ReplayPositionTest {
    private final ReplayPosition.Serializer serializer = new ReplayPosition.Serializer();

    @Test
    void aPositionUnderAVersionPastTheIntRangeRoundTrips() throws IOException {
        ReplayPosition position = new ReplayPosition(3_000_000_001L, 2, 77, 3_000_000_000L, new long[] {5, 9});
        ReplayPosition read = serializer.deserialize(serializer.getVersion(), serializer.serialize(position));
        assertEquals(3_000_000_001L, read.version());
        assertEquals(2, read.subtask());
        assertEquals(77, read.ordinal());
        assertEquals(3_000_000_000L, read.previousVersion());
        assertArrayEquals(new long[] {5, 9}, read.previousOrdinals());
    }

    @Test
    void aPositionOfLayoutOneIsRead() throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(4); // version
            out.writeInt(1); // subtask
            out.writeLong(12); // ordinal
            out.writeInt((int) ReplayPosition.NONE);
            out.writeInt(0); // no previous ordinals
        }
        ReplayPosition read = serializer.deserialize(1, bytes.toByteArray());
        assertEquals(4, read.version());
        assertEquals(12, read.ordinal());
        assertEquals(ReplayPosition.NONE, read.previousVersion());
        assertThrows(IOException.class, () -> serializer.deserialize(3, bytes.toByteArray()));
    }
}
