package io.locality.flink;

import io.locality.sketch.AsyncSketchPublisher;
import io.locality.sketch.SketchInterval;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a {@link KeyPairSketcher} subtask logs of its publications: a store that cannot be written once per run
 * of failures (a warning naming the store and the error), its return (how many intervals were dropped), each
 * interval dropped because the store was slower than the intervals; each publication at debug level.
 */
final class SketchLog implements AsyncSketchPublisher.Listener {
    private static final Logger LOG = LoggerFactory.getLogger(KeyPairSketcher.class);

    private final String store;
    private final String publisher;

    SketchLog(String store, String publisher) {
        this.store = store;
        this.publisher = publisher;
    }

    @Override
    public void published(SketchInterval interval, List<String> names) {
        LOG.debug("published {} sketches of {} as {} into {}", names.size(), interval.name(), publisher, store);
    }

    @Override
    public void failing(SketchInterval interval, Exception why) {
        LOG.warn("cannot publish the sketches of {} as {} into {}: {}. They are dropped, and so are the next "
                + "intervals' until the store takes them (the job runs on; this is logged once)", interval.name(),
                publisher, store, why.toString());
    }

    @Override
    public void resumed(SketchInterval interval, int dropped) {
        LOG.info("the store {} takes the sketches of {} again, from {} on: {} intervals' sketches were dropped",
                store, publisher, interval.name(), dropped);
    }

    @Override
    public void dropped(SketchInterval interval, String why) {
        LOG.warn("the sketches of {} as {} are dropped: {}", interval.name(), publisher, why);
    }
}
