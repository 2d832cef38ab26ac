package io.locality.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.locality.hashing.ConsistentHashRing;
import io.locality.routing.RoutingConfiguration;
import io.locality.routing.RoutingTable;
import io.locality.storage.StoreDamagedException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.OptionalInt;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A store laid out as the Python {@code ConfigStore} writes it, read, routed and refused when damaged. */
class ConfigStoreTest {
    private static final String CONFIGURATION = TestStores.CONFIGURATION;

    @TempDir
    Path store;

    @BeforeEach
    void publishVersionOne() throws Exception {
        publish(1, CONFIGURATION);
    }

    @Test
    void routesEntriesSplitsAndTheFallbackOfTheCurrentVersion() throws IOException {
        RoutingConfiguration configuration = new ConfigStore(store).load();
        assertEquals(1, configuration.version());
        assertEquals(3, configuration.route("tag", "jobs"));
        assertEquals(0, configuration.route("tag", "é🙂"));
        assertEquals(2, configuration.route("user", 42L));
        assertEquals(2, configuration.route("user", 42), "an Integer key finds the entry of its Long value");
        assertEquals(1, configuration.route("user", -7L));
        RoutingTable tags = configuration.table("tag");
        assertEquals(1, tags.route("hot"), "a split key without a server goes home");
        assertEquals(3, tags.route("hot", 1));
        assertEquals(new ConsistentHashRing(4, 128).instanceOf("paris"), tags.route("paris"));
        assertEquals(OptionalInt.empty(), tags.entry("paris"));
        assertEquals("s1", configuration.topology().serverOf("tag", 3));
    }

    @Test
    void truncatedTableIsRefusedByName() throws IOException {
        Path table = version(1).resolve("configuration/tables/00.parquet");
        Files.write(table, new byte[] {1, 2});
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load());
        assertTrue(e.getMessage().contains(table.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("truncated or rewritten"), e.getMessage());
    }

    @Test
    void alteredConfigurationIsRefusedByName() throws IOException {
        Path file = version(1).resolve("configuration/configuration.json");
        Files.writeString(file, Files.readString(file).replace("\"jobs\", 3", "\"jobs\", 2"));
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load());
        assertTrue(e.getMessage().contains(file + " does not match its manifest's SHA-256"), e.getMessage());
    }

    @Test
    void missingFileAndDamagedManifestAreRefusedByName() throws IOException {
        Path header = version(1).resolve("configuration/header.json");
        Files.delete(header);
        StoreDamagedException missing = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load());
        assertTrue(missing.getMessage().contains(header.toString()), missing.getMessage());
        Files.writeString(version(1).resolve("manifest.json"), "{\"checksums\": ");
        StoreDamagedException manifest = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load());
        assertTrue(manifest.getMessage().contains("manifest.json"), manifest.getMessage());
    }

    @Test
    void damagedCurrentAndEmptyStoresAreNamed() throws Exception {
        Files.writeString(store.resolve("CURRENT"), "v1\n");
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load());
        assertTrue(e.getMessage().contains("CURRENT is damaged"), e.getMessage());
        Files.delete(store.resolve("CURRENT"));
        assertThrows(FileNotFoundException.class, () -> new ConfigStore(store).load());
        assertThrows(FileNotFoundException.class, () -> new ConfigStore(store.resolve("none")).load());
    }

    @Test
    void verifiedButUnroutableVersionsAreRefused() throws Exception {
        publish(2, CONFIGURATION.replace("\"format_version\": 2", "\"format_version\": 3"));
        assertTrue(assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load())
                .getMessage().contains("format_version 3"));
        publish(3, CONFIGURATION.replace("[42, 2]", "[42, 4]"));
        assertTrue(assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load())
                .getMessage().contains("not an instance in 0..3"));
        assertEquals(3, new ConfigStore(store).load(1).route("tag", "jobs"), "older versions stay readable");
    }

    @Test
    void anEngineWithoutProviderIsNamedWhenAKeyNeedsIt() throws Exception {
        publish(2, CONFIGURATION.replace("\"engine\": \"ring\"", "\"engine\": \"nosuch\""));
        RoutingTable tags = new ConfigStore(store).load().table("tag");
        assertEquals(3, tags.route("jobs"));
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> tags.route("paris"));
        assertTrue(e.getMessage().contains("'nosuch'"), e.getMessage());
    }

    @Test
    void aVersionNumberPastTheIntRangeIsLoaded() throws Exception {
        publish(3_000_000_000L, CONFIGURATION);
        RoutingConfiguration configuration = new ConfigStore(store).load();
        assertEquals(3_000_000_000L, configuration.version());
        assertEquals(3, configuration.route("tag", "jobs"));
        assertTrue(Files.isDirectory(store.resolve("versions/3000000000")));
    }

    @Test
    void aLongerTableIsRefusedWithItsSizeAndNeverReadPastTheManifestsSize() throws IOException {
        Path table = version(1).resolve("configuration/tables/00.parquet");
        Files.writeString(table, "PAR1....PAR1 and more", StandardOpenOption.APPEND);
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load());
        assertTrue(e.getMessage().contains(table + " has 33 bytes, its manifest recorded 12 (truncated or rewritten)"),
                e.getMessage());
    }

    @Test
    void aDirectoryOrFifoWhereAFileBelongsIsNamedNeverWaitedOn() throws Exception {
        Path table = version(1).resolve("configuration/tables/00.parquet");
        Files.delete(table);
        Files.createDirectory(table);
        StoreDamagedException directory = assertThrows(StoreDamagedException.class,
                () -> new ConfigStore(store).load());
        assertTrue(directory.getMessage().contains(table + " is damaged: it is a directory, not a file"),
                directory.getMessage());
        Path current = store.resolve("CURRENT");
        Files.delete(current);
        assertEquals(0, new ProcessBuilder("mkfifo", current.toString()).start().waitFor());
        StoreDamagedException fifo = assertTimeoutPreemptively(Duration.ofSeconds(10),
                () -> assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load()));
        assertTrue(fifo.getMessage().contains(current + " is damaged: it is a FIFO, a device or a socket"),
                fifo.getMessage());
    }

    @Test
    void aManifestOfAnotherVersionOrWithMalformedChecksumsIsRefusedByName() throws Exception {
        Path manifest = version(1).resolve("manifest.json");
        String written = Files.readString(manifest);
        String[][] damages = {
            {"\"version\": 1", "\"version\": 2", "it says version 2, in the directory of version 1"},
            {"\"version\": 1", "\"version\": \"1\"", "it says version \"1\""},
            {"\"size\": 12}", "\"size\": -1}", "its checksum of 'configuration/tables/00.parquet' must be a size"},
            {"\"size\": 12}", "\"size\": 12.0}", "must be a size and a SHA-256"},
            {"\"sha256\": \"", "\"sha256\": \"X", "must be a size and a SHA-256"},
            {"configuration/header.json", "../header.json", "its checksums name '../header.json', a file outside"},
            {"configuration/header.json", "/etc/header.json", "a file outside the version"},
            {"}}}", "}}} []", "it is not JSON"},
        };
        for (String[] damage : damages) {
            Files.writeString(manifest, written.replace(damage[0], damage[1]));
            StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load());
            assertTrue(e.getMessage().startsWith("the manifest of version 1 (" + manifest + ") is damaged: "),
                    e.getMessage());
            assertTrue(e.getMessage().contains(damage[2]), damage[2] + " in " + e.getMessage());
        }
    }

    @Test
    void aConfigurationTheManifestDoesNotCheckIsNeverServed() throws Exception {
        Path manifest = version(1).resolve("manifest.json");
        ObjectMapper json = new ObjectMapper();
        ObjectNode document = (ObjectNode) json.readTree(manifest.toFile());
        ((ObjectNode) document.get("checksums")).remove("configuration/configuration.json");
        json.writeValue(manifest.toFile(), document);
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> new ConfigStore(store).load());
        assertTrue(e.getMessage().contains("its manifest records no checksum of "
                + version(1).resolve("configuration/configuration.json")), e.getMessage());
    }

    @Test
    void versionsAndStoresThatAreNotThereAreToldApartFromDamage() throws Exception {
        FileNotFoundException none = assertThrows(FileNotFoundException.class, () -> new ConfigStore(store).load(9));
        assertTrue(none.getMessage().contains("has no version 9"), none.getMessage());
        Files.writeString(store.resolve("CURRENT"), "9\n");
        StoreDamagedException dangling = assertThrows(StoreDamagedException.class,
                () -> new ConfigStore(store).load());
        assertTrue(dangling.getMessage().contains("CURRENT names version 9, which the store does not have"),
                dangling.getMessage());
        Files.delete(version(1).resolve("manifest.json"));
        assertThrows(FileNotFoundException.class, () -> new ConfigStore(store).load(1),
                "a version without its manifest is not complete yet: it is no version");
    }

    @Test
    void anUnservedSchemeIsRefusedNamingTheSchemesServed() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ConfigStore.open("hdfs://namenode/store"));
        assertTrue(e.getMessage().contains("'hdfs'") && e.getMessage().contains("s3://"), e.getMessage());
    }

    @Test
    void aFileUriAndAPathOpenTheSameStore() throws IOException {
        assertEquals(3, ConfigStore.open(store.toUri().toString()).load().route("tag", "jobs"));
        assertEquals(store.toString(), ConfigStore.open(store.toUri().toString()).uri());
        assertEquals(3, ConfigStore.open(store.toString()).load().route("tag", "jobs"));
    }

    private Path version(long version) {
        return TestStores.version(store, version);
    }

    private void publish(long number, String configuration) throws Exception {
        TestStores.publish(store, number, configuration);
    }
}
