package io.locality.routing;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The one JSON reader of the store's documents: JSON as Python's {@code json.loads} takes it, one document
 * and nothing after it, so that Java refuses what Python refuses. Public because the store package reads
 * its documents (pointer, manifests, schedule) with it too.
 */
public final class Json {
    /** Thread-safe once configured, as Jackson's mappers are: read with it, configure nothing on it. */
    public static final ObjectMapper MAPPER = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    private Json() {}
}
