package io.locality.kafka;

import io.locality.routing.FallbackHash;
import io.locality.routing.FallbackHashProvider;
import io.locality.routing.FallbackSpec;

/** The fallback of tables learned with {@code --hash kafka}: {@link KafkaDefaultPartition}. */
public final class KafkaHashProvider implements FallbackHashProvider {

    @Override
    public String engine() {
        return "kafka";
    }

    @Override
    public FallbackHash create(FallbackSpec spec) {
        return new KafkaDefaultPartition(spec.numInstances(), spec.intType());
    }
}
