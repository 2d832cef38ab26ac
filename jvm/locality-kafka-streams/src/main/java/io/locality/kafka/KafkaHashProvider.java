package io.locality.kafka;

import io.locality.hashing.FallbackHash;
import io.locality.hashing.FallbackHashProvider;
import io.locality.hashing.FallbackSpec;

/** The fallback of tables learned with {@code --hash kafka}: {@link KafkaPartitioner}. */
public final class KafkaHashProvider implements FallbackHashProvider {

    @Override
    public String engine() {
        return "kafka";
    }

    @Override
    public FallbackHash create(FallbackSpec spec) {
        return new KafkaPartitioner(spec.numInstances(), spec.intType());
    }
}
