package io.locality.kafka;

import org.apache.kafka.streams.processor.TaskId;

/**
 * Told of every record a stateful stage processed, and where: what a job records to measure the locality
 * its tables give (the share of records whose consecutive stages ran in one application instance).
 */
@FunctionalInterface
public interface ProcessedRecords {
    /** Records nothing. */
    ProcessedRecords NONE = (operator, task, key, value, count) -> { };

    /**
     * One record processed.
     *
     * @param operator the operator (stage) that processed it
     * @param task the task that ran it ({@code task.partition()} is the partition it was read from)
     * @param key the record's key at this stage
     * @param value the record's value
     * @param count the key's count after this record
     */
    void processed(String operator, TaskId task, Object key, Object value, long count);

    /** This, then {@code next}, told of every record. */
    default ProcessedRecords andThen(ProcessedRecords next) {
        if (this == NONE) {
            return next;
        }
        return (operator, task, key, value, count) -> {
            processed(operator, task, key, value, count);
            next.processed(operator, task, key, value, count);
        };
    }
}
