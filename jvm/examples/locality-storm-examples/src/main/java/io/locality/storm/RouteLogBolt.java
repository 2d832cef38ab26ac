package io.locality.storm;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.storm.Config;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;

/**
 * The last keyed bolt: counts like {@link KeyCountBolt}, then writes each tuple with every bolt's task,
 * worker and count as a JSON line to {@code task-N.jsonl} in a folder (flushed each second), for the test
 * to check where every tuple went.
 */
final class RouteLogBolt extends KeyCountBolt {
    private static final long serialVersionUID = 1L;

    private final String folder;
    private transient List<String> fields;
    private transient Writer out;
    private transient ObjectMapper json;

    RouteLogBolt(List<String> inputFields, String keyField, String folder) {
        super(inputFields, keyField);
        this.folder = folder;
    }

    @Override
    public void prepare(Map<String, Object> topoConf, TopologyContext context) {
        super.prepare(topoConf, context);
        json = new ObjectMapper();
        fields = outputFields();
        try {
            out = Files.newBufferedWriter(Path.of(folder, "task-" + context.getThisTaskId() + ".jsonl"),
                    StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    protected void deliver(List<Object> values, BasicOutputCollector collector) {
        ObjectNode line = json.createObjectNode();
        for (int i = 0; i < fields.size(); i++) {
            line.putPOJO(fields.get(i), values.get(i));
        }
        try {
            out.write(json.writeValueAsString(line));
            out.write('\n');
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    protected void onTick() {
        try {
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void cleanup() {
        onTick();
    }

    @Override
    public Map<String, Object> getComponentConfiguration() {
        return Map.of(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1);
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {}
}
