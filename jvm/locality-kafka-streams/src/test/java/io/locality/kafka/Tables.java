package io.locality.kafka;

import io.locality.routing.RoutingConfiguration;

/** Small configurations for the unit tests, written as {@code configuration.json} holds them. */
public final class Tables {
    private Tables() {}

    /**
     * location -> hashtag on servers a, b, c (instance i of each operator on server i % 3), {@code instances}
     * instances each; {@code hashtagEntries} is the JSON list of the hashtag table's [key, instance] rows.
     */
    public static RoutingConfiguration twoStages(int instances, String engine, String hashtagEntries) {
        StringBuilder placement = new StringBuilder();
        for (int i = 0; i < instances; i++) {
            placement.append(i == 0 ? "" : ", ").append('"').append("abc".charAt(i % 3)).append('"');
        }
        String fallback = "{\"engine\": \"" + engine + "\", \"n_instances\": " + instances + ", \"parameters\": {}}";
        String doc = "{\"format_version\": 2,"
                + " \"topology\": {\"servers\": [\"a\", \"b\", \"c\"], \"operators\": [\"location\", \"hashtag\"],"
                + "   \"placement\": {\"location\": [" + placement + "], \"hashtag\": [" + placement + "]}},"
                + " \"fallbacks\": {\"location\": " + fallback + ", \"hashtag\": " + fallback + "},"
                + " \"tables\": {\"location\": [], \"hashtag\": " + hashtagEntries + "}}";
        return RoutingConfiguration.fromJson(1, doc); // text: the same method in the drop-in jar
    }
}
