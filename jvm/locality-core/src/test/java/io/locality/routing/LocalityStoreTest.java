package io.locality.routing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.OptionalInt;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A store laid out as the Python {@code ConfigStore} writes it, read, routed and refused when damaged. */
class LocalityStoreTest {
    private static final String CONFIGURATION = """
            {"fallbacks": {"tag": {"engine": "ring", "n_instances": 4, "parameters": {"virtual_nodes": 128}},
                           "user": {"engine": "ring", "n_instances": 4, "parameters": {"virtual_nodes": 128}}},
             "format_version": 2, "parameters": {},
             "splits": {"tag": [["hot", [2, 3]]]},
             "tables": {"tag": [["jobs", 3], ["hot", 1], ["é🙂", 0]], "user": [[42, 2], [-7, 1]]},
             "topology": {"servers": ["s0", "s1"], "capacities": {"s0": 1.0, "s1": 1.0},
                          "operators": ["user", "tag"],
                          "placement": {"user": ["s0", "s1", "s0", "s1"], "tag": ["s0", "s1", "s0", "s1"]}}}
            """;

    @TempDir
    Path store;

    @BeforeEach
    void publishVersionOne() throws Exception {
        publish(1, CONFIGURATION);
    }

    @Test
    void routesEntriesSplitsAndTheFallbackOfTheCurrentVersion() throws IOException {
        RoutingConfiguration configuration = new LocalityStore(store).load();
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
        DamagedStoreException e = assertThrows(DamagedStoreException.class, () -> new LocalityStore(store).load());
        assertTrue(e.getMessage().contains(table.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("truncated or rewritten"), e.getMessage());
    }

    @Test
    void alteredConfigurationIsRefusedByName() throws IOException {
        Path file = version(1).resolve("configuration/configuration.json");
        Files.writeString(file, Files.readString(file).replace("\"jobs\", 3", "\"jobs\", 2"));
        DamagedStoreException e = assertThrows(DamagedStoreException.class, () -> new LocalityStore(store).load());
        assertTrue(e.getMessage().contains(file + " does not match its manifest's SHA-256"), e.getMessage());
    }

    @Test
    void missingFileAndDamagedManifestAreRefusedByName() throws IOException {
        Path header = version(1).resolve("configuration/header.json");
        Files.delete(header);
        DamagedStoreException missing = assertThrows(DamagedStoreException.class, () -> new LocalityStore(store).load());
        assertTrue(missing.getMessage().contains(header.toString()), missing.getMessage());
        Files.writeString(version(1).resolve("manifest.json"), "{\"checksums\": ");
        DamagedStoreException manifest = assertThrows(DamagedStoreException.class, () -> new LocalityStore(store).load());
        assertTrue(manifest.getMessage().contains("manifest.json"), manifest.getMessage());
    }

    @Test
    void damagedCurrentAndEmptyStoresAreNamed() throws Exception {
        Files.writeString(store.resolve("CURRENT"), "v1\n");
        DamagedStoreException e = assertThrows(DamagedStoreException.class, () -> new LocalityStore(store).load());
        assertTrue(e.getMessage().contains("CURRENT is damaged"), e.getMessage());
        Files.delete(store.resolve("CURRENT"));
        assertThrows(FileNotFoundException.class, () -> new LocalityStore(store).load());
        assertThrows(FileNotFoundException.class, () -> new LocalityStore(store.resolve("none")).load());
    }

    @Test
    void verifiedButUnroutableVersionsAreRefused() throws Exception {
        publish(2, CONFIGURATION.replace("\"format_version\": 2", "\"format_version\": 3"));
        assertTrue(assertThrows(DamagedStoreException.class, () -> new LocalityStore(store).load())
                .getMessage().contains("format_version 3"));
        publish(3, CONFIGURATION.replace("[42, 2]", "[42, 4]"));
        assertTrue(assertThrows(DamagedStoreException.class, () -> new LocalityStore(store).load())
                .getMessage().contains("not an instance in 0..3"));
        assertEquals(3, new LocalityStore(store).load(1).route("tag", "jobs"), "older versions stay readable");
    }

    @Test
    void anEngineWithoutProviderIsNamedWhenAKeyNeedsIt() throws Exception {
        publish(2, CONFIGURATION.replace("\"engine\": \"ring\"", "\"engine\": \"nosuch\""));
        RoutingTable tags = new LocalityStore(store).load().table("tag");
        assertEquals(3, tags.route("jobs"));
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> tags.route("paris"));
        assertTrue(e.getMessage().contains("'nosuch'"), e.getMessage());
    }

    private Path version(int version) {
        return store.resolve(String.format("versions/%06d", version));
    }

    /** Writes a version as the Python writer does: files, then a manifest of their sizes and SHA-256, then CURRENT. */
    private void publish(int number, String configuration) throws Exception {
        Path dir = version(number);
        Files.createDirectories(dir.resolve("configuration/tables"));
        Files.writeString(dir.resolve("configuration/configuration.json"), configuration);
        Files.writeString(dir.resolve("configuration/header.json"), "{\"format_version\": 2}");
        Files.write(dir.resolve("configuration/tables/00.parquet"), "PAR1....PAR1".getBytes(StandardCharsets.UTF_8));
        StringBuilder checksums = new StringBuilder();
        for (String name : new String[] {"configuration.json", "header.json", "tables/00.parquet"}) {
            byte[] data = Files.readAllBytes(dir.resolve("configuration").resolve(name));
            String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
            checksums.append(checksums.length() == 0 ? "" : ", ").append(String.format(
                    "\"configuration/%s\": {\"sha256\": \"%s\", \"size\": %d}", name, sha, data.length));
        }
        Files.writeString(dir.resolve("manifest.json"),
                "{\"version\": " + number + ", \"checksums\": {" + checksums + "}}");
        Files.writeString(store.resolve("CURRENT"), number + "\n");
    }
}
