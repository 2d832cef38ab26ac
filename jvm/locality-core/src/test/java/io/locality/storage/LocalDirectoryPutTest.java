package io.locality.storage;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A directory store writes an object whole, beside its name then renamed over it, as the Python store does. */
class LocalDirectoryPutTest {
    private static final long LIMIT = 1 << 20;

    @TempDir
    Path tmp;

    private static List<Path> files(Path root) throws IOException {
        try (Stream<Path> walk = Files.walk(root)) {
            return walk.filter(Files::isRegularFile).map(root::relativize).sorted().toList();
        }
    }

    @Test
    void aPutCreatesTheStoreAndItsFoldersAndLeavesOnlyTheObject() throws IOException {
        Path root = tmp.resolve("new-store");
        ObjectStore store = StoreUri.open(root.toString());
        byte[] data = "sketch bytes".getBytes(StandardCharsets.UTF_8);
        String name = "sketches/0000000000000-0000000060000/loads/a/p.lcss";
        store.put(name, data);
        assertArrayEquals(data, Files.readAllBytes(root.resolve(name)));
        assertArrayEquals(data, store.read(name, LIMIT).orElseThrow());
        assertEquals(List.of(Path.of(name)), files(root), "no file written aside is left");
    }

    @Test
    void aPutReplacesTheObjectWhole() throws IOException {
        ObjectStore store = new LocalDirectory(tmp);
        store.put("x/o", new byte[1000]);
        byte[] shorter = {1, 2, 3};
        store.put("x/o", shorter);
        assertArrayEquals(shorter, store.read("x/o", LIMIT).orElseThrow());
        assertEquals(List.of(Path.of("x/o")), files(tmp));
    }

    @Test
    void aDirectoryWhereTheObjectBelongsIsDamageAndStays() throws IOException {
        ObjectStore store = new LocalDirectory(tmp);
        Files.createDirectories(tmp.resolve("x/o/inside"));
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> store.put("x/o", new byte[] {1}));
        assertTrue(e.getMessage().contains(tmp.resolve("x/o") + " is damaged: it is a directory"), e.getMessage());
        assertTrue(Files.isDirectory(tmp.resolve("x/o/inside")));
        assertEquals(List.of(), files(tmp), "no file written aside is left");
    }

    @Test
    void aFileWhereAFolderBelongsIsNamed() throws IOException {
        ObjectStore store = new LocalDirectory(tmp);
        Files.write(tmp.resolve("x"), new byte[] {7});
        StoreDamagedException e = assertThrows(StoreDamagedException.class, () -> store.put("x/y/o", new byte[] {1}));
        assertTrue(e.getMessage().contains("a parent of it is a file, not a directory"), e.getMessage());
        assertArrayEquals(new byte[] {7}, Files.readAllBytes(tmp.resolve("x")));
    }

    @Test
    void aFolderThatCannotBeWrittenIsNamed() throws IOException {
        Path locked = Files.createDirectories(tmp.resolve("locked"));
        assertTrue(locked.toFile().setWritable(false));
        try {
            if (Files.isWritable(locked)) {
                return; // root ignores permissions: nothing to show
            }
            IOException e = assertThrows(IOException.class, () -> new LocalDirectory(locked).put("o", new byte[] {1}));
            assertTrue(e.getMessage().startsWith("cannot write " + locked.resolve("o")), e.getMessage());
        } finally {
            locked.toFile().setWritable(true);
        }
    }
}
