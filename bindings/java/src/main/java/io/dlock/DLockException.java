package io.dlock;

import io.dlock.internal.DLockNative;
import io.dlock.internal.dlock_code;
import java.nio.charset.StandardCharsets;

/**
 * A failed dlock call: the C code ({@link #code()}, e.g. {@code DLOCK_E_LOST}), the server's error
 * number if any, and the library's message (never a password).
 *
 * <p>Unchecked, like the exceptions of {@link java.util.concurrent.locks.Lock}. Each C error code
 * that a caller acts on has its own subclass; the others are plain {@code DLockException}s carrying
 * the code. Every exception of the binding is made by {@link #fromNative}, the one place where a C
 * code becomes a Java exception (the JNI wrapper calls it).
 */
public class DLockException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int code;
  private final int serverErrno;

  public DLockException(int code, int serverErrno, String message) {
    super(message);
    this.code = code;
    this.serverErrno = serverErrno;
  }

  /** The dlock_code (negative for errors, {@code DLOCK_BUSY} = 1 for {@link LockBusyException}). */
  public int code() {
    return code;
  }

  /** The code's stable name, e.g. {@code "DLOCK_E_LOST"}. */
  public String codeName() {
    return DLockNative.dlock_code_name(code);
  }

  /** MariaDB/Connector error number, 0 if none. */
  public int serverErrno() {
    return serverErrno;
  }

  /**
   * The exception for a C code. Called by the JNI wrapper (java.i) with the caller's dlock_error;
   * the message arrives as bytes because it may quote a key, which is any bytes.
   */
  static DLockException fromNative(int code, int serverErrno, byte[] message) {
    return of(code, serverErrno, new String(message, StandardCharsets.UTF_8));
  }

  static DLockException of(int code, int serverErrno, String m) {
    switch (code) {
      case dlock_code.DLOCK_BUSY:
        return new LockBusyException(m);
      case dlock_code.DLOCK_E_INVALID:
        return new InvalidArgumentException(m);
      case dlock_code.DLOCK_E_CONNECT:
        return new ConnectionException(serverErrno, m);
      case dlock_code.DLOCK_E_LOST:
        return new LockLostException(code, serverErrno, m);
      case dlock_code.DLOCK_E_MAX_HOLD:
        return new MaxHoldException(m);
      case dlock_code.DLOCK_E_STATE:
        return new LockStateException(m);
      case dlock_code.DLOCK_E_TIMEOUT:
        return new DLockTimeoutException(m);
      case dlock_code.DLOCK_E_CANCELLED:
        return new CancelledException(m);
      case dlock_code.DLOCK_E_UNKNOWN:
        return new OutcomeUnknownException(serverErrno, m);
      default: // READONLY, UNSUPPORTED, DB, FORKED, POOL, INTERNAL: the code says which
        return new DLockException(code, serverErrno, m);
    }
  }
}
