package io.locality.flink.job;

/**
 * One record of the two-stage job: its keys for the first and the second operator, and what each
 * operator recorded about it (its subtask and the real key's count so far).
 *
 * <p>A Flink POJO (public fields, no-argument constructor), so Flink serializes it field by field.
 */
public class TraceRecord {
    /** The input's {@code seq} field, when it has one (echoed to the output to trace a record back). */
    public Long seq;
    /** The key of the first operator. */
    public String first;
    /** The key of the second operator. */
    public String second;
    /** The first operator's subtask that processed the record (-1 before it). */
    public int firstSubtask = -1;
    /** How many records of {@link #first} that subtask had seen, this one included. */
    public long firstCount;
    /** The second operator's subtask that processed the record (-1 before it). */
    public int secondSubtask = -1;
    /** How many records of {@link #second} that subtask had seen, this one included. */
    public long secondCount;

    public TraceRecord() {}

    public TraceRecord(Long seq, String first, String second) {
        this.seq = seq;
        this.first = first;
        this.second = second;
    }
}
