package io.locality.flink;

import java.io.IOException;
import java.lang.ref.WeakReference;
import java.util.HashMap;
import java.util.Map;

/**
 * One copy per class loader of a large read-only value every task of a TaskManager needs: the routes of
 * a table, the lines of an input.
 *
 * <p>Flink gives each task its own deserialized functions, so a value each of them loads or decodes is
 * held once per task: a TaskManager of six slots holds six. {@link #of} hands every caller with the same
 * name the one value already loaded, for as long as any task holds it (a weak reference: a finished job's
 * values go with it). One caller loads while the others wait, so two copies never exist at once.
 */
public final class SharedCopies {
    /** Name -> the value loaded under it, while someone holds it. */
    private static final Map<String, WeakReference<Object>> LOADED = new HashMap<>();

    private SharedCopies() {}

    /** How to load a value the first time it is asked for. */
    @FunctionalInterface
    public interface Loader<V> {
        V load() throws IOException;
    }

    /**
     * The value loaded under {@code name}, loaded by {@code loader} when nobody holds one.
     *
     * @param name what names the value, content and all (a digest of it, or a path whose file does not
     *     change while the job runs)
     * @throws IOException as {@code loader}
     */
    @SuppressWarnings("unchecked")
    public static <V> V of(String name, Loader<V> loader) throws IOException {
        synchronized (LOADED) {
            WeakReference<Object> held = LOADED.get(name);
            Object value = held == null ? null : held.get();
            if (value == null) {
                value = loader.load();
                LOADED.values().removeIf(reference -> reference.get() == null);
                LOADED.put(name, new WeakReference<>(value));
            }
            return (V) value;
        }
    }
}
