package io.locality.store;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;

/** Store directories written as the Python {@code ConfigStore} writes them, for the tests. */
public final class TestStores {
    /** Two operators on four instances with the ring fallback, a split key, string and integer keys. */
    public static final String CONFIGURATION = """
            {"fallbacks": {"tag": {"engine": "ring", "n_instances": 4, "parameters": {"virtual_nodes": 128}},
                           "user": {"engine": "ring", "n_instances": 4, "parameters": {"virtual_nodes": 128}}},
             "format_version": 2, "parameters": {},
             "splits": {"tag": [["hot", [2, 3]]]},
             "tables": {"tag": [["jobs", 3], ["hot", 1], ["é🙂", 0]], "user": [[42, 2], [-7, 1]]},
             "topology": {"servers": ["s0", "s1"], "capacities": {"s0": 1.0, "s1": 1.0},
                          "operators": ["user", "tag"],
                          "placement": {"user": ["s0", "s1", "s0", "s1"], "tag": ["s0", "s1", "s0", "s1"]}}}
            """;

    private TestStores() {}

    /** The directory of version {@code number} in {@code store}. */
    public static Path version(Path store, long number) {
        return store.resolve(String.format("versions/%06d", number));
    }

    /** Writes a version as the Python writer does: files, then a manifest of their sizes and SHA-256, then CURRENT. */
    public static void publish(Path store, long number, String configuration) throws Exception {
        Path dir = version(store, number);
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
