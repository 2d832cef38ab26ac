package io.locality.flink.state;

import java.util.BitSet;

/**
 * One real key's {@code MapState} entry under its new routing key, on its way to the subtask whose key
 * groups hold it ({@link WriteSubtasks}); or, with {@link #leftOut} set, which entries of a subtask's old
 * file were sent elsewhere (so that its writer copies the others without decoding them again); or, with
 * {@link #refusal} set, why the rewrite is refused (the last task refuses it before it writes any metadata).
 * A Flink POJO: the key and value are the savepoint's bytes, the key re-encoded with the new routing key and
 * key group.
 */
public final class MovedEntry {
    /** The subtask's index over the rewrite's operators' subtasks ({@link KeyedLayout#target}). */
    public int target;
    public int keyGroup;
    public byte[] key;
    public byte[] value;
    /** The entries of the target's old file that left it: bit {@code i} ({@link BitSet#valueOf(long[])}) for its i-th. */
    public long[] leftOut;
    public String refusal;

    public MovedEntry() {}

    MovedEntry(int target, int keyGroup, byte[] key, byte[] value) {
        this.target = target;
        this.keyGroup = keyGroup;
        this.key = key;
        this.value = value;
    }

    static MovedEntry leftOut(int target, BitSet entries) {
        MovedEntry left = new MovedEntry();
        left.target = target;
        left.leftOut = entries.toLongArray();
        return left;
    }

    static MovedEntry refusal(String why) {
        MovedEntry refused = new MovedEntry();
        refused.refusal = why;
        return refused;
    }
}
