package io.locality.storm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.routing.RoutingConfiguration;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Values;

/**
 * Emits the records of a JSON-lines file once, in file order: {@code seq} and one key per operator; as fast as
 * the topology takes them, or at a steady rate (a stream that goes on while the test does something to it).
 */
final class RecordSpout extends BaseRichSpout {
    private static final long serialVersionUID = 1L;

    private final String file;
    private final List<String> fields;
    private final double perSecond;
    private transient List<Values> records;
    private transient int next;
    private transient long startedNanos;
    private transient SpoutOutputCollector collector;

    /** @param fields {@code seq}, then the key fields in pipeline order */
    RecordSpout(String file, List<String> fields) {
        this(file, fields, 0);
    }

    /** @param perSecond records emitted per second; 0 for as fast as the topology takes them */
    RecordSpout(String file, List<String> fields, double perSecond) {
        this.file = file;
        this.fields = List.copyOf(fields);
        this.perSecond = perSecond;
    }

    @Override
    public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
        ObjectMapper json = new ObjectMapper();
        records = new ArrayList<>();
        try {
            for (String line : Files.readAllLines(Path.of(file))) {
                JsonNode record = json.readTree(line);
                Values values = new Values();
                for (String field : fields) {
                    values.add(RoutingConfiguration.keyFromJson(record.path(field).toString()));
                }
                records.add(values);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the records " + file, e);
        }
        this.collector = collector;
        this.startedNanos = System.nanoTime();
    }

    @Override
    public void nextTuple() {
        boolean due = perSecond <= 0 || next < (System.nanoTime() - startedNanos) / 1e9 * perSecond;
        if (next < records.size() && due) {
            collector.emit(records.get(next++));
        }
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        declarer.declare(new Fields(fields));
    }
}
