package io.locality.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Store URIs as docs/store-protocol.md reads them: paths and file:// locally, s3:// and s3a:// in a bucket. */
class StoreUriTest {
    @Test
    void pathsAndFileUrisAreLocalDirectories() {
        assertEquals("/data/store", local("/data/store").uri());
        assertEquals("store", local("store").uri(), "a relative path stays relative");
        assertEquals("/data/store", local("file:///data/store").uri());
        assertEquals("/data/my store", local("file:///data/my%20store").uri());
        assertEquals("C:\\store", local("C:\\store").uri(), "a drive letter is no scheme");
        assertEquals(Path.of("/data/store", "versions/000001/manifest.json").toString(),
                local("/data/store").locate("versions/000001/manifest.json"));
    }

    @Test
    void s3AndS3aNameABucketAndAPrefix() {
        S3Prefix store = s3("s3://locality/stores/nightly");
        assertEquals("locality", store.bucket());
        assertEquals("stores/nightly", store.prefix());
        assertEquals("s3://locality/stores/nightly", store.uri());
        assertEquals("s3://locality/stores/nightly/CURRENT", store.locate("CURRENT"));
        assertEquals("s3://locality/stores/nightly", s3("s3a://locality/stores/nightly/").uri(), "s3a is read as s3");
        assertEquals("s3://locality/stores/nightly", s3("S3://locality//stores/nightly//").uri());
        S3Prefix whole = s3("s3://locality");
        assertEquals("", whole.prefix());
        assertEquals("s3://locality/CURRENT", whole.locate("CURRENT"));
        assertEquals("s3://locality", s3("s3://locality/").uri());
    }

    @ParameterizedTest
    @ValueSource(strings = {"hdfs://namenode/store", "gs://bucket/store", "abfs://c@a.dfs.core.windows.net/s",
        "http://host/store", "hdfs:/store"})
    void otherSchemesAreRefusedNamingThoseServed(String uri) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StoreUri.open(uri));
        assertTrue(e.getMessage().contains("the store " + uri + " has the scheme")
                && e.getMessage().contains(StoreUri.SCHEMES), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", " ", "s3://", "s3:///prefix", "s3://bad bucket/x", "s3:bucket/x",
        "file://host/store", "file:relative"})
    void urisThatNameNoStoreAreRefused(String uri) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StoreUri.open(uri));
        assertTrue(e.getMessage().contains(uri.isBlank() ? "a store is a directory" : uri), e.getMessage());
    }

    private static LocalDirectory local(String uri) {
        return assertInstanceOf(LocalDirectory.class, StoreUri.open(uri));
    }

    private static S3Prefix s3(String uri) {
        return assertInstanceOf(S3Prefix.class, StoreUri.open(uri));
    }
}
