package io.locality.store;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.locality.routing.Json;
import io.locality.routing.RoutingConfiguration;
import io.locality.schedule.SwitchSchedule;
import io.locality.storage.LocalDirectory;
import io.locality.storage.ObjectStore;
import io.locality.storage.StoreDamagedException;
import io.locality.storage.StoreUri;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * A locality configuration store opened read-only: the version {@code CURRENT} names, or any other,
 * loaded whole and verified.
 *
 * <p>The store is a local directory or a prefix of an S3 bucket ({@link #open(String)}), laid out as the
 * Python {@code ConfigStore} writes it ({@code CURRENT}, {@code versions/000007/manifest.json},
 * {@code versions/000007/configuration/...}) and read as docs/store-protocol.md says a reader reads it:
 * every file of a version's configuration is read once and checked against the size and SHA-256 its
 * manifest recorded, and the tables are parsed from the very bytes that were checked, so a truncated or
 * altered version is refused by name and never served. The Parquet tables are checked too, though Java
 * routes from {@code configuration.json}: a version whose tables Python refuses is not served here either.
 * Like the Python reader it takes no lease: a writer publishes a version whole, manifest last, and then
 * replaces {@code CURRENT}.
 *
 * <p>Every read throws {@link io.locality.storage.StoreUnavailableException} when the store cannot be reached
 * (an outage): the readers built on it keep what they have then ({@link ScheduleFollower},
 * {@link LastGoodVersions}, {@link StoreRetry}), as docs/store-protocol.md asks.
 */
public final class ConfigStore {
    private static final String CONFIGURATION = "configuration";
    private static final String CONFIGURATION_JSON = CONFIGURATION + "/configuration.json";
    private static final String SCHEDULE = "SCHEDULE";
    /** The bytes {@code SCHEDULE} may hold: a few dozen per switch. */
    private static final long SCHEDULE_LIMIT = 64L << 20;
    private static final ObjectMapper JSON = Json.MAPPER;

    private final ObjectStore objects;

    /** The store in the local directory {@code root}. */
    public ConfigStore(Path root) {
        this(new LocalDirectory(root));
    }

    /** The store whose objects {@code objects} reads. */
    public ConfigStore(ObjectStore objects) {
        this.objects = objects;
    }

    /**
     * The store {@code uri} names: a path or {@code file://} URI, or {@code s3://bucket/prefix}
     * ({@code s3a://} alike), read with the AWS SDK's standard configuration ({@link StoreUri}). Nothing is
     * read yet: a missing store is found by the first load.
     *
     * @throws IllegalArgumentException for any other scheme, naming those served
     */
    public static ConfigStore open(String uri) {
        return new ConfigStore(StoreUri.open(uri));
    }

    /** The store's root as {@link #open(String)} takes it again: a path, or {@code s3://bucket/prefix}. */
    public String uri() {
        return objects.uri();
    }

    /**
     * The version {@code CURRENT} names; empty for a store that has published nothing yet.
     *
     * @throws StoreDamagedException naming {@code CURRENT} when it is not a version number (and a writer line)
     * @throws FileNotFoundException when the store does not exist (its directory, its bucket)
     */
    public OptionalLong currentVersion() throws IOException {
        return CurrentFile.read(objects);
    }

    /** The current version, verified. */
    public RoutingConfiguration load() throws IOException {
        OptionalLong current = currentVersion();
        if (current.isEmpty()) {
            throw new FileNotFoundException("the store " + uri() + " has no published version yet");
        }
        long version = current.getAsLong();
        Optional<Manifest> manifest = Manifest.read(objects, version, JSON);
        if (manifest.isEmpty()) {
            throw new StoreDamagedException(objects.locate(CurrentFile.NAME) + " names version " + version
                    + ", which the store does not have (`locality rollback --store " + uri() + " --to N` repairs it)");
        }
        return load(version, manifest.get());
    }

    /**
     * Version {@code version}, verified against its manifest.
     *
     * @throws FileNotFoundException when the store has no such version
     * @throws StoreDamagedException naming the file that is missing, truncated, altered or malformed
     */
    public RoutingConfiguration load(long version) throws IOException {
        return load(version, manifestOf(version));
    }

    /**
     * The store's switch schedule (empty when it has none): which version is in force from which point.
     * The {@code writer} token a writer leaves in it fences other writers; readers need only the entries.
     *
     * @throws StoreDamagedException when {@code SCHEDULE} exists but cannot be read
     */
    public SwitchSchedule schedule() throws IOException {
        Optional<byte[]> data = objects.read(SCHEDULE, SCHEDULE_LIMIT);
        if (data.isEmpty()) {
            return SwitchSchedule.empty();
        }
        try {
            return SwitchSchedule.fromJson(JSON.readTree(data.get()));
        } catch (IOException | IllegalArgumentException e) {
            throw new StoreDamagedException("the store's schedule " + objects.locate(SCHEDULE) + " is damaged: "
                    + e.getMessage());
        }
    }

    /**
     * The manifest of {@code version} (fingerprint, created, summary), its shape checked, its files not.
     *
     * @throws FileNotFoundException when the store has no such version
     */
    public JsonNode manifest(long version) throws IOException {
        return manifestOf(version).document();
    }

    private Manifest manifestOf(long version) throws IOException {
        Optional<Manifest> manifest = Manifest.read(objects, version, JSON);
        if (manifest.isEmpty()) {
            throw new FileNotFoundException("the store " + uri() + " has no version " + version + " (no "
                    + objects.locate(Manifest.object(version)) + ")");
        }
        return manifest.get();
    }

    private RoutingConfiguration load(long version, Manifest manifest) throws IOException {
        byte[] document = null;
        for (String file : manifest.files(CONFIGURATION)) {
            byte[] checked = manifest.read(file);
            if (file.equals(CONFIGURATION_JSON)) {
                document = checked;
            }
        }
        if (document == null) { // refused by name: the manifest records no checksum of it
            document = manifest.read(CONFIGURATION_JSON);
        }
        String where = objects.locate(Manifest.directory(version) + "/" + CONFIGURATION_JSON);
        try {
            return RoutingConfiguration.fromJson(version, JSON.readTree(document));
        } catch (IllegalArgumentException e) {
            throw new StoreDamagedException("version " + version + " of the store is damaged: " + where + ": "
                    + e.getMessage());
        } catch (IOException e) {
            throw new StoreDamagedException("version " + version + " of the store is damaged: " + where
                    + " is not JSON: " + e.getMessage());
        }
    }
}
