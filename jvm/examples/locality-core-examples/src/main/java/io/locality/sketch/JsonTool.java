package io.locality.sketch;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;

/**
 * The exit rules of the sketch tools the tests run: the result as one JSON document on stdout and status 0; status
 * 2 when an argument, a file's content or a name is wrong, 1 when a file cannot be read or the store written, the
 * message on stderr.
 */
final class JsonTool {
    /** A tool's work on its arguments. */
    interface Run {
        Object apply(String[] args) throws IOException;
    }

    private JsonTool() {}

    static void main(String[] args, Run run) {
        try {
            System.out.println(new ObjectMapper().writeValueAsString(run.apply(args)));
        } catch (IllegalArgumentException e) { // a SketchFormatException too
            System.err.println("error: " + e.getMessage());
            System.exit(2);
        } catch (IOException e) {
            System.err.println("error: " + e.getMessage());
            System.exit(1);
        }
    }
}
