package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * Not acquired within the wait: another holder had the lock ({@code DLOCK_BUSY}). Thrown
 * only where a method cannot return {@code false}, e.g.
 * {@link DLockClient#withLock(String, java.time.Duration, java.util.concurrent.Callable)}.
 */
public class LockBusyException extends DLockException {
  private static final long serialVersionUID = 1L;

  public LockBusyException(String message) {
    super(dlock_code.DLOCK_BUSY, 0, message);
  }
}
