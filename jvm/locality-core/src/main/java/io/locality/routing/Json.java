package io.locality.routing;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The one JSON reader of the store's documents: JSON as Python's {@code json.loads} takes it, one document
 * and nothing after it, so that Java refuses what Python refuses.
 */
final class Json {
    /** Thread-safe once configured, as Jackson's mappers are. */
    static final ObjectMapper MAPPER = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    private Json() {}
}
