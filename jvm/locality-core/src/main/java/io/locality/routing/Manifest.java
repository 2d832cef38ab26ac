package io.locality.routing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.Map;

/**
 * The manifest of one store version: the size and SHA-256 of every file the version holds.
 *
 * <p>{@link #verify} checks the files under a folder of the version against it, exactly as the Python
 * {@code StoredVersion.verify} does, so that a truncated or altered file is refused by name before a
 * byte of it is served. Versions published before manifests recorded checksums pass unchecked.
 */
public final class Manifest {
    private static final String FILE = "manifest.json";

    private final int version;
    private final Path directory;
    private final JsonNode document;

    private Manifest(int version, Path directory, JsonNode document) {
        this.version = version;
        this.directory = directory;
        this.document = document;
    }

    /** Reads {@code manifest.json} of the version in {@code directory}. */
    public static Manifest read(int version, Path directory, ObjectMapper json) throws DamagedStoreException {
        Path file = directory.resolve(FILE);
        JsonNode document;
        try {
            document = json.readTree(file.toFile());
        } catch (NoSuchFileException e) {
            throw new DamagedStoreException("version " + version + " of the store has no manifest: " + file);
        } catch (IOException e) {
            throw new DamagedStoreException("the manifest of version " + version + " (" + file + ") is damaged: "
                    + e.getMessage());
        }
        if (document == null || !document.isObject()) {
            throw new DamagedStoreException("the manifest of version " + version + " (" + file
                    + ") is not a JSON object");
        }
        return new Manifest(version, directory, document);
    }

    /** The manifest as it was written (fingerprint, created, summary...). */
    public JsonNode document() {
        return document;
    }

    /**
     * Checks every file the manifest records under {@code folder} (all files for an empty folder)
     * against its recorded size and SHA-256.
     *
     * @throws DamagedStoreException naming the first file that is missing, of another size or of
     *     another content
     */
    public void verify(String folder) throws DamagedStoreException {
        JsonNode checksums = document.path("checksums");
        Iterator<Map.Entry<String, JsonNode>> files = checksums.fields();
        while (files.hasNext()) {
            Map.Entry<String, JsonNode> file = files.next();
            if (folder.isEmpty() || file.getKey().startsWith(folder + "/")) {
                verifyFile(file.getKey(), file.getValue());
            }
        }
    }

    private void verifyFile(String name, JsonNode expected) throws DamagedStoreException {
        Path path = directory.resolve(name);
        String prefix = "version " + version + " of the store is damaged: ";
        if (!expected.path("size").canConvertToLong() || !expected.path("sha256").isTextual()) {
            throw new DamagedStoreException(prefix + "its manifest's entry for " + name + " has no size and sha256");
        }
        long size;
        String sha256;
        try (InputStream in = new DigestInputStream(Files.newInputStream(path), sha256Digest())) {
            size = in.transferTo(OutputStream.nullOutputStream());
            sha256 = HexFormat.of().formatHex(((DigestInputStream) in).getMessageDigest().digest());
        } catch (IOException e) {
            throw new DamagedStoreException(prefix + "cannot read " + path + ": " + e.getMessage());
        }
        if (size != expected.get("size").asLong()) {
            throw new DamagedStoreException(String.format("%s%s has %,d bytes, its manifest recorded %,d "
                    + "(truncated or rewritten)", prefix, path, size, expected.get("size").asLong()));
        }
        if (!sha256.equals(expected.get("sha256").asText())) {
            throw new DamagedStoreException(prefix + path + " does not match its manifest's SHA-256");
        }
    }

    private static MessageDigest sha256Digest() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java platform has SHA-256", e);
        }
    }
}
