package io.dlock;

import io.dlock.internal.dlock_code;

/**
 * Cannot connect to or authenticate with the server ({@code DLOCK_E_CONNECT}).
 */
public class ConnectionException extends DLockException {
  private static final long serialVersionUID = 1L;

  public ConnectionException(int serverErrno, String message) {
    super(dlock_code.DLOCK_E_CONNECT, serverErrno, message);
  }
}
