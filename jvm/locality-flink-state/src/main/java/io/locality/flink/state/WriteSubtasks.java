package io.locality.flink.state;

import java.io.IOException;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.BoundedOneInput;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * The rewrite's second step: writes the new savepoint file of each subtask it serves (subtask {@code t} of
 * all the operators' subtasks, numbered by {@link KeyedLayout#target}, is served by this task when
 * {@code t mod parallelism} is its index, as the entries are partitioned). Once every moved entry has
 * arrived, it copies the subtask's old file entry by entry, leaving out those whose routing key changes
 * (sent elsewhere by {@link SendMovedEntries}, which says their positions: nothing is decoded here), and
 * merges in the entries moved to it, key group by key group. Flink's savepoint metadata holds one
 * keyed-state file per subtask, so each subtask's file is written whole. Holds the entries moved to its
 * subtasks in memory: their share of the state.
 */
final class WriteSubtasks extends AbstractStreamOperator<RewrittenSubtask>
        implements OneInputStreamOperator<MovedEntry, RewrittenSubtask>, BoundedOneInput {
    private static final long serialVersionUID = 1L;

    private final String savepoint;
    private final String directory;
    private final List<KeyedLayout> operators;
    private transient Map<Integer, List<MovedEntry>> moved;
    private transient Map<Integer, BitSet> leftOut;
    private transient String refusal;

    WriteSubtasks(String savepoint, String directory, List<KeyedLayout> operators) {
        this.savepoint = savepoint;
        this.directory = directory;
        this.operators = List.copyOf(operators);
    }

    @Override
    public void open() throws Exception {
        super.open();
        moved = new HashMap<>();
        leftOut = new HashMap<>();
    }

    @Override
    public void processElement(StreamRecord<MovedEntry> element) {
        MovedEntry entry = element.getValue();
        if (entry.refusal != null) {
            refusal = refusal == null ? entry.refusal : refusal;
        } else if (entry.leftOut != null) {
            leftOut.put(entry.target, BitSet.valueOf(entry.leftOut));
        } else {
            moved.computeIfAbsent(entry.target, t -> new ArrayList<>()).add(entry);
        }
    }

    @Override
    public void endInput() throws Exception {
        if (refusal != null) {
            output.collect(new StreamRecord<>(RewrittenSubtask.refusal(refusal)));
            return;
        }
        SavepointOperators metadata = SavepointOperators.load(savepoint);
        int index = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        int tasks = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
        for (int op = 0; op < operators.size(); op++) {
            for (int subtask = 0; subtask < operators.get(op).parallelism(); subtask++) {
                int target = KeyedLayout.target(operators, op, subtask);
                if (target % tasks == index) {
                    List<MovedEntry> in = moved.getOrDefault(target, new ArrayList<>());
                    BitSet left = leftOut.getOrDefault(target, new BitSet());
                    KeyGroupsStateHandle file = write(metadata, operators.get(op), subtask, left, in);
                    output.collect(new StreamRecord<>(RewrittenSubtask.of(op, subtask, file)));
                }
            }
        }
    }

    /** The new file of {@code subtask}: its old entries but those {@code left} (by position) and those moved to it. */
    private KeyGroupsStateHandle write(SavepointOperators metadata, KeyedLayout operator, int subtask,
            BitSet left, List<MovedEntry> in) throws IOException {
        String uid = operator.operator().uid();
        KeyGroupsStateHandle old = metadata.keyedFile(uid, subtask);
        KeyGroupsStateHandle header = old != null ? old : in.isEmpty() ? null : anyFile(metadata, operator);
        if (header == null) {
            return null;
        }
        in.sort(Comparator.comparingInt(entry -> entry.keyGroup));
        KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(
                operator.maxParallelism(), operator.parallelism(), subtask);
        ClassLoader loader = getUserCodeClassloader();
        try (KeyGroupsReader reader = KeyGroupsReader.open(header, loader);
                KeyGroupsWriter writer = KeyGroupsWriter.create(new Path(directory, UUID.randomUUID().toString()),
                        reader.header(), range)) {
            int mapState = EntryRoutes.mapState(reader.header(), operator.operator().stateName());
            if (mapState < 0 && !in.isEmpty()) {
                throw new IllegalStateException("entries moved to subtask " + subtask + " of '" + uid + "', whose "
                        + "savepoint file has no state '" + operator.operator().stateName() + "'");
            }
            int[] next = {0};
            int[] position = {0};
            if (old != null) {
                reader.forEach((keyGroup, stateId, key, value) -> {
                    for (; next[0] < in.size() && in.get(next[0]).keyGroup < keyGroup; next[0]++) {
                        MovedEntry entry = in.get(next[0]);
                        writer.add(entry.keyGroup, mapState, entry.key, entry.value);
                    }
                    if (!left.get(position[0]++)) {
                        writer.add(keyGroup, stateId, key, value);
                    }
                });
            }
            for (; next[0] < in.size(); next[0]++) {
                MovedEntry entry = in.get(next[0]);
                writer.add(entry.keyGroup, mapState, entry.key, entry.value);
            }
            return writer.finish();
        }
    }

    /** A file of another subtask of {@code operator}, for its header: a subtask that had no state gets some. */
    private static KeyGroupsStateHandle anyFile(SavepointOperators metadata, KeyedLayout operator) {
        for (int subtask = 0; subtask < operator.parallelism(); subtask++) {
            KeyGroupsStateHandle file = metadata.keyedFile(operator.operator().uid(), subtask);
            if (file != null) {
                return file;
            }
        }
        throw new IllegalStateException("entries moved to operator '" + operator.operator().uid()
                + "', which has no keyed state in the savepoint");
    }
}
