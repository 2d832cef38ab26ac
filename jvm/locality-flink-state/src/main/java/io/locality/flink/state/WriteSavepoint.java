package io.locality.flink.state;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.api.common.functions.util.ListCollector;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.fs.FSDataOutputStream;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.CheckpointMetadataOutputStream;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.filesystem.AbstractFsCheckpointStorageAccess;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.filesystem.FsCheckpointStorageLocation;
import org.apache.flink.state.api.output.StatePathExtractor;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.IOUtils;

/**
 * The rewrite's last task (parallelism 1): once every subtask's file is written ({@link WriteSubtasks}),
 * writes the new savepoint's {@code _metadata}, or refuses the rewrite.
 *
 * <p>Each rewritten operator's subtask gets its new file of keyed state; its operator state, if any, is
 * kept. Every other operator's state is as it was. The files the old savepoint's metadata names and the new
 * one keeps are copied beside it, so the new savepoint stands alone. {@code _metadata} is written last: a
 * rewrite that fails or is refused leaves no restorable savepoint.
 */
final class WriteSavepoint extends AbstractStreamOperator<Void>
        implements OneInputStreamOperator<RewrittenSubtask, Void>, BoundedOneInput {
    private static final long serialVersionUID = 1L;

    private final String savepoint;
    private final String directory;
    private final List<String> uids;
    private transient List<RewrittenSubtask> done;

    /** {@code uids}: the rewritten operators, by their index in the rewrite. */
    WriteSavepoint(String savepoint, String directory, List<String> uids) {
        this.savepoint = savepoint;
        this.directory = directory;
        this.uids = List.copyOf(uids);
    }

    @Override
    public void open() throws Exception {
        super.open();
        done = new ArrayList<>();
    }

    @Override
    public void processElement(StreamRecord<RewrittenSubtask> element) {
        done.add(element.getValue());
    }

    @Override
    public void endInput() throws Exception {
        for (RewrittenSubtask subtask : done) {
            if (subtask.refusal != null) {
                throw new RewriteRefused(subtask.refusal);
            }
        }
        SavepointOperators old = SavepointOperators.load(savepoint);
        Map<Integer, Map<Integer, KeyGroupsStateHandle>> files = new HashMap<>();
        Set<Path> written = new HashSet<>();
        for (RewrittenSubtask subtask : done) {
            KeyGroupsStateHandle file = subtask.file(getUserCodeClassloader());
            files.computeIfAbsent(subtask.operator, k -> new HashMap<>()).put(subtask.subtask, file);
            if (file != null) {
                written.add(((FileStateHandle) file.getDelegateStateHandle()).getFilePath());
            }
        }
        Map<String, OperatorState> rewritten = new HashMap<>();
        files.forEach((index, bySubtask) -> {
            OperatorState state = old.operator(uids.get(index));
            rewritten.put(state.getOperatorID().toHexString(), withKeyedState(state, bySubtask));
        });
        List<OperatorState> states = new ArrayList<>();
        for (OperatorState state : old.metadata().getOperatorStates()) {
            states.add(rewritten.getOrDefault(state.getOperatorID().toHexString(), state));
        }
        copyKeptFiles(states, written);
        writeMetadata(new CheckpointMetadata(old.checkpointId(), states, old.metadata().getMasterStates()));
    }

    /** {@code state} with each subtask's new file of keyed state, its other state as it was. */
    private static OperatorState withKeyedState(OperatorState state, Map<Integer, KeyGroupsStateHandle> files) {
        OperatorState fresh = new OperatorState(state.getOperatorName().orElse(null),
                state.getOperatorUid().orElse(null), state.getOperatorID(), state.getParallelism(),
                state.getMaxParallelism());
        fresh.setCoordinatorState(state.getCoordinatorState());
        for (int subtask = 0; subtask < state.getParallelism(); subtask++) {
            KeyGroupsStateHandle file = files.get(subtask);
            OperatorSubtaskState before = state.getState(subtask);
            if (file == null && before == null) {
                continue;
            }
            OperatorSubtaskState.Builder after = OperatorSubtaskState.builder();
            if (file != null) {
                after.setManagedKeyedState(file);
            }
            if (before != null) {
                after.setManagedOperatorState(before.getManagedOperatorState())
                        .setRawOperatorState(before.getRawOperatorState());
            }
            fresh.putState(subtask, after.build());
        }
        return fresh;
    }
    /** Copies beside the new savepoint every file its operators name but the rewrite did not write. */
    private void copyKeptFiles(List<OperatorState> states, Set<Path> written) throws Exception {
        List<Path> files = new ArrayList<>();
        StatePathExtractor paths = new StatePathExtractor();
        for (OperatorState state : states) {
            paths.flatMap(state, new ListCollector<>(files));
        }
        for (Path file : files) {
            if (!written.contains(file)) {
                copy(file, new Path(directory, file.getName()));
            }
        }
    }

    private static void copy(Path from, Path to) throws IOException {
        try (FSDataInputStream in = from.getFileSystem().open(from);
                FSDataOutputStream out = to.getFileSystem().create(to, FileSystem.WriteMode.NO_OVERWRITE)) {
            IOUtils.copyBytes(in, out, false);
        }
    }

    /** Writes {@code _metadata} as Flink writes a savepoint's (its files named relative to its directory). */
    private void writeMetadata(CheckpointMetadata metadata) throws IOException {
        Path target = new Path(directory);
        FsCheckpointStorageLocation location = new FsCheckpointStorageLocation(target.getFileSystem(), target,
                target, target, AbstractFsCheckpointStorageAccess.encodePathAsReference(target),
                (int) CheckpointingOptions.FS_SMALL_FILE_THRESHOLD.defaultValue().getBytes(),
                CheckpointingOptions.FS_WRITE_BUFFER_SIZE.defaultValue());
        try (CheckpointMetadataOutputStream out = location.createMetadataOutputStream()) {
            Checkpoints.storeCheckpointMetadata(metadata, out);
            out.closeAndFinalizeCheckpoint();
        }
    }
}
