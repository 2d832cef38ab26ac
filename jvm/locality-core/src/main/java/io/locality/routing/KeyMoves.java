package io.locality.routing;

import io.locality.hashing.TableKey;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The keys of one operator whose instance changes from one version of its table to another: what moves
 * at a switch (the migration plan's keys, computed from the two tables alone, as the Python
 * {@code RoutingSnapshot.plan_from} does without state sizes).
 *
 * <p>A key without an entry in either table goes to the fallback hash in both, so only keys with an entry
 * in one of them can move, provided both tables fall back on the same hash over the same number of
 * instances. A change of either is a redeployment, not a switch, and is refused. Split keys move with
 * their home instance.
 */
public final class KeyMoves {
    private KeyMoves() {}

    /**
     * One moved key.
     *
     * @param key the key as the job holds it ({@code Integer} for tables with {@code int_type: int})
     * @param from its instance before the switch
     * @param to its instance after
     */
    public record Move(Object key, int from, int to) {}

    /**
     * Every key whose instance differs between {@code before} and {@code after}.
     *
     * @throws IllegalArgumentException when the tables are of different operators, or fall back on different
     *     hashes or instance counts
     */
    public static List<Move> between(RoutingTable before, RoutingTable after) {
        if (!before.operator().equals(after.operator())) {
            throw new IllegalArgumentException("moves are between two tables of one operator; got '"
                    + before.operator() + "' and '" + after.operator() + "'");
        }
        if (!before.fallbackSpec().equals(after.fallbackSpec())) {
            throw new IllegalArgumentException("the tables of '" + before.operator() + "' fall back on "
                    + before.fallbackSpec() + " before and " + after.fallbackSpec() + " after: a change of fallback "
                    + "hash or of instance count moves every key, which is a redeployment, not a switch");
        }
        Set<Object> candidates = new HashSet<>(before.entries().keySet());
        candidates.addAll(after.entries().keySet());
        String intType = before.fallbackSpec().intType();
        List<Move> moves = new ArrayList<>();
        for (Object entryKey : candidates) {
            Object key = TableKey.asJobKey(entryKey, intType);
            int from = before.route(key);
            int to = after.route(key);
            if (from != to) {
                moves.add(new Move(key, from, to));
            }
        }
        return moves;
    }
}
