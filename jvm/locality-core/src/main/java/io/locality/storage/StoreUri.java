package io.locality.storage;

import java.net.URI;
import java.nio.file.Path;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Where a store is, from the URI every store option takes ({@code --store}, {@code locality.store},
 * {@code ConfigStore.open}): the rules of docs/store-protocol.md, which the Python reader follows too.
 *
 * <ul>
 *   <li>a path ({@code /data/store}, {@code store}) or {@code file:///data/store}: a local directory;
 *   <li>{@code s3://bucket/prefix} or {@code s3a://bucket/prefix} (as Hadoop users write it): the objects
 *       under {@code prefix/} in {@code bucket}.
 * </ul>
 *
 * <p>Any other {@code scheme:} is refused, never read as a relative path: {@code hdfs://nn/store} must not
 * become a directory named {@code hdfs:}. A scheme has two characters or more, so {@code C:\store} stays a
 * path.
 */
public final class StoreUri {
    /** The schemes served besides plain paths, as messages name them. */
    public static final String SCHEMES = "file://, s3://, s3a://";
    /** {@code scheme:} as RFC 3986 spells it. */
    private static final Pattern SCHEME = Pattern.compile("([A-Za-z][A-Za-z0-9+.-]+):");

    private StoreUri() {}

    /**
     * The store {@code uri} names. No I/O happens here: a missing store is found by its first read.
     *
     * @throws IllegalArgumentException naming the schemes served, or what is wrong with the URI
     */
    public static ObjectStore open(String uri) {
        if (uri == null || uri.isBlank()) {
            throw new IllegalArgumentException("a store is a directory or an " + SCHEMES + " URI; got '"
                    + (uri == null ? "" : uri) + "'");
        }
        Matcher scheme = SCHEME.matcher(uri);
        if (!scheme.lookingAt()) {
            return new LocalDirectory(Path.of(uri));
        }
        switch (scheme.group(1).toLowerCase(Locale.ROOT)) {
            case "file":
                try {
                    return new LocalDirectory(Path.of(URI.create(uri)));
                } catch (IllegalArgumentException e) { // a host, a query, characters a URI cannot hold
                    throw new IllegalArgumentException("the store " + uri + " is not a local file URI such as "
                            + "file:///data/store: " + e.getMessage(), e);
                }
            case "s3":
            case "s3a":
                return S3Prefix.of(uri);
            default:
                throw new IllegalArgumentException("the store " + uri + " has the scheme '" + scheme.group(1)
                        + "', which is not served: a store is a directory or an " + SCHEMES + " URI");
        }
    }
}
