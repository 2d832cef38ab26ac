package io.locality.sketch;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CharsetEncoder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.zip.CRC32;

/**
 * The byte layout of a {@link SpaceSaving} sketch, byte for byte the Python sketch's
 * ({@code locality/sketch/serde.py}).
 *
 * <p>Little-endian: a 40-byte header (magic {@code "LCSS"}, u16 format version 1, u16 flags 0, u32 arity, u64
 * capacity, u64 counter count {@code n}, f64 total weight, 4 zero bytes); {@code arity} kind bytes (0 unset, 1
 * int64, 2 UTF-8) padded with zeros to a multiple of 8; {@code n} f64 counts; {@code n} f64 errors; per component
 * either {@code n} int64 values, or {@code n + 1} int64 offsets (from 0) then the UTF-8 bytes padded to a multiple
 * of 8; finally the u32 CRC-32 ({@link CRC32}, Python's {@code zlib.crc32}) of everything before it. Counters are
 * in slot order. {@link #decode(byte[])} checks every part, in the Python reader's order, and throws a
 * {@link SketchFormatException} saying what is wrong; like it, it ignores the flags and the padding's content.
 */
final class SketchBytes {
    private static final byte[] MAGIC = {'L', 'C', 'S', 'S'};
    private static final int FORMAT_VERSION = 1;
    private static final int HEADER = 40;
    private static final int CRC = 4;

    private SketchBytes() {}

    /** Everything the bytes hold: the parameters, then the first {@code size} counters of the arrays. */
    record Image(int arity, long capacity, double total, ComponentKind[] kinds, SketchKey[] keys, double[] counts,
            double[] errors, int size) {}

    /**
     * The bytes of {@code image}.
     *
     * @throws IllegalStateException when a string key is not valid Unicode (a lone surrogate), so has no UTF-8
     *     form, or the bytes would not fit in one Java array
     */
    static byte[] encode(Image image) {
        int n = image.size();
        int arity = image.arity();
        byte[][][] utf8 = new byte[arity][][];
        long length = HEADER + pad(arity) + 16L * n + CRC;
        for (int p = 0; p < arity; p++) {
            if (image.kinds()[p] == ComponentKind.INT) {
                length += 8L * n;
            } else if (image.kinds()[p] == ComponentKind.STR) {
                utf8[p] = strings(image.keys(), n, p);
                long chars = 0;
                for (byte[] s : utf8[p]) {
                    chars += s.length;
                }
                length += 8L * (n + 1) + pad(chars);
            }
        }
        if (length > Integer.MAX_VALUE - 8) {
            throw new IllegalStateException("a SpaceSaving sketch of " + n + " counters needs " + length
                    + " bytes, more than one Java array holds");
        }
        ByteBuffer out = ByteBuffer.allocate((int) length).order(ByteOrder.LITTLE_ENDIAN);
        out.put(MAGIC).putShort((short) FORMAT_VERSION).putShort((short) 0).putInt(arity)
                .putLong(image.capacity()).putLong(n).putDouble(image.total()).putInt(0);
        for (ComponentKind kind : image.kinds()) {
            out.put((byte) kind.code());
        }
        out.position(out.position() + (int) pad(arity) - arity);
        for (int i = 0; i < n; i++) {
            out.putDouble(image.counts()[i]);
        }
        for (int i = 0; i < n; i++) {
            out.putDouble(image.errors()[i]);
        }
        for (int p = 0; p < arity; p++) {
            if (image.kinds()[p] == ComponentKind.INT) {
                for (int i = 0; i < n; i++) {
                    out.putLong((Long) image.keys()[i].component(p));
                }
            } else if (image.kinds()[p] == ComponentKind.STR) {
                putStrings(out, utf8[p]);
            }
        }
        CRC32 crc = new CRC32();
        crc.update(out.array(), 0, out.position());
        out.putInt((int) crc.getValue());
        return out.array();
    }

    private static byte[][] strings(SketchKey[] keys, int n, int position) {
        CharsetEncoder encoder = StandardCharsets.UTF_8.newEncoder();
        byte[][] out = new byte[n][];
        for (int i = 0; i < n; i++) {
            try {
                ByteBuffer encoded = encoder.encode(CharBuffer.wrap((String) keys[i].component(position)));
                out[i] = new byte[encoded.remaining()];
                encoded.get(out[i]);
            } catch (CharacterCodingException e) {
                throw new IllegalStateException("the key " + keys[i] + " of this SpaceSaving sketch is not valid "
                        + "Unicode (a lone surrogate at key position " + position + "), so it has no UTF-8 bytes");
            }
        }
        return out;
    }

    private static void putStrings(ByteBuffer out, byte[][] strings) {
        long offset = 0;
        out.putLong(0);
        for (byte[] s : strings) {
            offset += s.length;
            out.putLong(offset);
        }
        for (byte[] s : strings) {
            out.put(s);
        }
        out.position(out.position() + (int) (pad(offset) - offset));
    }

    /**
     * The sketch {@code data} holds, checked.
     *
     * @throws SketchFormatException when the bytes are truncated, corrupt, of another format or of an unsupported
     *     format version, or of a capacity beyond a Java {@code int}
     */
    static Image decode(byte[] data) {
        if (data.length < HEADER + CRC) {
            throw new SketchFormatException("truncated SpaceSaving bytes: got " + data.length
                    + " bytes, a sketch needs at least " + (HEADER + CRC));
        }
        ByteBuffer in = ByteBuffer.wrap(data, 0, data.length - CRC).order(ByteOrder.LITTLE_ENDIAN);
        byte[] magic = new byte[MAGIC.length];
        in.get(magic);
        if (!Arrays.equals(magic, MAGIC)) {
            throw new SketchFormatException("these bytes are not a locality SpaceSaving sketch: magic "
                    + HexFormat.ofDelimiter(" ").formatHex(magic) + ", expected 4c 43 53 53 (\"LCSS\")");
        }
        int version = Short.toUnsignedInt(in.getShort());
        if (version != FORMAT_VERSION) {
            throw new SketchFormatException("SpaceSaving format version " + version
                    + " is not supported (this locality reads version " + FORMAT_VERSION + ")");
        }
        int stored = ByteBuffer.wrap(data, data.length - CRC, CRC).order(ByteOrder.LITTLE_ENDIAN).getInt();
        CRC32 crc = new CRC32();
        crc.update(data, 0, data.length - CRC);
        if ((int) crc.getValue() != stored) {
            throw new SketchFormatException("corrupt or truncated SpaceSaving bytes: checksum mismatch over "
                    + data.length + " bytes");
        }
        in.getShort(); // flags: reserved
        long arity = Integer.toUnsignedLong(in.getInt());
        long capacity = in.getLong();
        long n = in.getLong();
        double total = in.getDouble();
        in.position(HEADER);
        if (arity < 1 || capacity == 0 || Long.compareUnsigned(n, capacity) > 0 || !Double.isFinite(total)
                || total < 0) {
            throw new SketchFormatException("corrupt SpaceSaving header: arity " + arity + ", capacity "
                    + Long.toUnsignedString(capacity) + ", " + Long.toUnsignedString(n) + " counters, total " + total);
        }
        ComponentKind[] kinds = kinds(in, arity, n);
        if (capacity < 0 || capacity > Integer.MAX_VALUE) {
            throw new SketchFormatException("SpaceSaving bytes of capacity " + Long.toUnsignedString(capacity)
                    + ": a Java sketch holds at most " + Integer.MAX_VALUE + " counters");
        }
        int size = (int) n; // n <= capacity <= Integer.MAX_VALUE
        double[] counts = doubles(in, size, "counts");
        double[] errors = doubles(in, size, "errors");
        for (int i = 0; i < size; i++) {
            if (!(Double.isFinite(counts[i]) && counts[i] > 0 && errors[i] >= 0 && errors[i] <= counts[i])) {
                throw new SketchFormatException("corrupt SpaceSaving bytes: counts must be finite > 0 and errors in "
                        + "[0, count]; counter " + i + " has count " + counts[i] + ", error " + errors[i]);
            }
        }
        Object[][] components = new Object[size][(int) arity];
        for (int p = 0; p < arity; p++) {
            if (kinds[p] == ComponentKind.INT) {
                need(in, 8L * size, "int keys");
                for (int i = 0; i < size; i++) {
                    components[i][p] = in.getLong();
                }
            } else if (kinds[p] == ComponentKind.STR) {
                readStrings(in, components, p);
            }
        }
        if (in.hasRemaining()) {
            throw new SketchFormatException("corrupt SpaceSaving bytes: " + in.remaining()
                    + " unexpected bytes after the counters");
        }
        SketchKey[] keys = new SketchKey[size];
        for (int i = 0; i < size; i++) {
            keys[i] = SketchKey.of(components[i]);
        }
        return new Image((int) arity, capacity, total, kinds, keys, counts, errors, size);
    }

    private static ComponentKind[] kinds(ByteBuffer in, long arity, long n) {
        need(in, pad(arity), "kinds");
        ComponentKind[] kinds = new ComponentKind[(int) arity];
        StringBuilder codes = new StringBuilder();
        boolean bad = false;
        for (int p = 0; p < arity; p++) {
            int code = Byte.toUnsignedInt(in.get());
            kinds[p] = ComponentKind.ofCode(code);
            bad |= kinds[p] == null || n > 0 && kinds[p] == ComponentKind.UNSET;
            codes.append(p == 0 ? "" : ", ").append(code);
        }
        if (bad) {
            throw new SketchFormatException("corrupt SpaceSaving bytes: unknown key kinds [" + codes + "]"
                    + (n > 0 ? " (a sketch with counters has a kind 1 or 2 at every position)" : ""));
        }
        in.position(in.position() + (int) (pad(arity) - arity));
        return kinds;
    }

    private static double[] doubles(ByteBuffer in, int n, String what) {
        need(in, 8L * n, what);
        double[] values = new double[n];
        in.asDoubleBuffer().get(values);
        in.position(in.position() + 8 * n);
        return values;
    }

    private static void readStrings(ByteBuffer in, Object[][] components, int position) {
        int n = components.length;
        need(in, 8L * (n + 1), "string offsets");
        long[] offsets = new long[n + 1];
        for (int i = 0; i <= n; i++) {
            offsets[i] = in.getLong();
            if (i == 0 ? offsets[0] != 0 : offsets[i] < offsets[i - 1]) {
                throw new SketchFormatException("corrupt SpaceSaving bytes: string offsets are not increasing");
            }
        }
        need(in, pad(offsets[n]), "string data");
        int start = in.position();
        CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder();
        for (int i = 0; i < n; i++) {
            int length = (int) (offsets[i + 1] - offsets[i]);
            ByteBuffer utf8 = ByteBuffer.wrap(in.array(), start + (int) offsets[i], length);
            try {
                components[i][position] = decoder.decode(utf8).toString();
            } catch (CharacterCodingException e) {
                throw new SketchFormatException("corrupt SpaceSaving bytes: invalid UTF-8 keys (the key of counter "
                        + i + " at key position " + position + ")", e);
            }
        }
        in.position(start + (int) pad(offsets[n]));
    }

    private static void need(ByteBuffer in, long size, String what) {
        if (size < 0 || size > in.remaining()) {
            throw new SketchFormatException("truncated SpaceSaving bytes: " + what + " needs "
                    + (size < 0 ? "more than 2^63" : Long.toString(size)) + " bytes at offset " + in.position()
                    + ", only " + in.remaining() + " left");
        }
    }

    private static long pad(long size) {
        return (size + 7) / 8 * 8;
    }
}
