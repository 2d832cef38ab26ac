package io.locality.flink.state;

import java.io.IOException;
import java.io.Serializable;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.util.InstantiationUtil;

/**
 * The file one subtask of a rewritten operator restores its keyed state from, on its way to the task that
 * writes the savepoint's metadata ({@link WriteSavepoint}); or why the rewrite is refused. A Flink POJO (public fields), the handle
 * Java-serialized: Flink's state handles are {@link Serializable}, not types Flink's own serializers know.
 */
public final class RewrittenSubtask {
    /** The operator's index in the rewrite. */
    public int operator;
    public int subtask;
    /** The {@link KeyGroupsStateHandle}, serialized; null when the subtask has no keyed state. */
    public byte[] file;
    public String refusal;

    public RewrittenSubtask() {}

    static RewrittenSubtask of(int operator, int subtask, KeyGroupsStateHandle file) throws IOException {
        RewrittenSubtask done = new RewrittenSubtask();
        done.operator = operator;
        done.subtask = subtask;
        done.file = file == null ? null : InstantiationUtil.serializeObject(file);
        return done;
    }

    static RewrittenSubtask refusal(String why) {
        RewrittenSubtask refused = new RewrittenSubtask();
        refused.refusal = why;
        return refused;
    }

    KeyGroupsStateHandle file(ClassLoader classLoader) throws IOException, ClassNotFoundException {
        return file == null ? null : InstantiationUtil.deserializeObject(file, classLoader);
    }
}
