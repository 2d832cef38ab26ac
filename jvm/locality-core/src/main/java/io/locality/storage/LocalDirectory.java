package io.locality.storage;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Optional;
import java.util.UUID;

/**
 * A store in a local directory (or a shared mount): each object is the file of its name under the root.
 *
 * <p>A file is opened only once it is known to be a regular file, so a FIFO, a device or a directory
 * where a file belongs is named as damage instead of blocking the reader forever or reading an endless
 * stream; the read itself stops one byte past its limit ({@link BoundedRead}).
 *
 * <p>{@link #put} writes as the Python store ({@code locality/storage/local.py}) does: the bytes go to a file
 * beside the target named {@code .tmp-<host>-<pid>-<random>} (a name every reader skips, and which the Python
 * side sweeps once its writer is dead), which is fsynced, renamed over the target ({@code rename(2)}: atomic
 * on POSIX file systems) and made durable by an fsync of its directory. The folders on the way, and the store's
 * root, are created by the first write.
 */
public final class LocalDirectory implements ObjectStore {
    /** The names of files being written: readers (Java's and Python's) skip them. */
    static final String TMP_PREFIX = ".tmp-";
    /** This host's name as Python's {@code socket.gethostname()} gives it, for the names of files being written. */
    private static final String HOST = hostName();

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
            throw failure("read", file, e);
        }
        if (!info.isRegularFile()) {
            throw new StoreDamagedException(file + " is damaged: it is "
                    + (info.isDirectory() ? "a directory" : "a FIFO, a device or a socket") + ", not a file");
        }
        try (InputStream in = Files.newInputStream(file)) {
            return Optional.of(BoundedRead.bytes(in, info.size(), limit, file.toString()));
        } catch (NoSuchFileException e) {
            return absent(); // removed between the look and the read: as if it never was
        } catch (FileSystemException e) {
            throw failure("read", file, e);
        }
    }

    @Override
    public void put(String name, byte[] data) throws IOException {
        Path file = root.resolve(name);
        Path folder = file.getParent();
        try {
            Files.createDirectories(folder);
        } catch (FileSystemException e) { // a file where a folder belongs: exists (EEXIST) or not a directory
            Path parent = fileParent(folder);
            if (parent != null) {
                throw new StoreDamagedException(file + " cannot be written: a parent of it is a file, not a "
                        + "directory (" + parent + ")");
            }
            throw failure("write", file, e);
        }
        Path aside = folder.resolve(TMP_PREFIX + HOST + "-" + ProcessHandle.current().pid() + "-"
                + UUID.randomUUID().toString().replace("-", ""));
        try {
            try (FileChannel out = FileChannel.open(aside, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ByteBuffer bytes = ByteBuffer.wrap(data);
                while (bytes.hasRemaining()) {
                    out.write(bytes);
                }
                out.force(true);
            }
            Files.move(aside, file, StandardCopyOption.ATOMIC_MOVE); // rename(2) replaces a file of that name
            try (FileChannel directory = FileChannel.open(folder, StandardOpenOption.READ)) {
                directory.force(true); // the rename is durable once its directory is
            }
        } catch (IOException e) {
            if (Files.isDirectory(file)) {
                throw new StoreDamagedException(file + " is damaged: it is a directory, not a file");
            }
            throw e instanceof FileSystemException fs ? failure("write", file, fs)
                    : new IOException("cannot write " + file + ": " + e.getMessage(), e);
        } finally {
            Files.deleteIfExists(aside);
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

    /** The nearest of {@code folder} and its parents that exists and is not a directory, or null. */
    private static Path fileParent(Path folder) {
        for (Path path = folder; path != null; path = path.getParent()) {
            if (Files.exists(path)) {
                return Files.isDirectory(path) ? null : path;
            }
        }
        return null;
    }

    /** The kernel's host name (what {@code gethostname(2)} returns), without a DNS lookup; "java" if unknown. */
    private static String hostName() {
        try {
            String name = Files.readString(Path.of("/proc/sys/kernel/hostname")).strip();
            return name.isEmpty() || name.contains("/") ? "java" : name;
        } catch (IOException | RuntimeException e) {
            String variable = System.getenv("HOSTNAME");
            return variable == null || variable.isBlank() || variable.contains("/") ? "java" : variable.strip();
        }
    }

    /** Why {@code file} cannot be read or written ({@code verb}), in the words of the system. */
    private static IOException failure(String verb, Path file, FileSystemException e) {
        String reason = e instanceof AccessDeniedException ? "permission denied" : e.getReason();
        return new IOException("cannot " + verb + " " + file + ": "
                + (reason == null ? e.getClass().getSimpleName() : reason), e);
    }
}
