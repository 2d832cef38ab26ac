import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A routing table written by locality's {@code write_grouping_file}, for a Storm custom grouping.
 *
 * <p>{@link #chooseTaskIndex} returns the table's task index for a key with an entry and, for every
 * other key, the index Storm's fields grouping computes: {@code floorMod(Arrays.deepHashCode(values),
 * numTasks)} over the target tasks sorted ascending ({@code TupleUtils.chooseTaskIndex}). JDK only:
 * copy it into a topology and call it from a {@code CustomStreamGrouping} (see storm.md).
 */
public final class LocalityRoutes implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final String FORMAT = "locality-storm-routing";

    private final String operator;
    private final int numTasks;
    private final Map<Object, Integer> table;

    private LocalityRoutes(String operator, int numTasks, Map<Object, Integer> table) {
        this.operator = operator;
        this.numTasks = numTasks;
        this.table = table;
    }

    /** Reads the file; fails on anything that is not a complete routing file of version 1. */
    public static LocalityRoutes load(Path file) throws IOException {
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        String[] header = lines.isEmpty() ? new String[0] : lines.get(0).split("\t", -1);
        if (header.length != 6 || !header[0].equals(FORMAT) || !header[1].equals("1")) {
            throw new IOException(file + " is not a version 1 " + FORMAT + " file");
        }
        String keyType = header[3];
        int numTasks = Integer.parseInt(header[4]);
        int entries = Integer.parseInt(header[5]);
        Map<Object, Integer> table = new HashMap<>(2 * entries);
        for (String line : lines.subList(1, lines.size())) {
            if (line.isEmpty()) {
                continue;
            }
            int tab = line.indexOf('\t');
            int task = Integer.parseInt(line.substring(0, tab));
            String key = unescape(line.substring(tab + 1));
            Object value = switch (keyType) {
                case "string" -> key;
                case "long" -> Long.valueOf(key);
                case "int" -> Integer.valueOf(key);
                default -> throw new IOException(file + ": unknown key type " + keyType);
            };
            if (task < 0 || task >= numTasks) {
                throw new IOException(file + ": task index " + task + " outside 0.." + (numTasks - 1));
            }
            table.put(value, task);
        }
        if (table.size() != entries) {
            throw new IOException(file + ": " + table.size() + " entries, the header says " + entries);
        }
        return new LocalityRoutes(unescape(header[2]), numTasks, table);
    }

    /** Index into the target tasks sorted ascending: the table's entry, else Storm's fields grouping. */
    public int chooseTaskIndex(Object key) {
        Integer task = table.get(key);
        return task != null ? task : Math.floorMod(Arrays.deepHashCode(new Object[] {key}), numTasks);
    }

    public int numTasks() {
        return numTasks;
    }

    public String operator() {
        return operator;
    }

    private static String unescape(String text) {
        StringBuilder out = new StringBuilder(text.length());
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '\\' && i + 1 < text.length()) {
                char code = text.charAt(++i);
                c = switch (code) {
                    case 't' -> '\t';
                    case 'n' -> '\n';
                    case 'r' -> '\r';
                    default -> code;
                };
            }
            out.append(c);
        }
        return out.toString();
    }
}
