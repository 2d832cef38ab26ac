package io.locality.storm;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.utils.TupleUtils;

/**
 * A stateful bolt keyed by one field: counts the tuples of each key, and passes each tuple on with what it
 * did: its task index (among the bolt's tasks sorted by id), its worker's port and the key's count so far.
 */
class KeyCountBolt extends BaseBasicBolt {
    private static final long serialVersionUID = 1L;

    private final List<String> inputFields;
    private final String keyField;
    private transient Map<Object, Long> counts;
    private transient int taskIndex;
    private transient int workerPort;

    KeyCountBolt(List<String> inputFields, String keyField) {
        this.inputFields = List.copyOf(inputFields);
        this.keyField = keyField;
    }

    @Override
    public void prepare(Map<String, Object> topoConf, TopologyContext context) {
        counts = new HashMap<>();
        taskIndex = context.getThisTaskIndex();
        workerPort = context.getThisWorkerPort();
    }

    @Override
    public void execute(Tuple input, BasicOutputCollector collector) {
        if (TupleUtils.isTick(input)) {
            onTick();
            return;
        }
        long count = counts.merge(input.getValueByField(keyField), 1L, Long::sum);
        List<Object> values = new ArrayList<>(input.getValues());
        values.add(taskIndex);
        values.add(workerPort);
        values.add(count);
        deliver(values, collector);
    }

    /** Sends the tuple with this bolt's fields on. */
    protected void deliver(List<Object> values, BasicOutputCollector collector) {
        collector.emit(values);
    }

    /** Called on each tick tuple, if the bolt asks for them. */
    protected void onTick() {}

    /** The fields of the tuples this bolt delivers. */
    protected final List<String> outputFields() {
        List<String> fields = new ArrayList<>(inputFields);
        fields.addAll(List.of(keyField + "_task", keyField + "_worker", keyField + "_count"));
        return fields;
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        declarer.declare(new Fields(outputFields()));
    }
}
