package io.locality.hashing;

/**
 * MurmurHash64A (A. Appleby, SMHasher, 2008): 64-bit, {@code m = 0xc6a4a7935bd1e995}, {@code r = 47},
 * little-endian 8-byte blocks. The hash of locality's consistent-hash ring; bit for bit the Python
 * {@code locality.hashing.primitives} rounds.
 */
final class MurmurHash64A {
    private static final long M = 0xc6a4a7935bd1e995L;
    private static final int R = 47;

    private MurmurHash64A() {}

    static long hash(byte[] data, long seed) {
        int n = data.length;
        long h = seed ^ (n * M);
        int blocks = n & ~7;
        for (int i = 0; i < blocks; i += 8) {
            h = step(h, littleEndian(data, i, 8));
        }
        if ((n & 7) != 0) {
            h = (h ^ littleEndian(data, blocks, n & 7)) * M;
        }
        return finish(h);
    }

    /** The hash of one 8-byte block {@code k} (a {@code long} read little-endian). */
    static long hashLong(long k, long seed) {
        return finish(step(seed ^ (8 * M), k));
    }

    private static long step(long h, long k) {
        k *= M;
        k ^= k >>> R;
        k *= M;
        return (h ^ k) * M;
    }

    private static long finish(long h) {
        h ^= h >>> R;
        h *= M;
        return h ^ (h >>> R);
    }

    private static long littleEndian(byte[] data, int from, int length) {
        long value = 0;
        for (int i = length - 1; i >= 0; i--) {
            value = (value << 8) | (data[from + i] & 0xff);
        }
        return value;
    }
}
