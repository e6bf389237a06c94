package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * Renewal refused: the lock's max hold time ({@code max_hold_ms}) passed
 * ({@code DLOCK_E_MAX_HOLD}). The lease runs out at its expiry: treat it as lost.
 */
public class MaxHoldException extends LockLostException {
  private static final long serialVersionUID = 1L;

  public MaxHoldException(String message) {
    super(dlock_code.DLOCK_E_MAX_HOLD, 0, message);
  }
}
