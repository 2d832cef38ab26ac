import io.locality.routing.RoutingConfiguration;
import io.locality.schedule.SwitchSchedule;
import io.locality.store.ConfigStore;
import io.locality.store.ScheduleFollower;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A Java reader of a store's switch schedule for {@code tests/testbed/test_store_outage.py}: what a job's
 * routing does with {@link ScheduleFollower}, logged as JSON lines on stdout (run with Java's source
 * launcher, {@code java -cp <locality-core> FollowSchedule.java ...}).
 *
 * <p>{@code FollowSchedule STORE POLL_MS OPERATOR KEYS POINTS WAITS SECONDS}: {@code KEYS}, {@code POINTS}
 * and {@code WAITS} comma-separated. Every 200 ms, the main thread routes every key at every point the known
 * schedule covers (as a job routes records of sealed points: no store read) and logs a {@code routes} line.
 * A second thread settles each point of {@code WAITS} in turn (a record past the seal waits, reading the
 * schedule every {@code POLL_MS}) and logs a {@code settled} line when it goes on. The follower's listener
 * logs every schedule taken or kept. Any exception is logged as an {@code error} line and exits 1; after
 * {@code SECONDS} it exits 0.
 */
public final class FollowSchedule {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    public static void main(String[] args) throws Exception {
        ConfigStore store = ConfigStore.open(args[0]);
        Duration poll = Duration.ofMillis(Long.parseLong(args[1]));
        String operator = args[2];
        String[] keys = args[3].split(",");
        List<Long> points = longs(args[4]);
        List<Long> waits = longs(args[5]);
        long end = System.currentTimeMillis() + 1000 * Long.parseLong(args[6]);
        ScheduleFollower follower = new ScheduleFollower(store, poll, Duration.ofSeconds(300), new Listener());
        log("{\"kind\":\"started\",\"schedule\":" + quote(follower.schedule().toString()) + "}");
        Thread waiter = new Thread(() -> {
            try {
                for (long point : waits) {
                    long version = follower.settle(point).versionAt(point);
                    follower.configuration(version);
                    log("{\"kind\":\"settled\",\"point\":" + point + ",\"version\":" + version + "}");
                }
            } catch (Throwable e) {
                fail(e);
            }
        }, "waiter");
        waiter.setDaemon(true);
        waiter.start();
        try {
            while (System.currentTimeMillis() < end) {
                SwitchSchedule known = follower.schedule();
                StringBuilder routes = new StringBuilder();
                Map<Long, Long> versions = new TreeMap<>();
                for (long point : points) {
                    if (!known.covers(point)) {
                        continue;
                    }
                    RoutingConfiguration configuration = follower.configurationAt(point);
                    versions.put(point, configuration.version());
                    routes.append(routes.length() == 0 ? "" : ",").append('"').append(point).append("\":[");
                    for (int i = 0; i < keys.length; i++) {
                        routes.append(i == 0 ? "" : ",").append(configuration.table(operator).route(keys[i]));
                    }
                    routes.append(']');
                }
                log("{\"kind\":\"routes\",\"sealed\":" + known.sealedUntil() + ",\"entries\":"
                        + known.switches().size() + ",\"versions\":" + json(versions) + ",\"routes\":{" + routes + "}}");
                Thread.sleep(200);
            }
        } catch (Throwable e) {
            fail(e);
        }
        System.exit(0);
    }

    private static final class Listener implements ScheduleFollower.WaitListener {
        @Override
        public void scheduleTaken(SwitchSchedule schedule) {
            log("{\"kind\":\"taken\",\"sealed\":" + schedule.sealedUntil() + ",\"schedule\":" + quote(schedule.toString())
                    + "}");
        }

        @Override
        public void scheduleKept(SwitchSchedule known, String why) {
            log("{\"kind\":\"kept\",\"sealed\":" + known.sealedUntil() + ",\"why\":" + quote(why) + "}");
        }
    }

    private static void fail(Throwable e) {
        log("{\"kind\":\"error\",\"error\":" + quote(e.toString()) + "}");
        System.exit(1);
    }

    private static synchronized void log(String line) {
        OUT.println("{\"t\":" + System.currentTimeMillis() / 1000.0 + "," + line.substring(1));
    }

    private static List<Long> longs(String csv) {
        List<Long> values = new ArrayList<>();
        for (String value : csv.split(",")) {
            values.add(Long.parseLong(value));
        }
        return values;
    }

    private static String json(Map<Long, Long> map) {
        StringBuilder out = new StringBuilder("{");
        map.forEach((k, v) -> out.append(out.length() == 1 ? "" : ",").append('"').append(k).append("\":").append(v));
        return out.append('}').toString();
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
