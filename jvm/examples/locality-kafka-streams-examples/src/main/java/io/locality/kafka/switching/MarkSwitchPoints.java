package io.locality.kafka.switching;

import io.locality.schedule.SwitchSchedule;
import io.locality.store.ScheduleFollower;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

/**
 * Where markers start: a source task sends a marker of each switch point down its stream, to every partition
 * of the next topic, as soon as its records reach the point.
 *
 * <p>A switching stage may hand a key's state over only once it has every record of the key before the
 * switch point, and Kafka orders records only per producer and partition. So each task that writes into the
 * stage's topic says, in every partition, "nothing more from me before point T" (a marker with its task
 * partition and how many such tasks there are); the stage waits for the markers of all of them. A source
 * task reads one input partition in order: when the first record at or past T arrives (the task's stream
 * time reaches T), every record before it has been forwarded, so the marker goes before that record. A
 * record that comes later with a point before T (out-of-order input) is not lost: the old owner of its key
 * forwards it to the new owner ({@link SwitchingCountByKey}).
 *
 * <p>Markers are not persisted: after a restart the task sends again the markers of every switch up to its
 * first record, and the stages ignore those of switches they have completed.
 *
 * @param <K> key type
 * @param <V> value type
 */
public final class MarkSwitchPoints<K, V> implements Processor<K, V, K, V> {
    private final ScheduleFollower schedule;
    private final int upstreams;
    private ProcessorContext<K, V> context;
    private long markedThrough = SwitchSchedule.BEGINNING;

    /**
     * Markers of the switches of {@code schedule}.
     *
     * @param upstreams how many tasks run this processor (the partitions of the input topic): the stage
     *     waits for a marker from each
     */
    public MarkSwitchPoints(ScheduleFollower schedule, int upstreams) {
        this.schedule = schedule;
        this.upstreams = upstreams;
    }

    @Override
    public void init(ProcessorContext<K, V> context) {
        this.context = context;
    }

    @Override
    public void process(Record<K, V> record) {
        long point = record.timestamp();
        if (point > markedThrough) {
            SwitchSchedule settled;
            try {
                settled = schedule.settle(point);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read the switch schedule for the point " + point, e);
            }
            int me = context.taskId().partition();
            for (SwitchSchedule.Switch change : settled.switchesAfter(markedThrough)) {
                if (change.point() > point) {
                    break;
                }
                context.forward(new Record<K, V>(null, null, change.point(),
                        SwitchHeaders.marker(change.point(), me, upstreams)));
            }
            markedThrough = point;
        }
        context.forward(record);
    }
}
