package io.locality.storm;

import io.locality.routing.RoutingTable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.storm.tuple.Fields;

/**
 * The target task of a tuple by one operator's routing table: its key's entry, else Storm's fields grouping.
 *
 * <p>Both index the target tasks sorted ascending by id, the order in which Storm hands them to every
 * grouping and in which its {@code FieldsGrouper} indexes them; a table's instance {@code i} is the
 * bolt's {@code i}-th task. Made once per grouping instance, when the worker prepares it: every mismatch
 * between the table and the stream (an engine other than Storm's, another number of tasks, a missing
 * key field) is refused then, naming both sides, rather than routing a single tuple wrongly.
 */
final class TableTaskChooser {
    private final RoutingTable table;
    private final int keyIndex;
    private final List<List<Integer>> targets;

    private TableTaskChooser(RoutingTable table, int keyIndex, List<List<Integer>> targets) {
        this.table = table;
        this.keyIndex = keyIndex;
        this.targets = targets;
    }

    /**
     * The chooser of a stream whose tuples have {@code streamFields}, keyed by {@code keyField}.
     *
     * @param stream names the stream in messages ({@code component:stream})
     * @throws IllegalArgumentException when the table is not a Storm table for these target tasks, or the
     *     stream has no {@code keyField}
     */
    static TableTaskChooser of(RoutingTable table, String stream, Fields streamFields, String keyField,
            List<Integer> targetTasks) {
        String engine = table.fallbackSpec().engine();
        if (!engine.equals("storm")) {
            throw new IllegalArgumentException("the table of operator '" + table.operator() + "' falls back to the '"
                    + engine + "' hash, not Storm's fields grouping: learn it with --hash storm");
        }
        if (table.numInstances() != targetTasks.size()) {
            throw new IllegalArgumentException("the table of operator '" + table.operator() + "' is for "
                    + table.numInstances() + " tasks; the bolt fed by " + stream + " has " + targetTasks.size()
                    + " (" + targetTasks + "): learn the tables for the bolt's parallelism");
        }
        if (!streamFields.contains(keyField)) {
            throw new IllegalArgumentException("the stream " + stream + " has no field '" + keyField + "'; its fields are "
                    + streamFields.toList());
        }
        List<Integer> sorted = new ArrayList<>(targetTasks);
        Collections.sort(sorted);
        List<List<Integer>> targets = new ArrayList<>(sorted.size());
        sorted.forEach(task -> targets.add(List.of(task)));
        return new TableTaskChooser(table, streamFields.fieldIndex(keyField), List.copyOf(targets));
    }

    /** The one task {@code values} go to. */
    List<Integer> chooseTasks(List<Object> values) {
        return targets.get(table.route(values.get(keyIndex)));
    }
}
