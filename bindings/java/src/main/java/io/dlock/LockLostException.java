package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * The lock is no longer ours: the lease expired or was taken, or the row lock's connection
 * died ({@code DLOCK_E_LOST}). Work done under it must not be trusted; the other holder's row was
 * not touched.
 */
public class LockLostException extends DLockException {
  private static final long serialVersionUID = 1L;

  public LockLostException(String message) {
    this(dlock_code.DLOCK_E_LOST, 0, message);
  }

  protected LockLostException(int code, int serverErrno, String message) {
    super(code, serverErrno, message);
  }
}
