package io.locality.kafka;

import io.locality.routing.RoutingConfiguration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The topics of a switching job beside its input and output: per operator, a <em>routed</em> topic (its
 * records, each in the partition of the version in force at its point, and the switch markers) and a
 * <em>handover</em> topic (the state of moved keys between its tasks), each with one partition per instance
 * of the operator. They are the application's own, named after its {@code application.id}; every instance
 * creates those that are missing when it starts (a rerun, or several instances starting at once, find them
 * made) and refuses one with another partition count. They keep their records without a time limit, since a
 * record's timestamp is its event time, which may lie far in the past; the job deletes what it committed
 * ({@link CommittedRecordsPurger}).
 */
public final class SwitchTopics {
    private static final long TIMEOUT_SECONDS = 60;

    /** The settings of the topics this class creates: no time limit on records (see above). */
    static final Map<String, String> SETTINGS = Map.of("retention.ms", "-1");

    private SwitchTopics() {}

    /** The routed and handover topics of every operator of {@code tables}. */
    public static Set<String> of(String applicationId, RoutingConfiguration tables) {
        return partitions(applicationId, tables).keySet();
    }

    /** Each routed and handover topic with its partition count: the instances of its operator. */
    private static Map<String, Integer> partitions(String applicationId, RoutingConfiguration tables) {
        Map<String, Integer> topics = new LinkedHashMap<>();
        for (String operator : tables.topology().operators()) {
            int instances = tables.table(operator).numInstances();
            topics.put(routed(applicationId, operator), instances);
            topics.put(handover(applicationId, operator), instances);
        }
        return topics;
    }

    /** The topic feeding {@code operator}'s stage, routed by point. */
    public static String routed(String applicationId, String operator) {
        return applicationId + "-" + operator + "-routed";
    }

    /** The topic through which {@code operator}'s tasks hand state over. */
    public static String handover(String applicationId, String operator) {
        return applicationId + "-" + operator + "-handover";
    }

    /**
     * Creates the missing routed and handover topics of every operator of {@code tables}.
     *
     * @return the number of partitions of {@code inputTopic}
     * @throws IllegalArgumentException when the input topic is missing or a topic has another partition count
     */
    public static int prepare(Admin admin, String applicationId, String inputTopic, RoutingConfiguration tables)
            throws ExecutionException, InterruptedException, TimeoutException {
        Map<String, Integer> wanted = partitions(applicationId, tables);
        List<NewTopic> missing = new ArrayList<>();
        var names = admin.listTopics().names().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
        if (!names.contains(inputTopic)) {
            throw new IllegalArgumentException("the input topic '" + inputTopic + "' does not exist");
        }
        wanted.forEach((name, partitions) -> {
            if (!names.contains(name)) {
                missing.add(new NewTopic(name, Optional.of(partitions), Optional.empty()).configs(SETTINGS));
            }
        });
        for (NewTopic topic : missing) {
            try {
                admin.createTopics(List.of(topic)).all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) { // another instance made it first
                    throw e;
                }
            }
        }
        List<String> described = new ArrayList<>(wanted.keySet());
        described.add(inputTopic);
        Map<String, TopicDescription> found = describe(admin, described);
        wanted.forEach((name, partitions) -> {
            int has = found.get(name).partitions().size();
            if (has != partitions) {
                throw new IllegalArgumentException("topic '" + name + "' has " + has + " partitions but its operator "
                        + "has " + partitions + " instances; delete it or use another --application-id");
            }
        });
        return found.get(inputTopic).partitions().size();
    }

    /** The topics' descriptions, once the broker knows them all (a topic just made may not be known yet). */
    private static Map<String, TopicDescription> describe(Admin admin, List<String> topics)
            throws ExecutionException, InterruptedException, TimeoutException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
        while (true) {
            try {
                return admin.describeTopics(topics).allTopicNames().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }
}
