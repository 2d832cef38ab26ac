package io.locality.routing;

import com.fasterxml.jackson.databind.JsonNode;
import io.locality.hashing.FallbackSpec;
import io.locality.hashing.TableKey;
import java.io.IOException;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One version of a store: the routing tables of every operator with the topology they were made for.
 *
 * <p>Read from the version's {@code configuration/configuration.json}, the one document that holds the
 * topology, every table's fallback, entries and split plans (the Parquet tables beside it hold the same
 * entries, and are verified against the manifest too). A layout newer than this reader understands is
 * refused rather than half-understood.
 */
public final class RoutingConfiguration {
    /** The newest layout this reader routes; version 2 adds split plans. */
    public static final int FORMAT_VERSION = 2;

    private final long version;
    private final Topology topology;
    private final Map<String, RoutingTable> tables;

    private RoutingConfiguration(long version, Topology topology, Map<String, RoutingTable> tables) {
        this.version = version;
        this.topology = topology;
        this.tables = tables;
    }

    /** The store version these tables were published as. */
    public long version() {
        return version;
    }

    public Topology topology() {
        return topology;
    }

    /** Tables by operator, in pipeline order. */
    public Map<String, RoutingTable> tables() {
        return tables;
    }

    /** The table of {@code operator}. */
    public RoutingTable table(String operator) {
        RoutingTable table = tables.get(operator);
        if (table == null) {
            throw new IllegalArgumentException("unknown operator '" + operator + "' (version " + version
                    + "); the tables are for " + topology.operators());
        }
        return table;
    }

    /** Instance of {@code key} at {@code operator}: its entry, else the engine's hash. */
    public int route(String operator, Object key) {
        return table(operator).route(key);
    }

    /**
     * Parses the text of a {@code configuration.json} document. Takes no Jackson type, so it is the same
     * method in the engines' drop-in jars, whose Jackson is relocated.
     *
     * @throws IllegalArgumentException when it is not JSON, naming the field that is missing or malformed
     */
    public static RoutingConfiguration fromJson(long version, String document) {
        try {
            return fromJson(version, Json.MAPPER.readTree(document));
        } catch (IOException e) {
            throw new IllegalArgumentException("a configuration.json document must be JSON: " + e.getMessage(), e);
        }
    }

    /**
     * A key from its JSON text ({@code "#paris"}, {@code 42}): a string, or an integral number within a Java
     * {@code long}. Takes no Jackson type, so it is the same method in the engines' drop-in jars.
     *
     * @throws IllegalArgumentException when the text is not one JSON string or integer
     */
    public static Object keyFromJson(String json) {
        try {
            return TableKey.fromJson(Json.MAPPER.readTree(json));
        } catch (IOException e) {
            throw new IllegalArgumentException("a table key must be a JSON string or a 64-bit integer; got " + json);
        }
    }

    /**
     * Parses a {@code configuration.json} document.
     *
     * @throws IllegalArgumentException naming the field that is missing or malformed
     */
    public static RoutingConfiguration fromJson(long version, JsonNode doc) {
        int format = doc.path("format_version").asInt(-1);
        if (format < 1 || format > FORMAT_VERSION) {
            throw new IllegalArgumentException("format_version " + doc.path("format_version")
                    + " is not one this reader routes (1.." + FORMAT_VERSION + "): upgrade locality's JVM modules");
        }
        Topology topology = Topology.fromJson(doc.path("topology"));
        Map<String, RoutingTable> tables = new LinkedHashMap<>();
        for (String operator : topology.operators()) {
            FallbackSpec fallback = FallbackSpec.fromJson(operator, doc.path("fallbacks").path(operator));
            int instances = topology.numInstances(operator);
            if (fallback.numInstances() != instances) {
                throw new IllegalArgumentException("the fallback of operator '" + operator + "' has "
                        + fallback.numInstances() + " instances, the topology " + instances);
            }
            JsonNode tableRows = doc.path("tables").path(operator);
            // sized for its rows: a table of millions would otherwise rehash some twenty times
            Map<Object, Integer> entries = new HashMap<>((int) Math.ceil(tableRows.size() / 0.75));
            for (JsonNode row : rows(doc.path("tables"), operator, "tables")) {
                entries.put(TableKey.fromJson(row.get(0)), instance(row.get(1), instances, operator));
            }
            Map<Object, int[]> splits = new HashMap<>();
            for (JsonNode row : rows(doc.path("splits"), operator, "splits")) {
                JsonNode plan = row.get(1);
                if (plan == null || plan.size() != topology.servers().size()) {
                    throw new IllegalArgumentException("a split plan of operator '" + operator
                            + "' must name an instance per server; got " + row);
                }
                int[] route = new int[plan.size()];
                for (int s = 0; s < route.length; s++) {
                    route[s] = instance(plan.get(s), instances, operator);
                }
                splits.put(TableKey.fromJson(row.get(0)), route);
            }
            tables.put(operator, new RoutingTable(operator, fallback, entries, splits));
        }
        return new RoutingConfiguration(version, topology, Collections.unmodifiableMap(tables));
    }

    private static Iterable<JsonNode> rows(JsonNode byOperator, String operator, String field) {
        JsonNode rows = byOperator.path(operator);
        if (rows.isMissingNode() && field.equals("splits")) { // only operators with hot keys have split plans
            return List.of();
        }
        if (!rows.isArray()) {
            throw new IllegalArgumentException(field + "." + operator + " must be a list of [key, value] rows");
        }
        for (JsonNode row : rows) {
            if (!row.isArray() || row.size() != 2) {
                throw new IllegalArgumentException(field + "." + operator + " holds " + row
                        + ", which is not a [key, value] row");
            }
        }
        return rows;
    }

    private static int instance(JsonNode node, int instances, String operator) {
        if (node == null || !node.canConvertToInt() || node.asInt() < 0 || node.asInt() >= instances) {
            throw new IllegalArgumentException("operator '" + operator + "' routes a key to " + node
                    + ", which is not an instance in 0.." + (instances - 1));
        }
        return node.asInt();
    }
}
