package io.locality.flink.job;

import java.io.Serializable;
import java.util.Map;
import org.apache.flink.api.common.functions.RuntimeContext;

/**
 * Where one subtask of an operator ran, as the running job reports it: its task slot (the allocation ID
 * of the slot Flink gave it; subtasks sharing a slot report the same one), its TaskManager and host.
 *
 * @param operator the operator's name (the store's, e.g. {@code hashtag})
 * @param subtask the subtask index
 * @param slot the slot's allocation ID
 * @param taskManager the TaskManager's resource ID
 * @param host the TaskManager's host name
 */
public record Placement(String operator, int subtask, String slot, String taskManager, String host)
        implements Serializable {

    /** The placement of the subtask that owns {@code context}, read from Flink's task info and metric scope. */
    public static Placement of(String operator, RuntimeContext context) {
        Map<String, String> scope = context.getMetricGroup().getAllVariables();
        return new Placement(operator, context.getTaskInfo().getIndexOfThisSubtask(),
                context.getTaskInfo().getAllocationIDAsString(), scope.get("<tm_id>"), scope.get("<host>"));
    }
}
