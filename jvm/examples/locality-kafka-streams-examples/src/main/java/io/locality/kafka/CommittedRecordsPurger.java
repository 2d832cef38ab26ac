package io.locality.kafka;

import java.io.Closeable;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Deletes the records of an application's own topics that the application has consumed and committed, every
 * {@code interval}: what Kafka Streams does for its repartition topics.
 *
 * <p>The switching job's routed and handover topics keep their records without a time limit
 * ({@code retention.ms=-1}, {@link SwitchTopics}): a record's timestamp is its event time, and a replay of
 * old events would otherwise see the broker delete them as expired before the job read them. So the job
 * deletes them itself, but only below the offsets its consumer group has committed, which it never reads
 * again, even after a restart. Every instance may run one (deleting up to the same offsets twice is
 * harmless); a failed round is logged and tried again at the next.
 */
public final class CommittedRecordsPurger implements Closeable {
    private static final Logger log = LoggerFactory.getLogger(CommittedRecordsPurger.class);
    private static final long TIMEOUT_SECONDS = 30;

    private final Admin admin;
    private final String groupId;
    private final Set<String> topics;
    private final Map<TopicPartition, Long> purged = new HashMap<>();
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(runnable -> {
        Thread thread = new Thread(runnable, "locality-purger");
        thread.setDaemon(true);
        return thread;
    });

    /** Purges {@code topics} below the offsets consumer group {@code groupId} committed, every {@code interval}. */
    public CommittedRecordsPurger(Admin admin, String groupId, Set<String> topics, Duration interval) {
        this.admin = admin;
        this.groupId = groupId;
        this.topics = Set.copyOf(topics);
        timer.scheduleWithFixedDelay(this::purgeQuietly, interval.toMillis(), interval.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Deletes what was committed since the last round; the number of partitions purged. */
    int purge() throws ExecutionException, InterruptedException, TimeoutException {
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(groupId)
                .partitionsToOffsetAndMetadata().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
        Map<TopicPartition, RecordsToDelete> deletions = new HashMap<>();
        committed.forEach((partition, offset) -> {
            if (offset != null && topics.contains(partition.topic())
                    && offset.offset() > purged.getOrDefault(partition, 0L)) {
                deletions.put(partition, RecordsToDelete.beforeOffset(offset.offset()));
            }
        });
        if (!deletions.isEmpty()) {
            admin.deleteRecords(deletions).all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
            deletions.forEach((partition, deletion) -> purged.put(partition, deletion.beforeOffset()));
        }
        return deletions.size();
    }

    private void purgeQuietly() {
        try {
            purge();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException | RuntimeException e) {
            log.warn("could not delete the committed records of {}: {}", topics, e.toString());
        }
    }

    @Override
    public void close() {
        timer.shutdownNow();
        admin.close(Duration.ofSeconds(TIMEOUT_SECONDS));
    }
}
