package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * A wait was cancelled ({@code DLOCK_E_CANCELLED}). The binding turns the cancellation it
 * caused into {@link InterruptedException} (an interrupted waiter) or {@link IllegalStateException}
 * (the lock was closed meanwhile).
 */
public class CancelledException extends DLockException {
  private static final long serialVersionUID = 1L;

  public CancelledException(String message) {
    super(dlock_code.DLOCK_E_CANCELLED, 0, message);
  }
}
