package io.locality.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.junit.jupiter.api.Test;

/** The S3 endpoint found where the AWS SDKs look for it, in their order. */
class StandardS3ClientTest {
    private static Properties properties(String... pairs) {
        Properties properties = new Properties();
        for (int i = 0; i < pairs.length; i += 2) {
            properties.setProperty(pairs[i], pairs[i + 1]);
        }
        return properties;
    }

    @Test
    void noSettingMeansAwsS3() {
        assertEquals(Optional.empty(), StandardS3Client.endpoint(Map.of(), properties()));
        assertEquals(Optional.empty(), StandardS3Client.endpoint(Map.of("AWS_ENDPOINT_URL", " "), properties()));
    }

    @Test
    void s3sOwnSettingWinsOverEveryServicesAndAPropertyOverAVariable() {
        Map<String, String> env = Map.of("AWS_ENDPOINT_URL", "http://all:1", "AWS_ENDPOINT_URL_S3", "http://s3:2");
        assertEquals(Optional.of(URI.create("http://s3:2")), StandardS3Client.endpoint(env, properties()));
        assertEquals(Optional.of(URI.create("http://all:1")),
                StandardS3Client.endpoint(Map.of("AWS_ENDPOINT_URL", "http://all:1"), properties()));
        assertEquals(Optional.of(URI.create("http://s3-property:3")),
                StandardS3Client.endpoint(env, properties("aws.endpointUrlS3", "http://s3-property:3")));
        assertEquals(Optional.of(URI.create("http://s3:2")),
                StandardS3Client.endpoint(env, properties("aws.endpointUrl", "http://all-property:4")),
                "S3's own variable before every service's property");
        assertEquals(Optional.of(URI.create("http://all-property:4")), StandardS3Client.endpoint(
                Map.of("AWS_ENDPOINT_URL", "http://all:1"), properties("aws.endpointUrl", "http://all-property:4")));
    }

    @Test
    void anEndpointThatIsNoUrlIsNamed() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> StandardS3Client.endpoint(Map.of("AWS_ENDPOINT_URL_S3", "localhost:9000"), properties()));
        assertTrue(e.getMessage().contains("AWS_ENDPOINT_URL_S3") && e.getMessage().contains("localhost:9000"),
                e.getMessage());
    }
}
