package io.locality.kafka.switching;

import io.locality.store.ScheduleFollower;
import org.apache.kafka.streams.processor.TaskId;

/**
 * Told what a switching job does at each switch: what the tests check and the benchmarks measure (how long
 * records were held, how much state moved, when each task was through, how long records waited for the
 * schedule to be extended). Calls come from stream threads.
 */
public interface SwitchEvents extends ScheduleFollower.WaitListener {
    /** Records nothing. */
    SwitchEvents NONE = new SwitchEvents() { };

    /** The old owner {@code task} sent the state of {@code key} ({@code bytes} serialized) to partition {@code to}. */
    default void stateSent(String operator, TaskId task, long switchPoint, Object key, int to, int bytes) { }

    /** The new owner {@code task} took over {@code key} with {@code state} from partition {@code from}. */
    default void stateReceived(String operator, TaskId task, long switchPoint, Object key, int from, Object state) { }

    /** A held record of {@code key} (point {@code point}) was released after {@code heldMs} ms. */
    default void released(String operator, TaskId task, long switchPoint, Object key, long point, long heldMs) { }

    /** An out-of-order record of {@code key} reached {@code task} after the task handed the key over. */
    default void late(String operator, TaskId task, Object key, long point, int to) { }

    /** {@code task} is through the switch: markers in and sent on, its keys handed over, every state received. */
    default void switched(String operator, TaskId task, long switchPoint) { }
}
