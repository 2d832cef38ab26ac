package io.locality.sketch;

import io.locality.storage.ObjectStore;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * Publishes one publisher's sketches of one interval into a store's {@code sketches/}, by the protocol Python's
 * {@code locality.engine_sketches} writes and reads (docs/store-protocol.md, "Sketches the engines publish"):
 *
 * <pre>{@code
 * sketches/<from>-<to>/pairs/<operator a>/<operator b>/<publisher>.lcss   (key of a, key of b) pairs, arity 2
 * sketches/<from>-<to>/loads/<operator>/<publisher>.lcss                  the operator's keys, arity 1
 * }</pre>
 *
 * <p>{@code <from>-<to>} is {@link SketchInterval#name()}; operator names and publisher ids are 1-100 characters of
 * {@code [A-Za-z0-9_.-]}, not starting with {@code .} (Python's {@code _NAME}); the bytes are
 * {@link SpaceSaving#toBytes()}. Each object is written once with a plain {@link ObjectStore#put}: no lease, as these
 * names never meet the store's own files, and a put is atomic on both backends. A publisher that publishes an
 * interval again under its id replaces what it published.
 */
public final class SketchPublisher {
    /** The folder under a store's root that holds the engines' sketches. */
    public static final String SKETCHES = "sketches";
    /** The name ending of a sketch object. */
    public static final String SUFFIX = ".lcss";
    /** The rule of operator names and publisher ids, as messages state it. */
    public static final String NAME_RULE = "1-100 characters of [A-Za-z0-9_.-], not starting with '.'";
    private static final Pattern NAME = Pattern.compile("(?!\\.)[A-Za-z0-9_.-]{1,100}");
    private static final String OWNER = "SketchPublisher.publish";

    private final ObjectStore store;

    public SketchPublisher(ObjectStore store) {
        this.store = store;
    }

    /** The store the sketches go to. */
    public ObjectStore store() {
        return store;
    }

    /**
     * Writes {@code pairs} and {@code loads}, the sketches {@code publisher} kept during {@code interval}, and
     * returns the names written, in order (pairs first, then loads, each in its map's order).
     *
     * @param pairs arity-2 sketches of the (key of a, key of b) pairs of the records that went from a to b
     * @param loads arity-1 sketches of each operator's keys
     * @throws IllegalArgumentException when an operator name or the publisher id breaks {@link #NAME_RULE}, a hop
     *     joins an operator to itself, a sketch has the wrong arity, or there is nothing to publish: nothing is
     *     written then
     * @throws IOException when the store cannot be written ({@link io.locality.storage.StoreUnavailableException}:
     *     it cannot be reached); the objects before the failing one are written
     */
    public List<String> publish(SketchInterval interval, String publisher, Map<Hop, SpaceSaving> pairs,
            Map<String, SpaceSaving> loads) throws IOException {
        checkName(publisher, "publisher", OWNER);
        if (pairs.isEmpty() && loads.isEmpty()) {
            throw new IllegalArgumentException(OWNER + " was given no sketch (pairs and loads are empty) for "
                    + publisher);
        }
        Map<String, SpaceSaving> objects = new LinkedHashMap<>();
        pairs.forEach((hop, sketch) -> {
            if (hop == null || hop.from().equals(hop.to())) {
                throw new IllegalArgumentException("the 'pairs' parameter of " + OWNER + " must be keyed by "
                        + "(operator a, operator b), two operators; got " + hop);
            }
            checkName(hop.from(), "pairs", OWNER);
            checkName(hop.to(), "pairs", OWNER);
            checkArity(sketch, 2, "pairs", hop.toString());
            objects.put(pairsName(interval, hop, publisher), sketch);
        });
        loads.forEach((operator, sketch) -> {
            checkName(operator, "loads", OWNER);
            checkArity(sketch, 1, "loads", "'" + operator + "'");
            objects.put(loadsName(interval, operator, publisher), sketch);
        });
        List<String> written = new ArrayList<>(objects.size());
        for (Map.Entry<String, SpaceSaving> object : objects.entrySet()) {
            store.put(object.getKey(), object.getValue().toBytes());
            written.add(object.getKey());
        }
        return written;
    }

    /**
     * {@code value} when it follows {@link #NAME_RULE}.
     *
     * @param parameter how the message names the value ({@code "publisher"})
     * @param owner the method or class that was given it
     * @throws IllegalArgumentException naming the parameter, the rule and the value
     */
    public static String checkName(String value, String parameter, String owner) {
        if (value == null || !NAME.matcher(value).matches()) {
            throw new IllegalArgumentException("the '" + parameter + "' parameter of " + owner + " must be "
                    + NAME_RULE + "; got " + (value == null ? "null" : "'" + value + "'"));
        }
        return value;
    }

    /** {@code sketches/<interval>/pairs/<a>/<b>/<publisher>.lcss}. */
    public static String pairsName(SketchInterval interval, Hop hop, String publisher) {
        return SKETCHES + "/" + interval.name() + "/pairs/" + hop.from() + "/" + hop.to() + "/" + publisher + SUFFIX;
    }

    /** {@code sketches/<interval>/loads/<operator>/<publisher>.lcss}. */
    public static String loadsName(SketchInterval interval, String operator, String publisher) {
        return SKETCHES + "/" + interval.name() + "/loads/" + operator + "/" + publisher + SUFFIX;
    }

    private static void checkArity(SpaceSaving sketch, int arity, String parameter, String what) {
        if (sketch == null || sketch.arity() != arity) {
            throw new IllegalArgumentException("the '" + parameter + "' parameter of " + OWNER + " must map " + what
                    + " to a SpaceSaving of arity " + arity + "; got " + (sketch == null ? "null"
                    : "arity " + sketch.arity()));
        }
    }
}
