package io.locality.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.InternalFixedKeyRecordFactory;
import org.apache.kafka.streams.processor.api.Record;
import org.junit.jupiter.api.Test;

/** The sketcher works in the even phases of the epoch only; in the odd ones the records pass untouched. */
class PhasedSketcherTest {
    private final List<String> calls = new ArrayList<>();
    private final List<FixedKeyRecord<String, String>> forwarded = new ArrayList<>();
    private long now;

    @Test
    void theEvenPhasesOfTheEpochAreTheSketchersOnly() {
        PhasedSketcher<String, String> phased = new PhasedSketcher<>(this::sketching, 10_000);
        assertTrue(phased.works(0) && phased.works(9_999) && phased.works(20_000));
        assertFalse(phased.works(10_000) || phased.works(19_999) || phased.works(-1));
        assertEquals(10_000, phased.phaseMillis());
        assertThrows(IllegalArgumentException.class, () -> new PhasedSketcher<>(this::sketching, 0));
    }

    @Test
    void eachRecordGoesThroughTheSketcherInItsPhasesAndPastItInTheOthers() {
        FixedKeyProcessor<String, String, String> processor = new PhasedSketcher<>(this::sketching, 10_000).get();
        processor.init(context());
        for (long at : new long[] {1_000, 12_000, 29_999, 30_000}) {
            now = at;
            processor.process(InternalFixedKeyRecordFactory.create(new Record<>("GB", "at " + at, at)));
        }
        processor.close();
        assertEquals(List.of("init", "sketch at 1000", "sketch at 29999", "close"), calls);
        assertEquals(List.of("at 1000", "at 12000", "at 29999", "at 30000"),
                forwarded.stream().map(FixedKeyRecord::value).toList());
    }

    /** A stand-in for the KeyPairSketcher's processor: says what it was asked, forwards what it sketches. */
    private FixedKeyProcessor<String, String, String> sketching() {
        return new FixedKeyProcessor<>() {
            private FixedKeyProcessorContext<String, String> context;

            @Override
            public void init(FixedKeyProcessorContext<String, String> taskContext) {
                context = taskContext;
                calls.add("init");
            }

            @Override
            public void process(FixedKeyRecord<String, String> record) {
                calls.add("sketch " + record.value());
                context.forward(record);
            }

            @Override
            public void close() {
                calls.add("close");
            }
        };
    }

    /** A task's context that tells {@link #now} and keeps what is forwarded; nothing else is asked of it. */
    @SuppressWarnings("unchecked")
    private FixedKeyProcessorContext<String, String> context() {
        return (FixedKeyProcessorContext<String, String>) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {FixedKeyProcessorContext.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "currentSystemTimeMs" -> now;
                    case "forward" -> {
                        forwarded.add((FixedKeyRecord<String, String>) args[0]);
                        yield null;
                    }
                    default -> throw new UnsupportedOperationException(method.getName());
                });
    }
}
