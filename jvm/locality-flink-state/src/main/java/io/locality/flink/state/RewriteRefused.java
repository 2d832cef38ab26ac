package io.locality.flink.state;

/** A savepoint a rewrite will not write: taken on another version, or holding state it cannot move. */
final class RewriteRefused extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    RewriteRefused(String message) {
        super(message);
    }
}
