package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * The call is not valid in the lock's state, e.g. unlock when not held ({@code DLOCK_E_STATE}).
 */
public class LockStateException extends DLockException {
  private static final long serialVersionUID = 1L;

  public LockStateException(String message) {
    super(dlock_code.DLOCK_E_STATE, 0, message);
  }
}
