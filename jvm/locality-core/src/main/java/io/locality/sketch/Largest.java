package io.locality.sketch;

import java.util.Arrays;

/**
 * Which candidates a {@link SpaceSaving} merge keeps: the {@code m} largest counts, exactly as the Python sketch's
 * {@code _largest} picks them.
 *
 * <p>Ties at the threshold keep the smaller error first (tighter bounds), then the earlier position (the sketch's
 * own counters, then the other's new keys in its order), so the choice is deterministic and the same in both
 * languages.
 */
final class Largest {
    private Largest() {}

    /**
     * The positions, in increasing order, of the {@code m} largest of the first {@code size} candidates; all of them
     * when {@code size <= m}.
     */
    static int[] positions(double[] count, double[] error, int size, int m) {
        if (size <= m) {
            int[] all = new int[size];
            Arrays.setAll(all, i -> i);
            return all;
        }
        double threshold = kthLargest(Arrays.copyOf(count, size), m);
        int above = 0;
        int ties = 0;
        for (int i = 0; i < size; i++) {
            above += count[i] > threshold ? 1 : 0;
            ties += count[i] == threshold ? 1 : 0;
        }
        int need = m - above; // 1 <= need <= ties, as the threshold is the m-th largest count
        double cut = 0; // when not every tie fits: the need-th smallest error among the ties
        int atCut = 0; // how many ties with an error equal to the cut fit, the first in order
        if (need < ties) {
            double[] tieErrors = new double[ties];
            for (int i = 0, t = 0; i < size; i++) {
                if (count[i] == threshold) {
                    tieErrors[t++] = error[i];
                }
            }
            Arrays.sort(tieErrors);
            cut = tieErrors[need - 1];
            atCut = need;
            for (double e : tieErrors) {
                atCut -= e < cut ? 1 : 0;
            }
        }
        int[] kept = new int[m];
        int k = 0;
        for (int i = 0; i < size; i++) {
            boolean tie = count[i] == threshold;
            if (count[i] > threshold
                    || tie && (need == ties || error[i] < cut || error[i] == cut && atCut-- > 0)) {
                kept[k++] = i;
            }
        }
        return kept;
    }

    /** The {@code k}-th largest of {@code values} (sorted in place; 1 <= k <= length). */
    private static double kthLargest(double[] values, int k) {
        Arrays.sort(values);
        return values[values.length - k];
    }
}
