package io.locality.sketch;

import java.lang.System.Logger.Level;
import java.util.List;

/**
 * What an engine instance says of its sketches' publications, whatever logging its engine uses: a store that
 * cannot be written once per run of failures (a warning naming the store and the error), its return (how many
 * intervals were dropped), each interval dropped because the store was slower than the intervals; each publication
 * at debug level. The engine binds the {@link Sink} to its logger (SLF4J in Flink and Kafka Streams).
 */
public final class PublicationLog implements AsyncSketchPublisher.Listener {
    /** Where the messages go. */
    @FunctionalInterface
    public interface Sink {
        /** One message at {@code level}: {@code WARNING}, {@code INFO} or {@code DEBUG}. */
        void log(Level level, String message);
    }

    private final String store;
    private final String publisher;
    private final String runner;
    private final Sink sink;

    /**
     * @param store the store's URI, as messages name it
     * @param publisher the publisher id
     * @param runner what runs on when the store is out, as messages name it ({@code "the job"},
     *     {@code "the application"})
     */
    public PublicationLog(String store, String publisher, String runner, Sink sink) {
        this.store = store;
        this.publisher = publisher;
        this.runner = runner;
        this.sink = sink;
    }

    @Override
    public void published(SketchInterval interval, List<String> names) {
        sink.log(Level.DEBUG, "published " + names.size() + " sketches of " + interval.name() + " as " + publisher
                + " into " + store);
    }

    @Override
    public void failing(SketchInterval interval, Exception why) {
        sink.log(Level.WARNING, "cannot publish the sketches of " + interval.name() + " as " + publisher + " into "
                + store + ": " + why + ". They are dropped, and so are the next intervals' until the store takes "
                + "them (" + runner + " runs on; this is logged once)");
    }

    @Override
    public void resumed(SketchInterval interval, int dropped) {
        sink.log(Level.INFO, "the store " + store + " takes the sketches of " + publisher + " again, from "
                + interval.name() + " on: " + dropped + " intervals' sketches were dropped");
    }

    @Override
    public void dropped(SketchInterval interval, String why) {
        sink.log(Level.WARNING, "the sketches of " + interval.name() + " as " + publisher + " are dropped: " + why);
    }
}
