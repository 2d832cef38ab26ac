package io.locality.storage;

import io.locality.routing.DamagedStoreException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Optional;

/**
 * A store in a local directory (or a shared mount): each object is the file of its name under the root.
 *
 * <p>A file is opened only once it is known to be a regular file, so a FIFO, a device or a directory
 * where a file belongs is named as damage instead of blocking the reader forever or reading an endless
 * stream; the read itself stops one byte past its limit ({@link BoundedRead}).
 */
public final class LocalDirectory implements ObjectStore {
    private final Path root;

    public LocalDirectory(Path root) {
        this.root = root;
    }

    @Override
    public Optional<byte[]> read(String name, long limit) throws IOException {
        Path file = root.resolve(name);
        BasicFileAttributes info;
        try {
            info = Files.readAttributes(file, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
            return absent();
        } catch (FileSystemException e) {
            throw unreadable(file, e);
        }
        if (!info.isRegularFile()) {
            throw new DamagedStoreException(file + " is damaged: it is "
                    + (info.isDirectory() ? "a directory" : "a FIFO, a device or a socket") + ", not a file");
        }
        try (InputStream in = Files.newInputStream(file)) {
            return Optional.of(BoundedRead.bytes(in, info.size(), limit, file.toString()));
        } catch (NoSuchFileException e) {
            return absent(); // removed between the look and the read: as if it never was
        } catch (FileSystemException e) {
            throw unreadable(file, e);
        }
    }

    @Override
    public String locate(String name) {
        return root.resolve(name).toString();
    }

    @Override
    public String uri() {
        return root.toString();
    }

    /** Absent from a directory that exists; a store whose directory is missing is no store at all. */
    private Optional<byte[]> absent() throws FileNotFoundException {
        if (!Files.isDirectory(root)) {
            throw new FileNotFoundException("the store " + root + " does not exist or is not a directory");
        }
        return Optional.empty();
    }

    private static IOException unreadable(Path file, FileSystemException e) {
        String reason = e instanceof AccessDeniedException ? "permission denied" : e.getReason();
        return new IOException("cannot read " + file + ": " + (reason == null ? e.getClass().getSimpleName() : reason),
                e);
    }
}
