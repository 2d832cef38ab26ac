package io.locality.hashing;

import java.util.ServiceLoader;
import java.util.TreeSet;

/** The fallback hash of a spec, from the providers on the classpath. */
public final class FallbackHashes {
    private FallbackHashes() {}

    /**
     * The hash of {@code spec}'s engine.
     *
     * @throws IllegalStateException when no provider for that engine is on the classpath; the message
     *     names the engines that are
     */
    public static FallbackHash of(FallbackSpec spec) {
        TreeSet<String> found = new TreeSet<>();
        for (FallbackHashProvider provider : ServiceLoader.load(FallbackHashProvider.class)) {
            if (provider.engine().equals(spec.engine())) {
                return provider.create(spec);
            }
            found.add(provider.engine());
        }
        throw new IllegalStateException("no fallback hash for engine '" + spec.engine() + "' on the classpath "
                + "(found: " + found + "); add the locality module of that engine (locality-kafka-streams, "
                + "locality-flink, locality-storm)");
    }
}
