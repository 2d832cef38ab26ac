package io.locality.flink.job;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.JobExecutionResult;

/**
 * What a run of the two-stage job measured: how many records, and how many of them had their two
 * operators' subtasks in the same task slot and on the same TaskManager, from the {@link HopCounts} and
 * {@link Placement}s the running job reported; and its run time.
 *
 * @param records records that went through both operators
 * @param sameSlot records whose two subtasks ran in the same task slot
 * @param sameTaskManager records whose two subtasks ran on the same TaskManager
 * @param seconds the job's net run time (Flink's, from submission to the end)
 */
public record JobSummary(TwoStagePipeline pipeline, long[] hops, List<Placement> placements, long records,
        long sameSlot, long sameTaskManager, double seconds) {

    /**
     * The summary of a finished job's result.
     *
     * @throws IllegalStateException when the result lacks the accumulators a {@link CountingStage} reports
     */
    public static JobSummary of(TwoStagePipeline pipeline, JobExecutionResult result) {
        long[] hops = result.getAccumulatorResult(CountingStage.HOPS);
        List<Placement> placements = result.getAccumulatorResult(CountingStage.PLACEMENTS);
        if (hops == null || placements == null) {
            throw new IllegalStateException("the job's result has no " + CountingStage.HOPS + " or "
                    + CountingStage.PLACEMENTS + " accumulator (did any record reach the second operator?)");
        }
        return of(pipeline, hops, placements, result.getNetRuntime() / 1000.0);
    }

    /** The summary of hop counts and placements (the hop from subtask i to j in cell i * p2 + j). */
    public static JobSummary of(TwoStagePipeline pipeline, long[] hops, List<Placement> placements, double seconds) {
        Map<String, Placement> where = new HashMap<>();
        placements.forEach(p -> where.put(p.operator() + "/" + p.subtask(), p));
        String firstName = pipeline.first().operator();
        String secondName = pipeline.second().operator();
        int downstream = pipeline.second().parallelism();
        long records = 0;
        long sameSlot = 0;
        long sameTaskManager = 0;
        for (int cell = 0; cell < hops.length; cell++) {
            if (hops[cell] == 0) {
                continue;
            }
            Placement from = placed(where, firstName, cell / downstream);
            Placement to = placed(where, secondName, cell % downstream);
            records += hops[cell];
            sameSlot += from.slot().equals(to.slot()) ? hops[cell] : 0;
            sameTaskManager += from.taskManager().equals(to.taskManager()) ? hops[cell] : 0;
        }
        return new JobSummary(pipeline, hops, placements, records, sameSlot, sameTaskManager, seconds);
    }

    private static Placement placed(Map<String, Placement> where, String operator, int subtask) {
        Placement placement = where.get(operator + "/" + subtask);
        if (placement == null) {
            throw new IllegalStateException("subtask " + subtask + " of '" + operator + "' counted records but "
                    + "reported no placement");
        }
        return placement;
    }

    /** Share of the records whose two subtasks shared a task slot (0 when there were none). */
    public double sameSlotShare() {
        return records == 0 ? 0 : (double) sameSlot / records;
    }

    /** Share of the records whose two subtasks ran on one TaskManager (0 when there were none). */
    public double sameTaskManagerShare() {
        return records == 0 ? 0 : (double) sameTaskManager / records;
    }

    /**
     * One JSON document: the figures, then per operator where each subtask ran, and the hop counts (row
     * {@code i}: the records from subtask {@code i} of the first operator to each subtask of the second).
     */
    public ObjectNode toJson(ObjectMapper json) {
        ObjectNode doc = json.createObjectNode();
        doc.put("records", records);
        doc.put("same_slot", sameSlot);
        doc.put("same_slot_share", sameSlotShare());
        doc.put("same_task_manager", sameTaskManager);
        doc.put("same_task_manager_share", sameTaskManagerShare());
        doc.put("seconds", seconds);
        doc.put("records_per_second", seconds > 0 ? records / seconds : 0);
        ObjectNode where = doc.putObject("placements");
        for (Stage stage : List.of(pipeline.first(), pipeline.second())) {
            ArrayNode subtasks = where.putArray(stage.operator());
            placements.stream().filter(p -> p.operator().equals(stage.operator()))
                    .sorted((a, b) -> Integer.compare(a.subtask(), b.subtask()))
                    .forEach(p -> subtasks.addObject().put("subtask", p.subtask()).put("slot", p.slot())
                            .put("task_manager", p.taskManager()).put("host", p.host()));
        }
        ArrayNode rows = doc.putArray("hops");
        int downstream = pipeline.second().parallelism();
        for (int from = 0; from < hops.length / downstream; from++) {
            ArrayNode row = rows.addArray();
            for (int to = 0; to < downstream; to++) {
                row.add(hops[from * downstream + to]);
            }
        }
        return doc;
    }
}
