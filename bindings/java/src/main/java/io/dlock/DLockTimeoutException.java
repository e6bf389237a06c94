package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * A bounded wait other than a try ran out ({@code DLOCK_E_TIMEOUT}).
 */
public class DLockTimeoutException extends DLockException {
  private static final long serialVersionUID = 1L;

  public DLockTimeoutException(String message) {
    super(dlock_code.DLOCK_E_TIMEOUT, 0, message);
  }
}
