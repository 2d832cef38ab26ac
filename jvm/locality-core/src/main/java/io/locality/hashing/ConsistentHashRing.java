package io.locality.hashing;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * locality's consistent-hash ring with virtual nodes (engine {@code ring}), for jobs whose router is
 * their own: the same instance as Python's {@code ConsistentHashRing} for every key.
 *
 * <p>A string key hashes its UTF-8 bytes with seed 0, an integral key its 8-byte little-endian two's
 * complement with seed 1; replica {@code r} of instance {@code i} sits at the hash of the 8 bytes
 * {@code i | r << 32} with seed 2. A key goes to the first position at or after its hash (unsigned),
 * wrapping around; equal positions go to the smaller instance. Growing from n to n + 1 instances moves
 * only the keys the new instance takes over (Karger et al., STOC 1997).
 */
public final class ConsistentHashRing implements FallbackHash {
    private static final long SEED_STRING = 0;
    private static final long SEED_INTEGER = 1;
    private static final long SEED_NODE = 2;

    private final long[] positions;
    private final int[] owners;

    /** A ring of {@code numInstances} instances with {@code virtualNodes} positions each. */
    public ConsistentHashRing(int numInstances, int virtualNodes) {
        if (numInstances < 1 || virtualNodes < 1) {
            throw new IllegalArgumentException("a ring needs numInstances >= 1 and virtualNodes >= 1; got "
                    + numInstances + ", " + virtualNodes);
        }
        long[][] nodes = new long[numInstances * virtualNodes][];
        for (int i = 0; i < numInstances; i++) {
            for (int r = 0; r < virtualNodes; r++) {
                long node = (i & 0xffffffffL) | ((long) r << 32);
                nodes[i * virtualNodes + r] = new long[] {MurmurHash64A.hashLong(node, SEED_NODE), i};
            }
        }
        Arrays.sort(nodes, (a, b) -> a[0] != b[0] ? Long.compareUnsigned(a[0], b[0]) : Long.compare(a[1], b[1]));
        positions = new long[nodes.length];
        owners = new int[nodes.length];
        for (int j = 0; j < nodes.length; j++) {
            positions[j] = nodes[j][0];
            owners[j] = (int) nodes[j][1];
        }
    }

    @Override
    public int instanceOf(Object key) {
        Object tableKey = TableKey.of(key);
        long h = tableKey instanceof String s
                ? MurmurHash64A.hash(s.getBytes(StandardCharsets.UTF_8), SEED_STRING)
                : MurmurHash64A.hashLong((Long) tableKey, SEED_INTEGER);
        return owners[firstAtOrAfter(h) % owners.length];
    }

    /** Index of the first position >= h in unsigned order (positions.length when there is none). */
    private int firstAtOrAfter(long h) {
        int low = 0;
        int high = positions.length;
        while (low < high) {
            int mid = (low + high) >>> 1;
            if (Long.compareUnsigned(positions[mid], h) < 0) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        return low;
    }
}
