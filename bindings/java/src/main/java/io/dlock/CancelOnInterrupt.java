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
 * closing calls dlock_cancel, which makes the waiting call return DLOCK_E_CANCELLED promptly.
 *
 * <p>No interrupt is lost, and the cancel is sent once: the caller takes a cancel mark
 * (dlock_cancel_mark) before enter() and passes it to dlock_try_from, which counts every
 * dlock_cancel on the object after the mark, also one that came before the call entered the
 * library (an interrupt landing between enter() and the call's start; enter() itself fires at once
 * for a thread already interrupted). Before dlock 1.1's mark the binding re-sent the cancel every
 * 50 ms for that gap. The caller holds its DLock's guard from before enter() until after exit(),
 * so the lock handle stays valid meanwhile.
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

  /**
   * Ends the wait (idempotent); true if an interrupt cancelled it. After it returns, nothing of
   * this object touches the lock handle any more.
   */
  boolean exit() {
    try {
      end(true); // after this no interrupt reaches implCloseChannel
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
