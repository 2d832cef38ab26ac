package io.locality.storage;

import java.io.IOException;

/**
 * A store, or a version of it, that cannot be served: a file is missing, truncated, altered or unreadable.
 *
 * <p>The message names the file and what is wrong with it, as the Python {@code Router} does. A job
 * that gets this exception keeps the tables it already serves.
 */
public class StoreDamagedException extends IOException {
    private static final long serialVersionUID = 1L;

    public StoreDamagedException(String message) {
        super(message);
    }
}
