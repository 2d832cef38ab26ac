package io.locality.flink;

import io.locality.hashing.TableKey;
import io.locality.routing.RoutingTable;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.zip.Deflater;
import java.util.zip.DeflaterOutputStream;
import java.util.zip.InflaterInputStream;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;

/**
 * What a Flink job keys a record on so that one operator's routing table takes effect: a table key's
 * surrogate, every other key itself.
 *
 * <p>Flink keeps keyed state in key groups, so a table cannot send a key elsewhere; keying the record on
 * a surrogate whose key group belongs to the subtask the table names does. Subtask {@code i} owns key
 * groups {@code s..e} and has one surrogate in each ({@link KeyGroupSurrogates}); a table key {@code k}
 * sent to {@code i} gets the surrogate of key group {@code s + g(k) mod (e - s + 1)}, {@code g(k)} being
 * {@code k}'s own key group. So a subtask's table keys spread over its key groups as hashed keys do (Flink
 * restores and rescales state one key group at a time), and a key keeps its routing key as long as it
 * keeps its subtask. A split key's part on subtask {@code i} gets the routing key an entry for {@code i}
 * would give, or the key itself on the subtask Flink's hash gives it. This is the rule of Python's
 * {@code RoutingKeySelector.routing_key}, which gives the same routing key for every key.
 *
 * <p>Immutable and {@link Serializable}: built once from a loaded table, it travels inside a job's
 * {@link RoutingKeySelector}, and a savepoint rewrite can compute a key's routing key under two table
 * versions with {@link #routingKey(Object)} of each. It travels as a compact image ({@link SharedRoutes}),
 * and every task of a TaskManager that reads the same image shares one copy: a table of a million
 * entries is held once per TaskManager, not once per task and selector. Routes read from an image are
 * decoded at their first use: a JobManager deserializes a job's selectors (and serializes them again)
 * but never routes a key, so it holds the image alone.
 */
public final class FlinkRoutingKeys implements Serializable {
    private static final long serialVersionUID = 1L;
    /** The buffer between an image's data streams and its deflater (or inflater). */
    private static final int IMAGE_BUFFER = 1 << 16;

    private final String operator;
    private final KeyType keyType;
    private final int maxParallelism;
    private final int parallelism;
    private final Object[] surrogates;
    /** Each subtask's key groups, computed once: Flink's computation builds a message to check its arguments. */
    private final KeyGroupRange[] ranges;
    /** Table key (lookup form, {@link TableKey}) -> its subtask, for routes built from a table; else null. */
    private final Map<Object, Integer> entries;
    /** Split key (lookup form) -> its plan, for routes built from a table; else null. */
    private final Map<Object, int[]> splits;
    /** The image these routes were read from; null for routes built from a table. */
    private final byte[] read;
    /** The routes, made at their first use ({@link #tables()}). */
    private volatile Tables tables;
    /** What serialization writes for these routes, made at the first (a job graph serializes them per task). */
    private transient volatile SharedRoutes serialized;

    /**
     * @param routes table key (lookup form, {@link TableKey}) -> its surrogate
     * @param splitRoutes split key (lookup form) -> the routing key of its part for each server position
     */
    private record Tables(HashMap<Object, Object> routes, HashMap<Object, Object[]> splitRoutes) {}

    private FlinkRoutingKeys(String operator, KeyType keyType, int maxParallelism, int parallelism,
            Map<Object, Integer> entries, Map<Object, int[]> splits, byte[] read) {
        this.operator = operator;
        this.keyType = keyType;
        this.parallelism = parallelism;
        this.maxParallelism = maxParallelism;
        this.surrogates = KeyGroupSurrogates.of(maxParallelism, keyType);
        this.ranges = new KeyGroupRange[parallelism];
        for (int subtask = 0; subtask < parallelism; subtask++) {
            ranges[subtask] = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(
                    maxParallelism, parallelism, subtask);
        }
        this.entries = entries;
        this.splits = splits;
        this.read = read;
    }

    /** A hash map's initial capacity for {@code size} entries at its default load factor (no rehash). */
    private static int capacity(int size) {
        return (int) Math.ceil(size / 0.75);
    }

    private static FlinkRoutingKeys validated(RoutingTable table, KeyType keyType) {
        String engine = table.fallbackSpec().engine();
        if (!engine.equals("flink")) {
            throw new IllegalArgumentException("the table of '" + table.operator() + "' falls back to '" + engine
                    + "'; a Java job keyed on the value needs tables learned with --hash flink"
                    + (engine.equals("pyflink") ? " (pyflink is PyFlink's key_by, which hashes a Row around the key)"
                            : ""));
        }
        String intType = table.fallbackSpec().intType();
        if (keyType != KeyType.STRING && !keyType.label().equals(intType)) {
            throw new IllegalArgumentException("the keys of '" + table.operator() + "' are " + keyType.label()
                    + " but the table's fallback hashes integer keys as " + intType + " (int_type)");
        }
        FlinkRoutingKeys routes = new FlinkRoutingKeys(table.operator(), keyType, FlinkKeyGroupsProvider.maxParallelism(
                table.fallbackSpec()), table.numInstances(), table.entries(), table.splits(), null);
        // checked now, routed at the first use: a job's main builds the routes only to ship them
        table.entries().keySet().forEach(routes::tableKey);
        table.splits().keySet().forEach(routes::tableKey);
        return routes;
    }

    /**
     * The routing keys of {@code table}, whose key type its keys tell ({@link KeyType#of(RoutingTable)}).
     *
     * @throws IllegalArgumentException when the table's fallback is not {@code flink}, it is empty, or one
     *     of its keys has the reserved form of a surrogate
     */
    public static FlinkRoutingKeys of(RoutingTable table) {
        return validated(table, KeyType.of(table));
    }

    /** The routing keys of {@code table} for a job keyed by {@code keyType} values (needed for an empty table). */
    public static FlinkRoutingKeys of(RoutingTable table, KeyType keyType) {
        return validated(table, keyType);
    }

    public String operator() {
        return operator;
    }

    public KeyType keyType() {
        return keyType;
    }

    /** Flink's max parallelism (number of key groups) the routes are for: the job must run with it. */
    public int maxParallelism() {
        return maxParallelism;
    }

    /** The keyed operator's parallelism the routes are for. */
    public int parallelism() {
        return parallelism;
    }

    /** Table key (lookup form: {@code String}, or {@code Long} for integers) -> its surrogate. */
    public Map<Object, Object> routes() {
        return Collections.unmodifiableMap(tables().routes());
    }

    /**
     * Routing key of {@code key}: its surrogate if the table lists it, else the key itself (a split key
     * goes whole to its home subtask: {@link #routingKey(Object, int)} sends it to its parts).
     *
     * @param key the real key as the job types it ({@code String}, {@code Long} or {@code Integer})
     * @throws IllegalArgumentException when the key is not of the job's key type or has a reserved form
     */
    public Object routingKey(Object key) {
        Object surrogate = tables().routes().get(TableKey.of(key));
        return surrogate != null ? surrogate : checked(key);
    }

    /**
     * Routing key of {@code key} selected on server position {@code server} (the server of the instance
     * selecting it): a split key's part there, else {@link #routingKey(Object)}.
     */
    public Object routingKey(Object key, int server) {
        Object[] parts = tables().splitRoutes().get(TableKey.of(key));
        if (parts == null) {
            return routingKey(key);
        }
        if (server < 0 || server >= parts.length) {
            throw new IllegalArgumentException("server position " + server + " outside 0.." + (parts.length - 1)
                    + " of the split plans of '" + operator + "'");
        }
        return parts[server];
    }

    /**
     * The subtask whose key groups hold the state of routing key {@code routingKey} (Flink's own
     * assignment, with the routes' max parallelism and parallelism).
     */
    public int subtaskOf(Object routingKey) {
        return KeyGroupRangeAssignment.assignKeyToParallelOperator(routingKey, maxParallelism, parallelism);
    }

    /** Whether the table splits {@code key} over servers. */
    public boolean isSplit(Object key) {
        return tables().splitRoutes().containsKey(TableKey.of(key));
    }

    /**
     * These routes as bytes: operator, key type, max parallelism, parallelism, each table key with its
     * subtask, each split key with its plan, counts and lengths in as few bytes as they need, deflated. {@link #fromImage(byte[])} rebuilds them.
     *
     * <p>Deflated at the fastest level: a job graph carries the image once per task configuration that
     * holds the routes (the keyed operator's and its upstream partitioner's), the JobManager stores each
     * one in its blob server and every TaskManager reads it back, so its size is paid several times at
     * every start of the job; keys of a table are text of a few forms and subtasks small numbers.
     */
    byte[] image() {
        if (read != null) {
            return read;
        }
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        Deflater deflater = new Deflater(Deflater.BEST_SPEED);
        try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(
                new DeflaterOutputStream(bytes, deflater, IMAGE_BUFFER), IMAGE_BUFFER))) {
            writeText(out, operator);
            out.writeByte(keyType.ordinal());
            writeCount(out, maxParallelism);
            writeCount(out, parallelism);
            writeCount(out, entries.size());
            for (Map.Entry<Object, Integer> entry : entries.entrySet()) {
                writeKey(out, entry.getKey());
                writeCount(out, entry.getValue());
            }
            writeCount(out, splits.size());
            for (Map.Entry<Object, int[]> entry : splits.entrySet()) {
                writeKey(out, entry.getKey());
                writeCount(out, entry.getValue().length);
                for (int subtask : entry.getValue()) {
                    writeCount(out, subtask);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e); // a ByteArrayOutputStream does not fail
        } finally {
            deflater.end();
        }
        return bytes.toByteArray();
    }

    /** The routes {@link #image()} wrote: its header read now, its routes at their first use. */
    static FlinkRoutingKeys fromImage(byte[] image) throws IOException {
        try (DataInputStream in = imageInput(image)) {
            String operator = readText(in);
            KeyType keyType = KeyType.values()[in.readByte()];
            return new FlinkRoutingKeys(operator, keyType, readCount(in), readCount(in), null, null, image);
        }
    }

    /** {@link #fromImage(byte[])}, serialized again as {@code form} (its image) without encoding anew. */
    static FlinkRoutingKeys fromImage(byte[] image, SharedRoutes form) throws IOException {
        FlinkRoutingKeys read = fromImage(image);
        read.serialized = form;
        return read;
    }

    private static DataInputStream imageInput(byte[] image) {
        return new DataInputStream(new BufferedInputStream(
                new InflaterInputStream(new ByteArrayInputStream(image)), IMAGE_BUFFER));
    }

    /** The routes, made by the first caller from the table or image (the others wait for it). */
    private Tables tables() {
        Tables made = tables;
        if (made == null) {
            synchronized (this) {
                made = tables;
                if (made == null) {
                    made = read != null ? decode() : build();
                    tables = made;
                }
            }
        }
        return made;
    }

    private Tables build() {
        Tables built = new Tables(new HashMap<>(capacity(entries.size())), new HashMap<>(capacity(splits.size())));
        entries.forEach((key, subtask) -> built.routes().put(key, surrogateOf(keyType.jobKey(key), subtask)));
        splits.forEach((key, plan) -> built.splitRoutes().put(key, parts(built, keyType.jobKey(key), plan)));
        return built;
    }

    private Tables decode() {
        try (DataInputStream in = imageInput(read)) {
            readText(in); // the header, read by fromImage
            in.readByte();
            readCount(in);
            readCount(in);
            int count = readCount(in);
            Tables read = new Tables(new HashMap<>(capacity(count)), new HashMap<>());
            for (int i = count; i > 0; i--) {
                Object key = readKey(in, keyType);
                read.routes().put(key, surrogateOf(keyType.jobKey(key), readCount(in)));
            }
            for (int i = readCount(in); i > 0; i--) {
                Object key = readKey(in, keyType);
                int[] plan = new int[readCount(in)];
                for (int server = 0; server < plan.length; server++) {
                    plan[server] = readCount(in);
                }
                read.splitRoutes().put(key, parts(read, keyType.jobKey(key), plan));
            }
            return read;
        } catch (IOException e) {
            throw new UncheckedIOException("the routes image of '" + operator + "' is unreadable", e);
        }
    }

    /** What Java serialization writes in place of these routes (the job graph, a savepoint rewrite's job). */
    private Object writeReplace() {
        SharedRoutes form = serialized;
        if (form == null) { // two threads may both make it: the same bytes either way
            form = SharedRoutes.of(this);
            serialized = form;
        }
        return form;
    }

    private static void writeKey(DataOutputStream out, Object lookupKey) throws IOException {
        if (lookupKey instanceof String text) {
            writeText(out, text);
        } else {
            out.writeLong((Long) lookupKey);
        }
    }

    private static Object readKey(DataInputStream in, KeyType keyType) throws IOException {
        return keyType == KeyType.STRING ? readText(in) : (Object) in.readLong();
    }

    /** A count, length or subtask (never negative) in 7-bit groups, low first: most fit one byte. */
    private static void writeCount(DataOutputStream out, int count) throws IOException {
        int rest = count;
        while ((rest & ~0x7F) != 0) {
            out.writeByte((rest & 0x7F) | 0x80);
            rest >>>= 7;
        }
        out.writeByte(rest);
    }

    private static int readCount(DataInputStream in) throws IOException {
        int count = 0;
        for (int shift = 0; shift < Integer.SIZE; shift += 7) {
            byte group = in.readByte();
            count |= (group & 0x7F) << shift;
            if (group >= 0) {
                return count;
            }
        }
        throw new IOException("a count of more than 32 bits in a routes image");
    }

    private static void writeText(DataOutputStream out, String text) throws IOException {
        byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
        writeCount(out, utf8.length);
        out.write(utf8);
    }

    private static String readText(DataInputStream in) throws IOException {
        byte[] utf8 = new byte[readCount(in)];
        in.readFully(utf8);
        return new String(utf8, StandardCharsets.UTF_8);
    }

    /**
     * The routing key a table entry {@code key -> subtask} gives: the surrogate of key group
     * {@code s + g(key) mod (e - s + 1)} of the subtask's key groups {@code s..e}.
     *
     * @param jobKey the key as the job types it (its own key group depends on its Java type)
     */
    public Object surrogateOf(Object jobKey, int subtask) {
        KeyGroupRange range = ranges[Objects.checkIndex(subtask, parallelism)];
        int own = KeyGroupRangeAssignment.assignToKeyGroup(jobKey, maxParallelism);
        return surrogates[range.getStartKeyGroup() + own % range.getNumberOfKeyGroups()];
    }

    private Object[] parts(Tables built, Object jobKey, int[] plan) {
        boolean hasEntry = built.routes().containsKey(TableKey.of(jobKey));
        int home = KeyGroupRangeAssignment.assignKeyToParallelOperator(jobKey, maxParallelism, parallelism);
        Object[] parts = new Object[plan.length];
        for (int server = 0; server < plan.length; server++) {
            parts[server] = !hasEntry && plan[server] == home ? jobKey : surrogateOf(jobKey, plan[server]);
        }
        return parts;
    }

    private Object tableKey(Object key) {
        Object jobKey = keyType.jobKey(key);
        if (keyType.isReserved(jobKey)) {
            throw new IllegalArgumentException("the table of '" + operator + "' holds " + reserved(key));
        }
        return jobKey;
    }

    private Object checked(Object key) {
        if (!keyType.javaClass().isInstance(key)) {
            throw new IllegalArgumentException("the keys of '" + operator + "' are Java "
                    + keyType.javaClass().getSimpleName() + " values; got " + key.getClass().getSimpleName()
                    + " (" + key + ")");
        }
        if (keyType.isReserved(key)) {
            throw new IllegalArgumentException("operator '" + operator + "' got " + reserved(key));
        }
        return key;
    }

    private String reserved(Object key) {
        return "key " + (key instanceof String text ? text.replace("\u0000", "\\u0000") : key)
                + ", whose form is reserved for Flink surrogates (" + keyType.label() + ")";
    }
}
