import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;

/**
 * Prints, for every key of a keys file, the task index {@link LocalityRoutes} chooses for it.
 *
 * <p>Arguments: a routing file, a keys file (one key per line: the hex of its UTF-8 bytes for string
 * keys, a decimal for long and int keys) and the keys' type (string, long, int). Output: one index per
 * line, in order.
 */
public final class StormHarness {
    public static void main(String[] args) throws Exception {
        LocalityRoutes routes = LocalityRoutes.load(Path.of(args[0]));
        String keyType = args[2];
        List<String> keys = Files.readAllLines(Path.of(args[1]), StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        for (String line : keys) {
            Object key = switch (keyType) {
                case "long" -> Long.valueOf(line);
                case "int" -> Integer.valueOf(line);
                default -> new String(HexFormat.of().parseHex(line), StandardCharsets.UTF_8);
            };
            out.append(routes.chooseTaskIndex(key)).append('\n');
        }
        System.out.print(out);
    }
}
