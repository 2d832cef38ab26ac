package io.locality.sketch;

/**
 * The counter a full {@link SpaceSaving} sketch evicts: the smallest count, the lowest slot among ties.
 *
 * <p>A binary min-heap of one entry {@code (count, slot)} per slot, ordered by count then slot. Counts only grow,
 * so an entry may be stale, below its slot's count, but never above it; an update that adds to a monitored key
 * leaves the heap alone (O(1)). {@link #minimum(double[])} refreshes stale entries at the top until the top's
 * count is its slot's: that entry is the smallest {@code (count, slot)} of all, since every other entry is at or
 * below its own slot's. It is the Python sketch's lazy heap ({@code heapq} on {@code (count, slot)} tuples), so
 * both evict the same counter. O(log m) per eviction, amortized over the stale entries refreshed.
 */
final class LazyMinHeap {
    private final double[] counts;
    private final int[] slots;
    private final int size;

    /** A heap over the first {@code size} counts, in O(size). */
    LazyMinHeap(double[] current, int size) {
        this.size = size;
        this.counts = new double[size];
        this.slots = new int[size];
        for (int slot = 0; slot < size; slot++) {
            counts[slot] = current[slot];
            slots[slot] = slot;
        }
        for (int i = size / 2 - 1; i >= 0; i--) {
            siftDown(i);
        }
    }

    /** The slot with the smallest current count, the lowest among ties; its count is {@code current[slot]}. */
    int minimum(double[] current) {
        while (true) {
            int slot = slots[0];
            double now = current[slot];
            if (now == counts[0]) {
                return slot;
            }
            replaceTop(now);
        }
    }

    /** Gives the top entry (the slot {@link #minimum} returned) its new count. */
    void replaceTop(double count) {
        counts[0] = count;
        siftDown(0);
    }

    private void siftDown(int at) {
        double count = counts[at];
        int slot = slots[at];
        while (true) {
            int child = 2 * at + 1;
            if (child >= size) {
                break;
            }
            if (child + 1 < size && before(counts[child + 1], slots[child + 1], counts[child], slots[child])) {
                child++;
            }
            if (!before(counts[child], slots[child], count, slot)) {
                break;
            }
            counts[at] = counts[child];
            slots[at] = slots[child];
            at = child;
        }
        counts[at] = count;
        slots[at] = slot;
    }

    private static boolean before(double count, int slot, double otherCount, int otherSlot) {
        return count < otherCount || count == otherCount && slot < otherSlot;
    }
}
