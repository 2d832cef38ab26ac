package io.locality.kafka.switching;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.locality.kafka.JsonLinesFile;
import io.locality.schedule.SwitchSchedule;
import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Path;
import org.apache.kafka.streams.processor.TaskId;

/**
 * {@link SwitchEvents} as a JSON-lines file, one line per event, each with the {@code server}, the
 * {@code event} name and the wall-clock time {@code at} (ms):
 * {@code {"server": "s3", "event": "released", "at": 1764090000123, "operator": "hashtag", "task": "2_3",
 * "switch": 1420070420000, "key": "#jobs", "point": 1420070420017, "held_ms": 212}}. One file per
 * application instance, replaced when the instance starts; each line is written out at once, so a test can
 * see that a record waits for the schedule while it waits. Beside the switches, what the instance made of the
 * store's schedule when it read it again ({@code schedule_taken}, {@code schedule_kept} with the reason, once
 * for a run of failed reads) and how long it waited for an unavailable store to load a version
 * ({@code store_waiting}, {@code store_resumed}).
 */
public final class SwitchEventLog implements SwitchEvents, Closeable {
    private final JsonLinesFile out;

    /** A log of the instance running on {@code server}, written to {@code file}, each line at once. */
    public SwitchEventLog(Path file, String server) throws IOException {
        this.out = new JsonLinesFile(file, server, true);
    }

    @Override
    public void stateSent(String operator, TaskId task, long switchPoint, Object key, int to, int bytes) {
        out.write(stage("state_sent", operator, task, switchPoint).put("key", String.valueOf(key)).put("to", to)
                .put("bytes", bytes));
    }

    @Override
    public void stateReceived(String operator, TaskId task, long switchPoint, Object key, int from, Object state) {
        out.write(stage("state_received", operator, task, switchPoint).put("key", String.valueOf(key)).put("from", from)
                .put("state", String.valueOf(state)));
    }

    @Override
    public void released(String operator, TaskId task, long switchPoint, Object key, long point, long heldMs) {
        out.write(stage("released", operator, task, switchPoint).put("key", String.valueOf(key)).put("point", point)
                .put("held_ms", heldMs));
    }

    @Override
    public void late(String operator, TaskId task, Object key, long point, int to) {
        out.write(event("late").put("operator", operator).put("task", task.toString()).put("key", String.valueOf(key))
                .put("point", point).put("to", to));
    }

    @Override
    public void switched(String operator, TaskId task, long switchPoint) {
        out.write(stage("switched", operator, task, switchPoint));
    }

    @Override
    public void waiting(long point, long sealedUntil) {
        out.write(event("waiting").put("point", point).put("sealed_until", sealedUntil));
    }

    @Override
    public void waited(long point, long millis) {
        out.write(event("waited").put("point", point).put("ms", millis));
    }

    @Override
    public void scheduleTaken(SwitchSchedule schedule) {
        out.write(event("schedule_taken").put("sealed_until", schedule.sealedUntil())
                .put("switches", schedule.switches().size()));
    }

    @Override
    public void scheduleKept(SwitchSchedule known, String why) {
        out.write(event("schedule_kept").put("sealed_until", known.sealedUntil()).put("why", why));
    }

    @Override
    public void storeWaiting(String what, IOException why) {
        out.write(event("store_waiting").put("what", what).put("why", why.getMessage()));
    }

    @Override
    public void storeResumed(String what, long millis) {
        out.write(event("store_resumed").put("what", what).put("ms", millis));
    }

    private ObjectNode event(String name) {
        return out.line().put("event", name).put("at", System.currentTimeMillis());
    }

    private ObjectNode stage(String name, String operator, TaskId task, long switchPoint) {
        return event(name).put("operator", operator).put("task", task.toString()).put("switch", switchPoint);
    }

    @Override
    public void close() throws IOException {
        out.close();
    }
}
