package io.locality.sketch;

import java.io.Serializable;

/**
 * Two consecutive operators of a job, the records going from the first to the second: what a sketch of key pairs
 * ({@code sketches/<interval>/pairs/<from>/<to>/}) is about.
 *
 * @param from the operator that sends the records (its key is the first component of a pair)
 * @param to the operator that receives them (its key is the second component)
 */
public record Hop(String from, String to) implements Serializable {
    @Override
    public String toString() {
        return from + " -> " + to;
    }
}
