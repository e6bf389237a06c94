package io.dlock;

import io.dlock.internal.dlock_event;
import io.dlock.internal.dlock_event_type;
import io.dlock.internal.dlock_severity;
import java.nio.charset.StandardCharsets;
import java.time.Instant;

/**
 * Something the library noticed about a client's locks (dlock.h's dlock_event): a lost lease, a
 * max-hold trip, a release that found the row taken, a renewal retried, a cleanup run, a setting
 * unfit for the topology (a short ttl on Galera). Read them with {@link
 * DLockClient#nextEvent(java.time.Duration)}.
 */
public final class DLockEvent {
  /** What happened. */
  public enum Type {
    LOST,
    MAX_HOLD,
    RELEASE_GONE,
    RENEW_RETRY,
    CLEANUP,
    TOPOLOGY,
    OTHER
  }

  /** How bad it is. */
  public enum Severity {
    INFO,
    WARNING,
    CRITICAL
  }

  private final Type type;
  private final Severity severity;
  private final Instant time;
  private final long token;
  private final String key;
  private final String owner;
  private final String message;

  DLockEvent(dlock_event e) {
    switch (e.getType()) {
      case dlock_event_type.DLOCK_EVENT_LOST:
        type = Type.LOST;
        break;
      case dlock_event_type.DLOCK_EVENT_MAX_HOLD:
        type = Type.MAX_HOLD;
        break;
      case dlock_event_type.DLOCK_EVENT_RELEASE_GONE:
        type = Type.RELEASE_GONE;
        break;
      case dlock_event_type.DLOCK_EVENT_RENEW_RETRY:
        type = Type.RENEW_RETRY;
        break;
      case dlock_event_type.DLOCK_EVENT_CLEANUP:
        type = Type.CLEANUP;
        break;
      case dlock_event_type.DLOCK_EVENT_TOPOLOGY:
        type = Type.TOPOLOGY;
        break;
      default:
        type = Type.OTHER;
    }
    switch (e.getSeverity()) {
      case dlock_severity.DLOCK_SEVERITY_CRITICAL:
        severity = Severity.CRITICAL;
        break;
      case dlock_severity.DLOCK_SEVERITY_WARNING:
        severity = Severity.WARNING;
        break;
      default:
        severity = Severity.INFO;
    }
    time = Instant.ofEpochMilli(e.getUnix_ms());
    token = e.getToken();
    key = new String(e.getKey(), StandardCharsets.UTF_8);
    owner = new String(e.getOwner(), StandardCharsets.UTF_8);
    message = new String(e.getMessage(), StandardCharsets.UTF_8);
  }

  public Type type() {
    return type;
  }

  public Severity severity() {
    return severity;
  }

  /** Wall-clock time it was raised, for logs. */
  public Instant time() {
    return time;
  }

  /** Fencing token of the lease concerned, or 0. */
  public long token() {
    return token;
  }

  public String key() {
    return key;
  }

  public String owner() {
    return owner;
  }

  public String message() {
    return message;
  }

  @Override
  public String toString() {
    return severity + " " + type + " " + key + " (token " + token + "): " + message;
  }
}
