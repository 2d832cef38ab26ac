package io.locality.hashing;

/**
 * Makes the fallback hash of one engine; found through {@link java.util.ServiceLoader}.
 *
 * <p>Each engine module registers its provider in
 * {@code META-INF/services/io.locality.hashing.FallbackHashProvider} and computes the hash with the
 * engine's own code (Kafka's murmur2 partitioner, Flink's key groups, Storm's fields grouping), so a
 * key without an entry goes exactly where the engine would have sent it.
 */
public interface FallbackHashProvider {

    /** The engine name a table's header uses ({@code "kafka"}, {@code "flink"}, {@code "ring"}...). */
    String engine();

    /** The hash a table with this fallback spec uses. */
    FallbackHash create(FallbackSpec spec);
}
