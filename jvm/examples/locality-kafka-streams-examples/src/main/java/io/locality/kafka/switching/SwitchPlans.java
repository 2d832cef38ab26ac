package io.locality.kafka.switching;

import io.locality.routing.KeyMoves;
import io.locality.routing.RoutingTable;
import io.locality.schedule.SwitchSchedule;
import io.locality.store.ScheduleFollower;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * An operator's tables as the schedule puts them in force: at a point, on both sides of each switch, and the
 * keys each switch moves (computed once per application instance from the two versions, which are immutable,
 * and shared by the instance's tasks).
 */
public final class SwitchPlans {
    private final String operator;
    private final ScheduleFollower schedule;
    private final Map<SwitchSchedule.Switch, List<KeyMoves.Move>> moves = new ConcurrentHashMap<>();

    public SwitchPlans(String operator, ScheduleFollower schedule) {
        this.operator = operator;
        this.schedule = schedule;
    }

    public String operator() {
        return operator;
    }

    /** The operator's table in {@code version}. */
    RoutingTable table(long version) {
        try {
            return schedule.configuration(version).table(operator);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot load version " + version + " of the store for '" + operator + "'", e);
        }
    }

    /** The operator's table in the version in force at {@code point} (waits as {@link #settle(long)} does). */
    RoutingTable tableAt(long point) {
        return table(settle(point).versionAt(point));
    }

    /** Every key of the operator whose instance changes at {@code change}. */
    List<KeyMoves.Move> moves(SwitchSchedule.Switch change) {
        return moves.computeIfAbsent(change, c -> KeyMoves.between(table(c.from()), table(c.to())));
    }

    /** The schedule settled at {@code point} (waits as {@link ScheduleFollower#settle(long)} does). */
    SwitchSchedule settle(long point) {
        try {
            return schedule.settle(point);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the switch schedule for the point " + point, e);
        }
    }

    /** The schedule as last read. */
    SwitchSchedule known() {
        return schedule.schedule();
    }
}
