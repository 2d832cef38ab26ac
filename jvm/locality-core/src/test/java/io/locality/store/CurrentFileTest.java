package io.locality.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.locality.storage.StoreDamagedException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** CURRENT as docs/store-protocol.md spells it: a number and a newline, then optionally the writer's line. */
class CurrentFileTest {
    private static final String WRITER = "writer 0123456789abcdef0123456789abcdef\n";

    @TempDir
    Path store;

    private OptionalLong current(String text) throws Exception {
        Files.write(store.resolve("CURRENT"), text.getBytes(StandardCharsets.UTF_8));
        return new ConfigStore(store).currentVersion();
    }

    @Test
    void bothFormsAreRead() throws Exception {
        assertEquals(OptionalLong.of(7), current("7\n"), "a store written before the protocol");
        assertEquals(OptionalLong.of(7), current("7\n" + WRITER));
        assertEquals(OptionalLong.of(7), current("0007\n"));
    }

    @Test
    void versionsPastTheIntRangeAreReadAsPythonReadsThem() throws Exception {
        assertEquals(OptionalLong.of(999_999_999_999_999_999L), current("999999999999999999\n" + WRITER));
        assertEquals(OptionalLong.of(3_000_000_000L), current("3000000000\n"));
    }

    @Test
    void aStoreWithoutCurrentHasNoVersion() throws Exception {
        assertEquals(OptionalLong.empty(), new ConfigStore(store).currentVersion());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "7", " 7\n", "7 \n", "7\r\n", "7\n\n", "-1\n", "+7\n", "v1\n", "٣\n",
        "1234567890123456789\n", "7\nwriter 0123456789ABCDEF0123456789abcdef\n", "7\nwriter 0123\n",
        "7\nwriter 0123456789abcdef0123456789abcdef", "7\nwriter 0123456789abcdef0123456789abcdef\nmore\n",
        "7\nWRITER 0123456789abcdef0123456789abcdef\n"})
    void anythingElseIsDamageNamingCurrentAndTheRepair(String text) throws Exception {
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> current(text));
        assertTrue(e.getMessage().startsWith(store.resolve("CURRENT") + " is damaged: '"), e.getMessage());
        assertTrue(e.getMessage().contains("`locality rollback --store " + store + " --to N` repairs it"),
                e.getMessage());
    }

    @Test
    void moreThan64BytesAreNeverReadWhole() throws Exception {
        StoreDamagedException e = assertThrows(StoreDamagedException.class,
                () -> current("7\n" + WRITER + "x".repeat(40)));
        assertTrue(e.getMessage().contains("CURRENT is damaged: it holds 82 bytes; it should hold at most 64"),
                e.getMessage());
    }

    @Test
    void controlAndNonAsciiBytesAreShownEscaped() throws Exception {
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> current("7\u0000\n"));
        assertTrue(e.getMessage().contains("'7\\x00\\n' is not a version number"), e.getMessage());
    }
}
