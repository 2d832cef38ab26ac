package io.locality.kafka;

import java.util.Set;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * A stateful stage: counts the records of each key in a persistent key-value store and passes every record
 * on unchanged.
 *
 * <p>The count of a key lives in the store of the task that owns the key's partition, which is why where a
 * key's partition is processed matters: a key that moves to another partition leaves its count behind.
 * Records without a key carry no state and pass uncounted.
 *
 * @param <K> key type
 * @param <V> value type
 */
public final class CountByKey<K, V> implements Processor<K, V, K, V> {
    private final String operator;
    private final ProcessedRecords processed;
    private ProcessorContext<K, V> context;
    private KeyValueStore<K, Long> counts;

    private CountByKey(String operator, ProcessedRecords processed) {
        this.operator = operator;
        this.processed = processed;
    }

    /** Name of the store holding the counts of {@code operator}. */
    public static String storeName(String operator) {
        return operator + "-counts";
    }

    /**
     * The stage of {@code operator}, with its store ({@code KStream.process(supplier)} connects it).
     *
     * @param keySerde serde of the keys the stage counts
     * @param processed told of every record counted
     */
    public static <K, V> ProcessorSupplier<K, V, K, V> supplier(String operator, Serde<K> keySerde,
            ProcessedRecords processed) {
        StoreBuilder<KeyValueStore<K, Long>> store = Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(storeName(operator)), keySerde, Serdes.Long());
        return new ProcessorSupplier<>() {
            @Override
            public Processor<K, V, K, V> get() {
                return new CountByKey<>(operator, processed);
            }

            @Override
            public Set<StoreBuilder<?>> stores() {
                return Set.of(store);
            }
        };
    }

    @Override
    public void init(ProcessorContext<K, V> context) {
        this.context = context;
        this.counts = context.getStateStore(storeName(operator));
    }

    @Override
    public void process(Record<K, V> record) {
        if (record.key() != null) {
            Long before = counts.get(record.key());
            long count = before == null ? 1 : before + 1;
            counts.put(record.key(), count);
            processed.processed(operator, context.taskId(), record.key(), record.value(), count);
        }
        context.forward(record);
    }
}
