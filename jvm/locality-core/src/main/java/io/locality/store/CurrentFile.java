package io.locality.store;

import io.locality.storage.ObjectStore;
import io.locality.storage.ObjectTooLargeException;
import io.locality.storage.StoreDamagedException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The store's {@code CURRENT}: which version is current, as docs/store-protocol.md spells it.
 *
 * <p>ASCII, at most 64 bytes: a version number of 1 to 18 digits and a newline, optionally followed by the
 * line {@code writer <32 lowercase hex digits>} and a newline (the token of the writer that moved it, which
 * fences out a writer whose lease was taken over). Stores written before the protocol hold the first line
 * only. Anything else is damage, named, never a guess: the Python reader takes the same two forms.
 */
final class CurrentFile {
    /** The object's name under the store's root. */
    static final String NAME = "CURRENT";
    /** The bytes it may hold. */
    static final int LIMIT = 64;
    private static final Pattern GRAMMAR = Pattern.compile("([0-9]{1,18})\n(?:writer [0-9a-f]{32}\n)?");
    /** Characters of a damaged CURRENT that a message shows. */
    private static final int SHOWN = 40;

    private CurrentFile() {}

    /**
     * The version {@code CURRENT} names; empty when there is none (a store that has published nothing).
     *
     * @throws StoreDamagedException naming {@code CURRENT} when it is too long, not a file or not of the
     *     grammar above
     */
    static OptionalLong read(ObjectStore objects) throws IOException {
        Optional<byte[]> data;
        try {
            data = objects.read(NAME, LIMIT);
        } catch (ObjectTooLargeException e) {
            throw new StoreDamagedException(e.getMessage() + " (" + repair(objects) + ")");
        }
        return data.isEmpty() ? OptionalLong.empty() : OptionalLong.of(parse(data.get(), objects));
    }

    /** The version number of a {@code CURRENT} holding {@code data}. */
    static long parse(byte[] data, ObjectStore objects) throws StoreDamagedException {
        String text = new String(data, StandardCharsets.ISO_8859_1); // a byte per char: no non-ASCII digit matches
        Matcher current = GRAMMAR.matcher(text);
        if (!current.matches()) {
            throw new StoreDamagedException(objects.locate(NAME) + " is damaged: " + shown(text) + " is not a version "
                    + "number and a newline, optionally followed by 'writer <32 hex digits>' and a newline ("
                    + repair(objects) + ")");
        }
        return Long.parseLong(current.group(1));
    }

    private static String repair(ObjectStore objects) {
        return "`locality rollback --store " + objects.uri() + " --to N` repairs it";
    }

    /** {@code text} quoted, its control and non-ASCII bytes escaped, cut after {@value #SHOWN} characters. */
    private static String shown(String text) {
        StringBuilder out = new StringBuilder("'");
        for (char c : text.substring(0, Math.min(SHOWN, text.length())).toCharArray()) {
            if (c == '\n') {
                out.append("\\n");
            } else if (c < 0x20 || c > 0x7e || c == '\'' || c == '\\') {
                out.append(String.format("\\x%02x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append(text.length() > SHOWN ? "'..." : "'").toString();
    }
}
