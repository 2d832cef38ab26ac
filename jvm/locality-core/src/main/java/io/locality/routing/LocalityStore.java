package io.locality.routing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.OptionalInt;

/**
 * A locality configuration store opened read-only: the version {@code CURRENT} names, or any other,
 * loaded whole and verified.
 *
 * <p>The layout is the one the Python {@code ConfigStore} writes ({@code CURRENT},
 * {@code versions/000007/manifest.json}, {@code versions/000007/configuration/...}). A version is read
 * the way the Python {@code Router} reads it: every file of its configuration is checked against the
 * size and SHA-256 its manifest recorded before anything is parsed, so a truncated or altered version
 * is refused by name and never served. Like the Python reader it takes no lock: the writer publishes a
 * version whole and then replaces {@code CURRENT}.
 */
public final class LocalityStore {
    private static final String CONFIGURATION = "configuration";
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path root;

    public LocalityStore(Path root) {
        this.root = root;
    }

    public Path root() {
        return root;
    }

    /** The version {@code CURRENT} names; empty for a store that has published nothing yet. */
    public OptionalInt currentVersion() throws IOException {
        Path current = root.resolve("CURRENT");
        String text;
        try {
            text = Files.readString(current, StandardCharsets.UTF_8).strip();
        } catch (NoSuchFileException e) {
            if (!Files.isDirectory(root)) {
                throw new FileNotFoundException("the store " + root + " does not exist or is not a directory");
            }
            return OptionalInt.empty();
        }
        if (text.isEmpty() || !text.chars().allMatch(Character::isDigit) || text.length() > 9) {
            throw new DamagedStoreException(current + " is damaged: '" + text.substring(0, Math.min(40, text.length()))
                    + "' is not a version number (`locality rollback --store " + root + " --to N` repairs it)");
        }
        return OptionalInt.of(Integer.parseInt(text));
    }

    /** The current version, verified. */
    public RoutingConfiguration load() throws IOException {
        OptionalInt current = currentVersion();
        if (current.isEmpty()) {
            throw new FileNotFoundException("the store " + root + " has no published version yet");
        }
        return load(current.getAsInt());
    }

    /**
     * Version {@code version}, verified against its manifest.
     *
     * @throws DamagedStoreException naming the file that is missing, truncated, altered or malformed
     */
    public RoutingConfiguration load(int version) throws IOException {
        Path directory = versionDirectory(version);
        if (!Files.isDirectory(directory)) {
            throw new FileNotFoundException("the store " + root + " has no version " + version + " (" + directory + ")");
        }
        Manifest manifest = Manifest.read(version, directory, JSON);
        manifest.verify(CONFIGURATION);
        Path file = directory.resolve(CONFIGURATION).resolve("configuration.json");
        try {
            return RoutingConfiguration.fromJson(version, JSON.readTree(file.toFile()));
        } catch (IllegalArgumentException e) {
            throw new DamagedStoreException("version " + version + " of the store is damaged: " + file + ": "
                    + e.getMessage());
        } catch (IOException e) {
            throw new DamagedStoreException("version " + version + " of the store is damaged: cannot read " + file
                    + ": " + e.getMessage());
        }
    }

    /**
     * The store's switch schedule (empty when it has none): which version is in force from which point.
     *
     * @throws DamagedStoreException when {@code SCHEDULE} exists but cannot be read
     */
    public SwitchSchedule schedule() throws IOException {
        Path file = root.resolve("SCHEDULE");
        if (!Files.exists(file)) {
            return SwitchSchedule.empty();
        }
        try {
            return SwitchSchedule.fromJson(JSON.readTree(file.toFile()));
        } catch (IOException | IllegalArgumentException e) {
            throw new DamagedStoreException("the store's schedule " + file + " is damaged: " + e.getMessage());
        }
    }

    /** The manifest of {@code version} (fingerprint, created, summary), unverified. */
    public JsonNode manifest(int version) throws IOException {
        return Manifest.read(version, versionDirectory(version), JSON).document();
    }

    private Path versionDirectory(int version) {
        return root.resolve("versions").resolve(String.format("%06d", version));
    }
}
