package io.locality.flink.job;

import java.util.Locale;

/** How the two-stage job keys its operators. */
public enum Mode {
    /** On the routing keys of the store's tables ({@code RoutingKeySelector}): the tables take effect. */
    TABLES,
    /** On the raw keys: Flink's own hash places every key (the baseline the tables are measured against). */
    RAW;

    /** {@code tables} or {@code raw}. */
    public static Mode parse(String text) {
        for (Mode mode : values()) {
            if (mode.label().equals(text)) {
                return mode;
            }
        }
        throw new IllegalArgumentException("--mode must be tables or raw; got '" + text + "'");
    }

    public String label() {
        return name().toLowerCase(Locale.ROOT);
    }
}
