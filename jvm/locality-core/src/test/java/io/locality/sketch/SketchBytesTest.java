package io.locality.sketch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.function.Consumer;
import java.util.zip.CRC32;
import org.junit.jupiter.api.Test;

/**
 * The bytes are the Python sketch's (images printed by locality 0.1.0's {@code SpaceSaving.to_bytes}), round trips
 * keep everything, and every damaged image is refused saying what is wrong.
 */
class SketchBytesTest {
    /**
     * {@code SpaceSaving(3, arity=2)} after {@code ("paris", 1)}, {@code ("rome", 2)}, {@code ("paris", 1)} weight
     * 2.5, {@code ("oslo", -7)}, {@code ("é🙂", 2**63 - 1)} weight 0.25: rome, in the lowest slot of the two
     * smallest counters, was evicted.
     */
    private static final String PYTHON_PAIRS = "4c43535301000000020000000300000000000000030000000000000000000000000017"
            + "400000000002010000000000000000000000000c40000000000000f43f000000000000f03f0000000000000000000000000000f0"
            + "3f0000000000000000000000000000000005000000000000000b000000000000000f000000000000007061726973c3a9f09f9982"
            + "6f736c6f000100000000000000ffffffffffffff7ff9ffffffffffffffd04aac29";
    /** {@code SpaceSaving(5)}, empty. */
    private static final String PYTHON_EMPTY = "4c435353010000000100000005000000000000000000000000000000000000000000000"
            + "0000000000000000000000000a02ab591";

    private static SpaceSaving pythonPairs() {
        SpaceSaving sketch = new SpaceSaving(3, 2);
        sketch.update(SketchKey.of("paris", 1L));
        sketch.update(SketchKey.of("rome", 2L));
        sketch.update(SketchKey.of("paris", 1L), 2.5);
        sketch.update(SketchKey.of("oslo", -7L));
        sketch.update(SketchKey.of("é\uD83D\uDE42", Long.MAX_VALUE), 0.25);
        return sketch;
    }

    @Test
    void writesThePythonBytes() {
        assertEquals(PYTHON_PAIRS, HexFormat.of().formatHex(pythonPairs().toBytes()));
        assertEquals(PYTHON_EMPTY, HexFormat.of().formatHex(new SpaceSaving(5).toBytes()));
    }

    @Test
    void readsThePythonBytesBackIdentically() {
        byte[] python = HexFormat.of().parseHex(PYTHON_PAIRS);
        SpaceSaving sketch = SpaceSaving.fromBytes(python);
        assertEquals(pythonPairs().counters(), sketch.counters());
        assertEquals(5.75, sketch.totalWeight());
        assertEquals(1.0, sketch.minCount());
        assertEquals(0.25, sketch.lowerBound(SketchKey.of("é\uD83D\uDE42", Long.MAX_VALUE)));
        assertEquals(1.0, sketch.upperBound(SketchKey.of("rome", 2L)));
        assertArrayEquals(python, sketch.toBytes());
        SpaceSaving empty = SpaceSaving.fromBytes(HexFormat.of().parseHex(PYTHON_EMPTY));
        assertEquals(5, empty.capacity());
        assertTrue(empty.isEmpty());
        assertEquals(ComponentKind.UNSET, empty.kind(0));
    }

    @Test
    void roundTripsKeepCountersOrderKindsAndTotal() {
        SpaceSaving sketch = new SpaceSaving(64, 3);
        for (int i = 0; i < 1_000; i++) {
            sketch.update(SketchKey.of((long) (i * i) % 101 - 50, "k" + i % 70, i % 3 == 0 ? "" : "\u00e9\u20ac"),
                    0.1 * (1 + i % 7));
        }
        SpaceSaving copy = SpaceSaving.fromBytes(sketch.toBytes());
        assertEquals(sketch.counters(), copy.counters());
        assertEquals(sketch.totalWeight(), copy.totalWeight());
        assertEquals(sketch.minCount(), copy.minCount());
        assertArrayEquals(sketch.toBytes(), copy.toBytes());
        SketchKey key = SketchKey.of(1L, "k1", "\u00e9\u20ac");
        copy.update(key, 3); // the copy goes on as the original would
        sketch.update(key, 3);
        assertArrayEquals(sketch.toBytes(), copy.toBytes());
    }

    @Test
    void refusesAStringKeyWithoutUtf8Form() {
        SpaceSaving sketch = new SpaceSaving(2);
        sketch.update(SketchKey.of("lone \uD800"));
        IllegalStateException e = assertThrows(IllegalStateException.class, sketch::toBytes);
        assertTrue(e.getMessage().contains("lone surrogate at key position 0"), e.getMessage());
    }

    /** {@code body} (everything but the checksum) with its CRC-32 appended, as a writer would close it. */
    private static byte[] sealed(byte[] body) {
        CRC32 crc = new CRC32();
        crc.update(body);
        return ByteBuffer.allocate(body.length + 4).order(ByteOrder.LITTLE_ENDIAN).put(body)
                .putInt((int) crc.getValue()).array();
    }

    /** The Python pairs image with {@code edit} applied to its body (little-endian), then sealed again. */
    private static byte[] edited(Consumer<ByteBuffer> edit) {
        byte[] image = HexFormat.of().parseHex(PYTHON_PAIRS);
        ByteBuffer body = ByteBuffer.wrap(Arrays.copyOf(image, image.length - 4)).order(ByteOrder.LITTLE_ENDIAN);
        edit.accept(body);
        return sealed(body.array());
    }

    private static void assertRefused(String expected, byte[] data) {
        SketchFormatException e = assertThrows(SketchFormatException.class, () -> SpaceSaving.fromBytes(data));
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }

    @Test
    void refusesBytesOfAnotherFormatOrVersion() {
        assertRefused("truncated SpaceSaving bytes: got 10 bytes, a sketch needs at least 44", new byte[10]);
        assertRefused("not a locality SpaceSaving sketch: magic 50 4b 03 04", edited(b -> b.put(0, (byte) 'P')
                .put(1, (byte) 'K').put(2, (byte) 3).put(3, (byte) 4)));
        assertRefused("format version 2 is not supported (this locality reads version 1)",
                edited(b -> b.putShort(4, (short) 2)));
    }

    @Test
    void refusesCorruptOrTruncatedBytes() {
        byte[] image = HexFormat.of().parseHex(PYTHON_PAIRS);
        byte[] flipped = image.clone();
        flipped[60] ^= 1;
        assertRefused("checksum mismatch over 172 bytes", flipped);
        assertRefused("checksum mismatch", Arrays.copyOf(image, image.length - 9));
        byte[] cut = Arrays.copyOf(image, image.length - 4);
        assertRefused("truncated SpaceSaving bytes: string data needs 16 bytes at offset 128, only 8 left",
                sealed(Arrays.copyOf(cut, 136)));
        assertRefused("truncated SpaceSaving bytes: counts needs 24 bytes at offset 48, only 0 left",
                sealed(Arrays.copyOf(cut, 48)));
        assertRefused("corrupt SpaceSaving header: arity 0", edited(b -> b.putInt(8, 0)));
        assertRefused("corrupt SpaceSaving header: arity 2, capacity 3, 4 counters", edited(b -> b.putLong(20, 4)));
        assertRefused("total NaN", edited(b -> b.putDouble(28, Double.NaN)));
        assertRefused("total -1.0", edited(b -> b.putDouble(28, -1)));
        assertRefused("unknown key kinds [2, 7]", edited(b -> b.put(41, (byte) 7)));
        assertRefused("unknown key kinds [2, 0]", edited(b -> b.put(41, (byte) 0)));
        assertRefused("counter 1 has count -1.0", edited(b -> b.putDouble(56, -1)));
        assertRefused("counter 0 has count 3.5, error 4.0", edited(b -> b.putDouble(72, 4)));
        assertRefused("string offsets are not increasing", edited(b -> b.putLong(104, 12)));
        assertRefused("invalid UTF-8 keys (the key of counter 1 at key position 0)",
                edited(b -> b.put(133, (byte) 0xff)));
        SpaceSaving twins = new SpaceSaving(2, 2);
        twins.update(SketchKey.of("ab", 1L));
        twins.update(SketchKey.of("ba", 1L));
        byte[] abab = twins.toBytes(); // the strings' bytes "abba" at 104, made "abab"
        abab[106] = 'a';
        abab[107] = 'b';
        assertRefused("a key appears in two counters (the key (\"ab\", 1) of counter 1)",
                sealed(Arrays.copyOf(abab, abab.length - 4)));
        byte[] longer = Arrays.copyOf(cut, cut.length + 8);
        assertRefused("8 unexpected bytes after the counters", sealed(longer));
        assertRefused("a Java sketch holds at most 2147483647 counters", edited(b -> b.putLong(12, 1L << 40)));
    }

    @Test
    void refusesNoBytes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SpaceSaving.fromBytes(null));
        assertTrue(e.getMessage().contains("'data' parameter of SpaceSaving.fromBytes"), e.getMessage());
    }
}
