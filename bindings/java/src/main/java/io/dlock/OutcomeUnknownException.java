package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * The connection was lost mid-statement and the outcome could not be re-checked
 * ({@code DLOCK_E_UNKNOWN}).
 */
public class OutcomeUnknownException extends DLockException {
  private static final long serialVersionUID = 1L;

  public OutcomeUnknownException(int serverErrno, String message) {
    super(dlock_code.DLOCK_E_UNKNOWN, serverErrno, message);
  }
}
