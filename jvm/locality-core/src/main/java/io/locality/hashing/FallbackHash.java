package io.locality.hashing;

/** The instance an engine's own hash gives a key that has no table entry. */
@FunctionalInterface
public interface FallbackHash {

    /**
     * Instance of {@code key}, in {@code 0 .. numInstances - 1}.
     *
     * @param key the key as the job holds it (a {@code String}, {@code Long} or {@code Integer})
     */
    int instanceOf(Object key);
}
