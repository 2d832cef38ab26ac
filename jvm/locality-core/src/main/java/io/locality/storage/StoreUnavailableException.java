package io.locality.storage;

import java.io.IOException;

/**
 * The store cannot be reached now: its server refused the connection, did not answer in time, or answered
 * with a server error (5xx). An outage, not damage: the store's content is what it was, and a reader that
 * already serves a version keeps serving it, reads again later, and takes the store's news once it answers
 * (docs/store-protocol.md, "Reading"). Damage ({@link io.locality.storage.StoreDamagedException}), a
 * missing store ({@link java.io.FileNotFoundException}) and a refusal (no credentials, access denied) are
 * other exceptions: waiting does not mend them.
 */
public class StoreUnavailableException extends IOException {
    private static final long serialVersionUID = 1L;

    public StoreUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }

    public StoreUnavailableException(String message) {
        super(message);
    }
}
