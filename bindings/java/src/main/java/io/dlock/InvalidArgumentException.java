package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * A bad argument: URL, key, option name or value ({@code DLOCK_E_INVALID}).
 */
public class InvalidArgumentException extends DLockException {
  private static final long serialVersionUID = 1L;

  public InvalidArgumentException(String message) {
    super(dlock_code.DLOCK_E_INVALID, 0, message);
  }
}
