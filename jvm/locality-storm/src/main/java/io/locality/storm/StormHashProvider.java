package io.locality.storm;

import io.locality.hashing.FallbackHash;
import io.locality.hashing.FallbackHashProvider;
import io.locality.hashing.FallbackSpec;

/** The fallback of tables learned with {@code --hash storm}: Storm's fields grouping. */
public final class StormHashProvider implements FallbackHashProvider {

    @Override
    public String engine() {
        return "storm";
    }

    @Override
    public FallbackHash create(FallbackSpec spec) {
        return new StormFieldsGrouping(spec.numInstances());
    }
}
