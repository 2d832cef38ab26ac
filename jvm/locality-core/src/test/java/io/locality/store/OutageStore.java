package io.locality.store;

import io.locality.storage.LocalDirectory;
import io.locality.storage.ObjectStore;
import io.locality.storage.StoreUnavailableException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A store directory whose server the test can stop: while {@link #down}, every read and write fails with
 * {@link StoreUnavailableException}, as {@code S3Prefix} fails when its server does not answer.
 */
public final class OutageStore implements ObjectStore {
    private final LocalDirectory objects;
    /** Reads tried, answered or not. */
    public final AtomicInteger reads = new AtomicInteger();
    public volatile boolean down;

    public OutageStore(Path root) {
        this.objects = new LocalDirectory(root);
    }

    @Override
    public Optional<byte[]> read(String name, long limit) throws IOException {
        reads.incrementAndGet();
        if (down) {
            throw new StoreUnavailableException("cannot read " + locate(name) + ": Connection refused (the test "
                    + "stopped the store)");
        }
        return objects.read(name, limit);
    }

    @Override
    public void put(String name, byte[] data) throws IOException {
        if (down) {
            throw new StoreUnavailableException("cannot write " + locate(name) + ": Connection refused (the test "
                    + "stopped the store)");
        }
        objects.put(name, data);
    }

    @Override
    public String locate(String name) {
        return objects.locate(name);
    }

    @Override
    public String uri() {
        return objects.uri();
    }
}
