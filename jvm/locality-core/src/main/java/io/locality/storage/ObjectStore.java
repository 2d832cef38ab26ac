package io.locality.storage;

import java.io.IOException;
import java.util.Optional;

/**
 * The objects of a store by name under its root: a local directory ({@link LocalDirectory}) or a prefix of
 * an S3 bucket ({@link S3Prefix}), read the same way (docs/store-protocol.md). {@link StoreUri#open} gives
 * the one a URI names.
 *
 * <p>A name is relative to the root ({@code CURRENT}, {@code versions/000007/manifest.json}). Readers need
 * three answers from a store and no more: the bytes of an object, that it is absent, or that it cannot be
 * read; so that is all this interface says. Every read is bounded, so a damaged store (an endless file, a
 * FIFO where a file belongs) is refused by name instead of exhausting the heap or blocking a job.
 *
 * <p>The engines write one kind of object, the sketches of what they route ({@code sketches/}, written by
 * {@link io.locality.sketch.SketchPublisher}), with a plain {@link #put}: those names never meet the store's
 * own files, so a put takes no lease (docs/store-protocol.md, "Sketches the engines publish"). The versions,
 * {@code CURRENT} and everything else are written by the Python side only.
 */
public interface ObjectStore {
    /**
     * The whole object {@code name}, at most {@code limit} bytes; empty when there is no such object.
     *
     * @throws ObjectTooLargeException when it holds more than {@code limit} bytes
     * @throws io.locality.storage.StoreDamagedException when something else than a file stands where the
     *     object belongs (a directory, a FIFO, a device)
     * @throws java.io.FileNotFoundException when the store itself is missing (its directory, its bucket)
     * @throws StoreUnavailableException when the store cannot be reached now (refused, timed out, a server
     *     error): an outage, which a reader rides out by keeping what it has
     * @throws IOException when it cannot be read otherwise (permissions, no credentials); the message names it
     */
    Optional<byte[]> read(String name, long limit) throws IOException;

    /**
     * Writes {@code data} as the whole object {@code name}, replacing any object of that name: a reader sees the
     * old object or the new one, never a part of one (a directory writes aside and renames, S3 puts atomically).
     *
     * @throws io.locality.storage.StoreDamagedException when something else than a file stands where the object
     *     belongs (a directory), or a file where one of its folders belongs
     * @throws java.io.FileNotFoundException when the store itself is missing (its bucket; a directory is created)
     * @throws StoreUnavailableException when the store cannot be reached now (refused, timed out, a server
     *     error): an outage
     * @throws IOException when it cannot be written otherwise (permissions, a full disk, no credentials)
     */
    void put(String name, byte[] data) throws IOException;

    /** How messages name object {@code name}: its path, or its {@code s3://} URI. */
    String locate(String name);

    /** The store's root as {@link StoreUri#open} takes it again: a path, or {@code s3://bucket/prefix}. */
    String uri();
}
