package io.locality.storm;

import io.locality.routing.FallbackHash;
import io.locality.routing.FallbackHashProvider;
import io.locality.routing.FallbackSpec;

/** The fallback of tables learned with {@code --hash storm}: Storm's fields grouping. */
public final class StormHashProvider implements FallbackHashProvider {

    @Override
    public String engine() {
        return "storm";
    }

    @Override
    public FallbackHash create(FallbackSpec spec) {
        return new FieldsGroupingHash(spec.numInstances());
    }
}
