package io.locality.sketch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Every record is sketched with weight 1 within the budget; above it, about the budget's records a second, weighted
 * so that the total is estimated without bias; the weight follows the rate of the last window; the clock is read
 * once every {@value RecordSampler#RECORDS_PER_CLOCK_READ} records. Seeded: the same draws at every run.
 */
class RecordSamplerTest {
    private static final long SEED = 40;

    /** A clock the test sets, and counts the reads of. */
    private static final class Clock {
        long now;
        long reads;

        long read() {
            reads++;
            return now;
        }
    }

    /** What the sampler gave the records of one second: their weights, 0 for the records it left out. */
    private record Second(long sampled, double totalWeight, Set<Double> weights) {}

    /** Asks {@code sampler} for {@code rate} records spread evenly over the second starting at {@code start}. */
    private static Second second(RecordSampler sampler, Clock clock, long start, int rate) {
        long sampled = 0;
        double total = 0;
        Set<Double> weights = new TreeSet<>();
        for (int i = 0; i < rate; i++) {
            clock.now = start + i * 1000L / rate;
            double weight = sampler.next();
            if (weight > 0) {
                sampled++;
                total += weight;
                weights.add(weight);
            }
        }
        return new Second(sampled, total, weights);
    }

    @Test
    void withinTheBudgetEveryRecordIsSketchedWithWeightOne() {
        Clock clock = new Clock();
        RecordSampler sampler = new RecordSampler(10_000, clock::read, SEED);
        for (int s = 0; s < 5; s++) {
            Second second = second(sampler, clock, s * 1000L, 10_000); // at the budget: not above it
            assertEquals(10_000, second.sampled(), "second " + s);
            assertEquals(Set.of(1.0), second.weights(), "second " + s);
        }
    }

    @Test
    void aboveTheBudgetAboutTheBudgetIsSketchedAndTheTotalIsEstimatedWithoutBias() {
        int budget = 1_000;
        int rate = 100_000;
        int seconds = 30;
        Clock clock = new Clock();
        RecordSampler sampler = new RecordSampler(budget, clock::read, SEED);
        Second first = second(sampler, clock, 0, rate);
        // The first window (100 ms and up to the next clock read) knows no rate yet: every record.
        assertTrue(first.sampled() > 0.1 * rate && first.sampled() < 0.11 * rate + budget, first.toString());
        long updates = 0;
        double total = first.totalWeight();
        for (int s = 1; s < seconds; s++) {
            Second second = second(sampler, clock, s * 1000L, rate);
            // The rate of a window is measured at clock reads, 1,024 records apart: within 1% of 100,000 a second.
            for (double weight : second.weights()) {
                assertTrue(Math.abs(weight - 100) < 2, "1/p = rate / budget, " + weight);
            }
            // Binomial(100,000, 0.01): standard deviation 31.5, so 15% is 4.7 of them.
            assertTrue(Math.abs(second.sampled() - budget) < 0.15 * budget, second.toString());
            updates += second.sampled();
            total += second.totalWeight();
        }
        assertTrue(Math.abs(updates - (seconds - 1) * budget) < 0.02 * (seconds - 1) * budget,
                updates + " updates in " + (seconds - 1) + " s");
        // Horvitz-Thompson: the variance of the total is the sum over the records of 1/p - 1.
        double deviation = Math.sqrt((seconds - 1) * (double) rate * (100 - 1));
        double records = (double) seconds * rate;
        assertTrue(Math.abs(total - records) < 4 * deviation, "total weight " + total + " for " + records
                + " records, standard deviation " + deviation);
    }

    @Test
    void theWeightFollowsTheRateWithinAWindowAndTheClockIsReadOncePerBlockOfRecords() {
        Clock clock = new Clock();
        RecordSampler sampler = new RecordSampler(20_000, clock::read, SEED);
        long reads = clock.reads;
        Second slow = second(sampler, clock, 0, 10_000);
        assertEquals(Set.of(1.0), slow.weights());
        assertEquals(10_000 / RecordSampler.RECORDS_PER_CLOCK_READ, clock.reads - reads, "one read per 1,024 records");
        second(sampler, clock, 1000, 100_000); // a burst: its first window at the slow p, then 1/p = 5
        Second fast = second(sampler, clock, 2000, 100_000);
        assertTrue(fast.weights().stream().allMatch(w -> Math.abs(w - 5) < 0.1), fast.toString());
        Second slowAgain = second(sampler, clock, 3000, 10_000);
        assertTrue(slowAgain.sampled() > 0.7 * 10_000, "within a few windows the weight is back to 1: " + slowAgain);
        Second afterIdle = second(sampler, clock, 60_000, 10_000); // 57 s without a record: a slow window
        assertEquals(Set.of(1.0), afterIdle.weights());
        assertEquals(10_000, afterIdle.sampled());
    }

    @Test
    void aClockThatStepsBackStartsANewWindowAndKeepsTheWeight() {
        Clock clock = new Clock();
        RecordSampler sampler = new RecordSampler(1_000, clock::read, SEED);
        second(sampler, clock, 100_000, 50_000);
        second(sampler, clock, 101_000, 50_000);
        Second back = second(sampler, clock, 40_000, 50_000); // the clock stepped back a minute
        assertTrue(back.weights().stream().allMatch(w -> Math.abs(w - 50) < 1), back.toString());
    }

    @Test
    void theSameSeedGivesTheSameSample() {
        Clock clock = new Clock();
        RecordSampler one = new RecordSampler(100, clock::read, SEED);
        RecordSampler other = new RecordSampler(100, clock::read, SEED);
        for (int i = 0; i < 50_000; i++) {
            clock.now = i / 10;
            assertEquals(one.next(), other.next(), "record " + i);
        }
    }

    @Test
    void aBudgetBelowOneOrNoClockIsRefusedByName() {
        IllegalArgumentException budget = assertThrows(IllegalArgumentException.class,
                () -> new RecordSampler(0, System::currentTimeMillis));
        assertTrue(budget.getMessage().contains("'updatesPerSecond'"), budget.getMessage());
        IllegalArgumentException clock = assertThrows(IllegalArgumentException.class, () -> new RecordSampler(1, null));
        assertTrue(clock.getMessage().contains("'clock'"), clock.getMessage());
    }
}
