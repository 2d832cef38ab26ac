package io.locality.schedule;

import java.io.IOException;

/**
 * A record's point stayed at or past the switch schedule's seal longer than a job may wait: its version is
 * not settled, so routing it could disagree with another instance. The message names the seal and the
 * point. The publisher that extends the schedule ({@code locality reconfigure --switch-after},
 * {@code locality seal}) is late; the Python {@code Router} raises {@code ScheduleExpiredError} alike.
 */
public final class ScheduleExpiredException extends IOException {
    private static final long serialVersionUID = 1L;

    public ScheduleExpiredException(String message) {
        super(message);
    }
}
