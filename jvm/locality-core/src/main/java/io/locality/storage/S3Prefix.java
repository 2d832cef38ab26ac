package io.locality.storage;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import software.amazon.awssdk.core.ResponseInputStream;
import software.amazon.awssdk.core.exception.ApiCallAttemptTimeoutException;
import software.amazon.awssdk.core.exception.ApiCallTimeoutException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.model.GetObjectRequest;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.NoSuchBucketException;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.S3Exception;

/**
 * A store under a prefix of an S3 bucket ({@code s3://bucket/prefix}): object {@code name} is the key
 * {@code prefix/name}. Read with the AWS SDK for Java v2 ({@link StandardS3Client}), so AWS S3 and every
 * server that speaks its API (MinIO, Ceph RGW, the Versity gateway, GCS and R2 through their S3 endpoints)
 * serve a store alike.
 *
 * <p>S3 tells a missing key ({@code NoSuchKey}: absent) from a missing bucket ({@code NoSuchBucket}: no
 * store) and from a refusal or an outage (unreadable), and so does this class. The client is built at the
 * first read or write, not when the store is opened: naming a store costs nothing.
 */
public final class S3Prefix implements ObjectStore {
    /** The bucket names the AWS SDKs accept (boto3 checks the same before it sends a request). */
    private static final Pattern BUCKET = Pattern.compile("[A-Za-z0-9._-]{1,255}");
    private static final Pattern URI = Pattern.compile("(?i)s3a?://([^/]*)/*(.*?)/*");

    private final String bucket;
    private final String prefix;

    private S3Prefix(String bucket, String prefix) {
        this.bucket = bucket;
        this.prefix = prefix;
    }

    /**
     * The store {@code s3://bucket/prefix} (or {@code s3a://}); slashes around the prefix are dropped, and
     * an empty prefix is the whole bucket.
     *
     * @throws IllegalArgumentException when the URI names no bucket, or one no S3 server has
     */
    static S3Prefix of(String uri) {
        Matcher parts = URI.matcher(uri);
        if (!parts.matches() || !BUCKET.matcher(parts.group(1)).matches()) {
            throw new IllegalArgumentException("the store " + uri + " names no bucket: an S3 store is "
                    + "s3://bucket/prefix (bucket names hold letters, digits, '.', '-' and '_')");
        }
        return new S3Prefix(parts.group(1), parts.group(2));
    }

    String bucket() {
        return bucket;
    }

    /** The prefix of the store's keys, without slashes around it; empty for the whole bucket. */
    String prefix() {
        return prefix;
    }

    /**
     * {@inheritDoc}
     *
     * @throws StoreUnavailableException when the server cannot be reached, does not answer within the
     *     client's timeouts ({@link StandardS3Client}) or answers with a server error (5xx): an outage
     */
    @Override
    public Optional<byte[]> read(String name, long limit) throws IOException {
        GetObjectRequest request = GetObjectRequest.builder().bucket(bucket).key(key(name)).build();
        try (ResponseInputStream<GetObjectResponse> in = StandardS3Client.shared().getObject(request)) {
            Long size = in.response().contentLength();
            try {
                return Optional.of(BoundedRead.bytes(in, size == null ? -1 : size, limit, locate(name)));
            } catch (StoreDamagedException e) {
                in.abort(); // the rest of the body is not wanted: drop the connection rather than drain it
                throw e;
            } catch (IOException e) { // the connection broke or stalled mid-body
                in.abort();
                throw new StoreUnavailableException("cannot read " + locate(name) + " from "
                        + StandardS3Client.describe() + ": " + e.getMessage(), e);
            }
        } catch (NoSuchKeyException e) {
            return Optional.empty();
        } catch (SdkException e) {
            throw failure("read", name, e);
        }
    }

    /**
     * {@inheritDoc}
     *
     * <p>One PutObject: S3 makes the object visible whole or not at all, replacing the one of that key.
     *
     * @throws StoreUnavailableException when the server cannot be reached, does not answer within the
     *     client's timeouts ({@link StandardS3Client}) or answers with a server error (5xx): an outage
     */
    @Override
    public void put(String name, byte[] data) throws IOException {
        PutObjectRequest request = PutObjectRequest.builder().bucket(bucket).key(key(name)).build();
        try {
            StandardS3Client.shared().putObject(request, RequestBody.fromBytes(data));
        } catch (SdkException e) {
            throw failure("write", name, e);
        }
    }

    /**
     * What the SDK's failure to {@code verb} ("read" or "write") object {@code name} means: no bucket (no store),
     * an outage (a server error, no answer), or a refusal (the message names the server's error code).
     */
    private IOException failure(String verb, String name, SdkException e) {
        String at = (verb.equals("read") ? " from " : " to ") + StandardS3Client.describe();
        if (e instanceof NoSuchBucketException || e instanceof S3Exception s3 && s3.awsErrorDetails() != null
                && "NoSuchBucket".equals(s3.awsErrorDetails().errorCode())) { // a PutObject models no NoSuchBucket
            return new FileNotFoundException("the store " + uri() + " does not exist: S3 has no bucket '" + bucket
                    + "' at " + StandardS3Client.describe());
        }
        if (e instanceof S3Exception s3) {
            String message = "cannot " + verb + " " + locate(name) + ": " + s3.statusCode() + " "
                    + (s3.awsErrorDetails() == null ? s3.getMessage() : s3.awsErrorDetails().errorCode() + " ("
                    + s3.awsErrorDetails().errorMessage() + ")") + at;
            return s3.statusCode() >= 500 ? new StoreUnavailableException(message, e) : new IOException(message, e);
        }
        String message = "cannot " + verb + " " + locate(name) + at + ": " + e.getMessage();
        return outage(e) ? new StoreUnavailableException(message, e) : new IOException(message, e);
    }

    /**
     * Whether the SDK gave up for want of an answer (refused, reset, timed out, after its retries), rather
     * than for something waiting does not mend (no credentials, a request it refuses to send).
     */
    static boolean outage(SdkException e) {
        if (e instanceof ApiCallTimeoutException || e instanceof ApiCallAttemptTimeoutException) {
            return true;
        }
        for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) {
            if (cause instanceof IOException) {
                return true;
            }
        }
        return false;
    }

    @Override
    public String locate(String name) {
        return "s3://" + bucket + "/" + key(name);
    }

    @Override
    public String uri() {
        return prefix.isEmpty() ? "s3://" + bucket : "s3://" + bucket + "/" + prefix;
    }

    private String key(String name) {
        return prefix.isEmpty() ? name : prefix + "/" + name;
    }
}
