package io.locality.kafka.switching;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.OptionalLong;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The record headers through which the stages of a switching job talk to each other: where a record goes,
 * the switch markers, and the handover messages. Values are decimal ASCII text (readable with any
 * console consumer).
 *
 * <ul>
 *   <li>{@value #PARTITION}: the partition the record goes to ({@link HeaderPartitioner} obeys it); a
 *       record routed by point carries the partition of the version in force at its point.
 *   <li>{@value #BROADCAST}: the record goes to every partition (markers, handover done messages).
 *   <li>{@value #MARKER}: a marker of the switch at that point: its sender ({@value #FROM}, the partition
 *       of the upstream task) has sent every record before the point into the topic; {@value #UPSTREAMS}
 *       says how many upstream tasks send markers.
 *   <li>{@value #HANDOVER}: a handover message ({@link Kind}) of the switch at {@value #SWITCH}, sent by
 *       the task of partition {@value #FROM}.
 * </ul>
 */
public final class SwitchHeaders {
    public static final String PARTITION = "locality.partition";
    public static final String BROADCAST = "locality.broadcast";
    public static final String MARKER = "locality.marker";
    public static final String UPSTREAMS = "locality.upstreams";
    public static final String FROM = "locality.from";
    public static final String HANDOVER = "locality.handover";
    public static final String SWITCH = "locality.switch";

    private static final String[] PROTOCOL = {PARTITION, BROADCAST, MARKER, UPSTREAMS, FROM, HANDOVER, SWITCH};
    private static final byte[] YES = {'1'};

    /** What a handover message carries. */
    public enum Kind {
        /** The state of one key, for its new owner (key: the key, value: the state, both serialized). */
        STATE,
        /** Its sender has sent the state of every key it hands over at this switch. */
        DONE,
        /** A record that reached its old owner after the owner handed its key over (an out-of-order record). */
        LATE
    }

    private SwitchHeaders() {}

    /** The headers of a marker of the switch at {@code point} from upstream task {@code from} of {@code upstreams}. */
    public static Headers marker(long point, int from, int upstreams) {
        return broadcast().add(MARKER, text(point)).add(FROM, text(from)).add(UPSTREAMS, text(upstreams));
    }

    /** The switch point of a marker; empty for any other record. */
    public static OptionalLong markerPoint(Headers headers) {
        Header marker = headers.lastHeader(MARKER);
        return marker == null ? OptionalLong.empty() : OptionalLong.of(parse(marker, MARKER));
    }

    /** The kind of a handover message; empty for any other record. */
    public static Optional<Kind> handover(Headers headers) {
        Header kind = headers.lastHeader(HANDOVER);
        return kind == null ? Optional.empty() : Optional.of(Kind.valueOf(new String(kind.value(), StandardCharsets.US_ASCII)));
    }

    /**
     * A handover message of {@code kind} (state or late record) for the switch at {@code point}, from task
     * {@code from} to partition {@code to}, keeping the record's own headers {@code user}.
     */
    public static Headers handoverTo(Kind kind, long point, int from, int to, Headers user) {
        return toPartition(user, to).add(HANDOVER, kind.name().getBytes(StandardCharsets.US_ASCII))
                .add(SWITCH, text(point))
                .add(FROM, text(from));
    }

    /** The message, to every partition, that task {@code from} has handed over every key it gives away at {@code point}. */
    public static Headers handoverDone(long point, int from) {
        return broadcast().add(HANDOVER, Kind.DONE.name().getBytes(StandardCharsets.US_ASCII))
                .add(SWITCH, text(point))
                .add(FROM, text(from));
    }

    /** {@code headers} without this protocol's, plus the partition the record goes to. */
    public static Headers toPartition(Headers headers, int partition) {
        return withoutProtocol(headers).add(PARTITION, text(partition));
    }

    /** A copy of {@code headers} without this protocol's (the user's own headers only). */
    public static Headers withoutProtocol(Headers headers) {
        Headers copy = new RecordHeaders(headers.toArray());
        for (String name : PROTOCOL) {
            copy.remove(name);
        }
        return copy;
    }

    /** The partition a record goes to; empty when it carries none. */
    public static OptionalLong partition(Headers headers) {
        Header partition = headers.lastHeader(PARTITION);
        return partition == null ? OptionalLong.empty() : OptionalLong.of(parse(partition, PARTITION));
    }

    /** True when the record goes to every partition. */
    public static boolean isBroadcast(Headers headers) {
        return headers.lastHeader(BROADCAST) != null;
    }

    /**
     * The integer value of header {@code name}.
     *
     * @throws IllegalStateException when the record lacks it: a message of this protocol is malformed
     */
    public static long number(Headers headers, String name) {
        Header header = headers.lastHeader(name);
        if (header == null) {
            throw new IllegalStateException("a switch protocol message lacks its '" + name + "' header: "
                    + describe(headers));
        }
        return parse(header, name);
    }

    private static Headers broadcast() {
        return new RecordHeaders().add(BROADCAST, YES);
    }

    private static byte[] text(long value) {
        return Long.toString(value).getBytes(StandardCharsets.US_ASCII);
    }

    private static long parse(Header header, String name) {
        String text = header.value() == null ? "" : new String(header.value(), StandardCharsets.US_ASCII);
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new IllegalStateException("header '" + name + "' must be a decimal integer; got '" + text + "'");
        }
    }

    private static String describe(Headers headers) {
        StringBuilder text = new StringBuilder("[");
        for (Header header : headers) {
            text.append(text.length() > 1 ? ", " : "").append(header.key()).append('=')
                    .append(header.value() == null ? "null" : new String(header.value(), StandardCharsets.US_ASCII));
        }
        return text.append(']').toString();
    }
}
