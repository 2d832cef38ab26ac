package io.locality.store;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.storage.ObjectStore;
import io.locality.storage.ObjectTooLargeException;
import io.locality.storage.StoreDamagedException;
import java.io.IOException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * The manifest of one store version: the size and SHA-256 of every file the version holds.
 *
 * <p>A version is complete once its manifest exists (it is written last), and its files are served only as
 * the manifest recorded them: {@link #read(String)} reads a file once, checks it, and hands back the bytes
 * it checked, so what is parsed is what was verified, even when the store changes between two reads (an
 * S3 object can be replaced at any time). The manifest itself is checked as the Python reader checks it:
 * a JSON object of at most 64 MiB, its {@code version} the version's number, its {@code checksums} a size
 * and a 64-hex-digit SHA-256 for files inside the version.
 */
final class Manifest {
    /** The bytes a manifest may hold: its checksums grow with the files of a version, a few hundred bytes each. */
    static final long LIMIT = 64L << 20;
    private static final Pattern SHA256 = Pattern.compile("[0-9a-f]{64}");
    /** The optional fields a reader checks, and the shape each must have when present. */
    private static final Map<String, Shape> FIELDS = Map.of(
            "created", new Shape("a string", JsonNode::isTextual),
            "fingerprint", new Shape("a string", JsonNode::isTextual),
            "job", new Shape("a string", JsonNode::isTextual),
            "files", new Shape("a list of names", v -> v.isArray() && allText(v)),
            "summary", new Shape("a JSON object", JsonNode::isObject));

    private final ObjectStore objects;
    private final long version;
    private final JsonNode document;
    private final Map<String, Checksum> checksums;

    private Manifest(ObjectStore objects, long version, JsonNode document, Map<String, Checksum> checksums) {
        this.objects = objects;
        this.version = version;
        this.document = document;
        this.checksums = checksums;
    }

    /**
     * The manifest of {@code version}, checked; empty when the store has no such version.
     *
     * @throws StoreDamagedException naming the manifest when it is too large, not JSON or of another shape
     */
    static Optional<Manifest> read(ObjectStore objects, long version, ObjectMapper json) throws IOException {
        String name = object(version);
        Optional<byte[]> data = objects.read(name, LIMIT);
        if (data.isEmpty()) {
            return Optional.empty();
        }
        String what = "the manifest of version " + version + " (" + objects.locate(name) + ") is damaged: ";
        JsonNode document;
        try {
            document = json.readTree(data.get());
        } catch (IOException e) {
            throw new StoreDamagedException(what + "it is not JSON: " + e.getMessage());
        }
        if (document == null || !document.isObject()) {
            throw new StoreDamagedException(what + "it is not a JSON object");
        }
        JsonNode number = document.path("version");
        if (!number.isIntegralNumber() || !number.canConvertToLong() || number.asLong() != version) {
            throw new StoreDamagedException(what + "it says version " + number + ", in the directory of version "
                    + version);
        }
        checkFields(document, what);
        return Optional.of(new Manifest(objects, version, document, checksums(document.path("checksums"), what)));
    }

    /** The optional fields a reader relies on, of the shapes Python's reader requires (store.py's manifest fields). */
    private static void checkFields(JsonNode document, String what) throws StoreDamagedException {
        for (Map.Entry<String, Shape> field : FIELDS.entrySet()) {
            JsonNode value = document.get(field.getKey());
            if (value != null && !field.getValue().test().test(value)) {
                throw new StoreDamagedException(what + "its field '" + field.getKey() + "' must be "
                        + field.getValue().name() + "; got " + shorter(value.toString()));
            }
        }
    }

    private static boolean allText(JsonNode array) {
        for (JsonNode item : array) {
            if (!item.isTextual()) {
                return false;
            }
        }
        return true;
    }

    /** The manifest as it was written (fingerprint, created, summary...). */
    public JsonNode document() {
        return document;
    }

    /** The files it records under {@code folder}, in its order. */
    List<String> files(String folder) {
        return checksums.keySet().stream().filter(name -> name.startsWith(folder + "/")).toList();
    }

    /**
     * The bytes of file {@code name} of the version, read once and checked against the size and SHA-256
     * recorded for it.
     *
     * @throws StoreDamagedException naming the file when the manifest records no checksum of it, or it is
     *     missing, of another size or of another content
     */
    byte[] read(String name) throws IOException {
        String prefix = "version " + version + " of the store is damaged: ";
        String object = directory(version) + "/" + name;
        String where = objects.locate(object);
        Checksum expected = checksums.get(name);
        if (expected == null) {
            throw new StoreDamagedException(prefix + "its manifest records no checksum of " + where);
        }
        byte[] data;
        try {
            data = objects.read(object, expected.size()).orElseThrow(
                    () -> new StoreDamagedException(prefix + "cannot read " + where + ": it is missing"));
        } catch (ObjectTooLargeException e) {
            throw new StoreDamagedException(String.format("%s%s has %s bytes, its manifest recorded %,d (truncated or "
                    + "rewritten)", prefix, where, e.size().isPresent() ? String.format("%,d", e.size().getAsLong())
                            : "more", expected.size()));
        }
        if (data.length != expected.size()) {
            throw new StoreDamagedException(String.format("%s%s has %,d bytes, its manifest recorded %,d (truncated or "
                    + "rewritten)", prefix, where, data.length, expected.size()));
        }
        if (!HexFormat.of().formatHex(sha256().digest(data)).equals(expected.sha256())) {
            throw new StoreDamagedException(prefix + where + " does not match its manifest's SHA-256");
        }
        return data;
    }

    /** The name of the manifest of {@code version} under the store's root. */
    static String object(long version) {
        return directory(version) + "/manifest.json";
    }

    /** Where version {@code version}'s objects are, under the store's root. */
    static String directory(long version) {
        return String.format("versions/%06d", version);
    }

    private static Map<String, Checksum> checksums(JsonNode checksums, String what) throws StoreDamagedException {
        Map<String, Checksum> checked = new LinkedHashMap<>();
        if (checksums.isMissingNode()) {
            return checked;
        }
        if (!checksums.isObject()) {
            throw new StoreDamagedException(what + "its checksums are not a JSON object");
        }
        for (Iterator<Map.Entry<String, JsonNode>> files = checksums.fields(); files.hasNext(); ) {
            Map.Entry<String, JsonNode> file = files.next();
            String name = file.getKey();
            List<String> parts = Arrays.asList(name.split("/", -1));
            if (name.startsWith("/") || parts.contains("..") || parts.contains("")) {
                throw new StoreDamagedException(what + "its checksums name '" + name + "', a file outside the version");
            }
            JsonNode size = file.getValue().path("size");
            JsonNode sha = file.getValue().path("sha256");
            if (!size.isIntegralNumber() || !size.canConvertToLong() || size.asLong() < 0 || !sha.isTextual()
                    || !SHA256.matcher(sha.asText()).matches()) {
                throw new StoreDamagedException(what + "its checksum of '" + name + "' must be a size and a SHA-256; "
                        + "got " + shorter(file.getValue().toString()));
            }
            checked.put(name, new Checksum(size.asLong(), sha.asText()));
        }
        return checked;
    }

    private static String shorter(String text) {
        return text.length() <= 80 ? text : text.substring(0, 80) + "...";
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java platform has SHA-256", e);
        }
    }

    /** What a field of the manifest must be: its description for messages, and the test. */
    private record Shape(String name, Predicate<JsonNode> test) {}

    /** What the manifest recorded of one file. */
    private record Checksum(long size, String sha256) {}
}
