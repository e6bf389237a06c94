package io.dlock;

import io.dlock.internal.DLockNative;
import java.io.IOException;
import java.nio.channels.spi.AbstractInterruptibleChannel;

/**
 * Turns Thread.interrupt() into dlock_cancel while a platform thread waits inside the library.
 *
 * <p>A thread in native code does not notice interrupts. AbstractInterruptibleChannel is the JDK's
 * public hook for "run this when the thread blocked in me is interrupted": between enter() and
 * exit(), an interrupt of the thread closes this one-shot channel, on the interrupting thread, and
 * closing calls dlock_cancel, which makes the waiting dlock_try return DLOCK_E_CANCELLED promptly.
 * After exit() returns, no cancel can happen any more.
 */
final class CancelOnInterrupt extends AbstractInterruptibleChannel {
  private final long lock;
  private volatile boolean fired;

  CancelOnInterrupt(long lock) {
    this.lock = lock;
  }

  void enter() {
    begin();
  }

  /** Ends the wait (idempotent); true if an interrupt cancelled (or tried to cancel) it. */
  boolean exit() {
    try {
      end(true);
    } catch (IOException e) {
      // ClosedByInterruptException: the interrupt arrived during the wait.
    }
    return fired;
  }

  @Override
  protected void implCloseChannel() {
    fired = true;
    DLockNative.dlock_cancel(lock);
  }
}
