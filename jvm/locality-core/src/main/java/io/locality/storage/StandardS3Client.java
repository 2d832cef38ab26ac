package io.locality.storage;

import java.net.URI;
import java.net.URISyntaxException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.core.client.config.ClientOverrideConfiguration;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.regions.providers.AwsProfileRegionProvider;
import software.amazon.awssdk.regions.providers.AwsRegionProvider;
import software.amazon.awssdk.regions.providers.AwsRegionProviderChain;
import software.amazon.awssdk.regions.providers.InstanceProfileRegionProvider;
import software.amazon.awssdk.regions.providers.SystemSettingsRegionProvider;
import software.amazon.awssdk.services.s3.S3Client;

/**
 * The S3 client every {@link S3Prefix} of a JVM reads through, configured the way the AWS SDKs configure
 * themselves, so that one environment points the Python job (boto3) and the engines' JVMs at one bucket
 * (docs/store-protocol.md):
 *
 * <ul>
 *   <li>credentials: the SDK's default chain ({@code AWS_ACCESS_KEY_ID} / {@code AWS_SECRET_ACCESS_KEY} /
 *       {@code AWS_SESSION_TOKEN}, {@code AWS_PROFILE} and {@code ~/.aws}, the container's or instance's
 *       role);
 *   <li>region: {@code aws.region} or {@code AWS_REGION}, then {@code AWS_DEFAULT_REGION} (which boto3
 *       reads and the Java SDK does not), the profile, the instance; {@code us-east-1} when none is set.
 *       Buckets of other regions are still reached (cross-region access), as boto3 reaches them;
 *   <li>endpoint: an S3-compatible server from {@code aws.endpointUrlS3} / {@code AWS_ENDPOINT_URL_S3}, else
 *       {@code aws.endpointUrl} / {@code AWS_ENDPOINT_URL}. With one set, buckets are addressed by path
 *       ({@code http://host:port/bucket/key}), as such servers expect.
 * </ul>
 *
 * <p>The HTTP client is the JDK's own {@code HttpURLConnection}: a reader makes a few GETs, and the SDK's
 * Netty and Apache clients would only make the engines' jars heavier. The configuration is the process's,
 * so one client serves the whole JVM; it is built at the first read of an S3 store.
 *
 * <p>Every request is bounded in time, so that a reader finds out about an outage and keeps serving what it
 * has instead of hanging in a read: {@value #CONNECT_SECONDS} s to connect, {@value #SOCKET_SECONDS} s of
 * silence within a response, {@value #CALL_SECONDS} s for a call with the SDK's retries (the body of an
 * object is read after the call returns, bounded by the silence alone, so a large version on a slow link
 * still comes). A server that accepts connections but answers nothing (stopped, or behind a link that drops
 * packets) therefore costs a reader {@value #CALL_SECONDS} s per read at most; the SDK's defaults would let
 * one read hang for minutes.
 */
final class StandardS3Client {
    /** Where an endpoint may be set, in the order the SDKs read them: S3's own, then every service's. */
    private static final List<Setting> ENDPOINT_SETTINGS = List.of(
            new Setting("aws.endpointUrlS3", "AWS_ENDPOINT_URL_S3"), new Setting("aws.endpointUrl", "AWS_ENDPOINT_URL"));
    private static final Region FALLBACK_REGION = Region.US_EAST_1;
    /** Seconds to open a connection: a server on the same network answers within milliseconds. */
    static final int CONNECT_SECONDS = 2;
    /** Seconds without a byte within a response; S3's first byte comes well within one second. */
    static final int SOCKET_SECONDS = 5;
    /** Seconds for one call, the SDK's retries included (not the reading of an object's body). */
    static final int CALL_SECONDS = 10;

    private static S3Client shared;
    private static String described;

    private StandardS3Client() {}

    /** The JVM's client, built on first use from its environment and system properties. */
    static synchronized S3Client shared() {
        if (shared == null) {
            Optional<URI> endpoint = endpoint(System.getenv(), System.getProperties());
            Region region = region(System.getenv());
            var builder = S3Client.builder()
                    .httpClientBuilder(UrlConnectionHttpClient.builder()
                            .connectionTimeout(Duration.ofSeconds(CONNECT_SECONDS))
                            .socketTimeout(Duration.ofSeconds(SOCKET_SECONDS)))
                    .overrideConfiguration(ClientOverrideConfiguration.builder()
                            .apiCallTimeout(Duration.ofSeconds(CALL_SECONDS)).build())
                    .credentialsProvider(DefaultCredentialsProvider.builder().build())
                    .region(region)
                    .crossRegionAccessEnabled(true);
            endpoint.ifPresent(uri -> builder.endpointOverride(uri).forcePathStyle(true));
            shared = builder.build();
            described = endpoint.map(URI::toString).orElse("AWS S3") + " (region " + region.id() + ")";
        }
        return shared;
    }

    /** How messages name the server the client reads from. */
    static synchronized String describe() {
        return described == null ? "S3" : described;
    }

    /**
     * The S3-compatible server the settings name, if any: system properties before environment variables,
     * S3's own setting before every service's.
     *
     * @throws IllegalArgumentException naming the setting whose value is not an absolute URL
     */
    static Optional<URI> endpoint(Map<String, String> env, Properties properties) {
        for (Setting setting : ENDPOINT_SETTINGS) {
            String property = properties.getProperty(setting.property());
            if (property != null && !property.isBlank()) {
                return Optional.of(absoluteUrl(setting.property(), property.strip()));
            }
            String variable = env.get(setting.variable());
            if (variable != null && !variable.isBlank()) {
                return Optional.of(absoluteUrl(setting.variable(), variable.strip()));
            }
        }
        return Optional.empty();
    }

    private static URI absoluteUrl(String setting, String value) {
        try {
            URI uri = new URI(value);
            if (uri.getScheme() != null && uri.getHost() != null) {
                return uri;
            }
        } catch (URISyntaxException e) {
            // reported below
        }
        throw new IllegalArgumentException(setting + " must be the URL of an S3 server, such as "
                + "http://127.0.0.1:9000; got '" + value + "'");
    }

    /** The region as the SDK's default chain finds it, with boto3's {@code AWS_DEFAULT_REGION} beside it. */
    private static Region region(Map<String, String> env) {
        AwsRegionProvider legacyVariable = () -> {
            String value = env.get("AWS_DEFAULT_REGION");
            if (value == null || value.isBlank()) {
                throw SdkClientException.create("AWS_DEFAULT_REGION is not set");
            }
            return Region.of(value.strip());
        };
        try {
            return new AwsRegionProviderChain(new SystemSettingsRegionProvider(), legacyVariable,
                    new AwsProfileRegionProvider(), new InstanceProfileRegionProvider()).getRegion();
        } catch (SdkClientException none) {
            return FALLBACK_REGION;
        }
    }

    /** One setting as a JVM system property and as an environment variable (the property wins). */
    private record Setting(String property, String variable) {}
}
