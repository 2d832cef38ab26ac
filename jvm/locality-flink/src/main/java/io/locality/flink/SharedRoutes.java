package io.locality.flink;

import java.io.IOException;
import java.io.InvalidObjectException;
import java.io.ObjectStreamException;
import java.io.Serializable;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The serialized form of {@link FlinkRoutingKeys}: their compact image and its SHA-256, read back into
 * one copy per TaskManager ({@link SharedCopies}).
 *
 * <p>Flink deserializes a job's key selectors once per task: the keyed operator's and, in the upstream
 * tasks, the partitioner's. Plain serialization gave each task a copy of every route, and at 300,000
 * entries an operator a TaskManager of six slots ran out of heap. Tasks reading the same image now get
 * the one instance already read.
 */
final class SharedRoutes implements Serializable {
    private static final long serialVersionUID = 1L;

    private final String digest;
    private final byte[] image;

    private SharedRoutes(String digest, byte[] image) {
        this.digest = digest;
        this.image = image;
    }

    static SharedRoutes of(FlinkRoutingKeys routes) {
        byte[] image = routes.image();
        return new SharedRoutes(sha256(image), image);
    }

    private Object readResolve() throws ObjectStreamException {
        try {
            return SharedCopies.of("routes " + digest, () -> FlinkRoutingKeys.fromImage(image, this));
        } catch (IOException | RuntimeException e) {
            InvalidObjectException invalid = new InvalidObjectException("unreadable routes: " + e);
            invalid.initCause(e);
            throw invalid;
        }
    }

    private static String sha256(byte[] data) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java platform has SHA-256", e);
        }
    }
}
