package io.dlock;

import io.dlock.internal.DLockNative;
import io.dlock.internal.dlock_code;
import java.lang.ref.Cleaner;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A distributed lock on one key, as a {@link Lock}. Made by {@link DLockClient#newLock}; close it
 * (try-with-resources) when done: closing a held lock releases it.
 *
 * <p>Waiting, renewal (option {@code auto_renew=1}), reentrancy, fencing and cancellation are the
 * C library's; this class only adapts them to Java. A lease lost while held is reported by the next
 * {@link #renew()} or {@link #unlock()} throwing {@link LockLostException}, by {@link #isHeld()},
 * and by the {@link #onLost(Runnable)} handlers.
 *
 * <p><b>Who holds it.</b> Until the C library accepts a caller-supplied holder id, the holder is
 * this lock object (core option {@code holder=lock}): every thread that calls {@link #lock()} on
 * the same {@code DLock} while it is held re-enters it (the hold count goes up), and any thread may
 * unlock it. Threads that must exclude each other use a {@code DLock} each, as processes do. With
 * the holder id this becomes per Java thread, like {@link java.util.concurrent.locks.ReentrantLock}
 * (see {@link #holderId()}).
 *
 * <p>Thread safety: all methods may be called from any thread, including virtual threads.
 */
public final class DLock implements Lock, AutoCloseable {
  /** dlock_try's longest wait; longer waits are made of several. */
  private static final long MAX_WAIT_MS = 86_400_000L;

  /** Owns the native lock; run once, by close() or, if the lock was dropped, the Cleaner. */
  private static final class Handle implements Runnable {
    volatile long ptr;

    Handle(long ptr) {
      this.ptr = ptr;
    }

    @Override
    public void run() {
      long p = ptr;
      ptr = 0;
      DLockNative.dlock_close(p); // releases it first if held
    }
  }

  private final DLockClient client;
  private final String key;
  private final Handle handle;
  private final Cleaner.Cleanable cleanable;
  // Readers: calls that use the handle (a wait included); writer: close, which frees it.
  private final ReentrantReadWriteLock guard = new ReentrantReadWriteLock();
  private volatile boolean closing;
  private final List<Runnable> lostHandlers = new CopyOnWriteArrayList<>();
  private final Object watcherLock = new Object();
  private Thread watcher; // guarded by watcherLock

  DLock(DLockClient client, String key, long ptr) {
    this.client = client;
    this.key = key;
    this.handle = new Handle(ptr);
    this.cleanable = Natives.CLEANER.register(this, handle);
  }

  /** The key. */
  public String key() {
    return key;
  }

  /** The client this lock was made by. */
  public DLockClient client() {
    return client;
  }

  // ---- acquiring ----------------------------------------------------------------------------

  /** Waits (uninterruptibly) until the lock is held. */
  @Override
  public void lock() {
    try {
      acquire(-1, false);
    } catch (InterruptedException e) {
      throw new AssertionError(e); // not interruptible
    }
  }

  /**
   * Waits until the lock is held or the thread is interrupted; an interrupt cancels the wait inside
   * the library at once (dlock_cancel).
   */
  @Override
  public void lockInterruptibly() throws InterruptedException {
    acquire(-1, true);
  }

  /** One attempt, no waiting (one round trip to the server). */
  @Override
  public boolean tryLock() {
    try {
      return acquire(0, false);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  /** Waits at most time (interruptibly); false if another holder kept it all along. */
  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    Objects.requireNonNull(unit, "unit");
    return acquire(Math.max(0, unit.toMillis(time)), true);
  }

  /**
   * waitMs: -1 = until held, else the total wait. A wait longer than dlock_try's maximum is made of
   * consecutive tries; nothing else repeats a try, except after a cancellation meant for another
   * thread of this object (dlock_cancel cancels every wait on the object).
   */
  private boolean acquire(long waitMs, boolean interruptible) throws InterruptedException {
    if (interruptible && Thread.interrupted()) throw new InterruptedException();
    guard.readLock().lock();
    try {
      ensureOpen();
      final long start = System.nanoTime();
      for (;; ) {
        long slice = MAX_WAIT_MS;
        if (waitMs >= 0) {
          long left = waitMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
          slice = Math.min(MAX_WAIT_MS, Math.max(0, left));
        }
        int rc;
        try {
          rc = waitInLibrary(slice, interruptible);
        } catch (CancelledException e) {
          if (closing) throw closedWhileWaiting();
          continue; // another thread's interrupt: this wait goes on
        }
        if (rc == dlock_code.DLOCK_OK) {
          watchIfNeeded();
          return true;
        }
        if (waitMs >= 0 && TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= waitMs) {
          return false;
        }
      }
    } finally {
      guard.readLock().unlock();
    }
  }

  /** One dlock_try; throws InterruptedException if an interrupt of this thread cancelled it. */
  private int waitInLibrary(long waitMs, boolean interruptible) throws InterruptedException {
    final long ptr = handle.ptr;
    if (waitMs > 0 && Natives.onVirtualThread()) return waitOnHost(ptr, waitMs, interruptible);
    if (!interruptible || waitMs == 0) return nativeTry(ptr, waitMs);
    CancelOnInterrupt hook = new CancelOnInterrupt(ptr);
    hook.enter();
    try {
      return nativeTry(ptr, waitMs);
    } catch (CancelledException e) {
      if (hook.exit()) {
        Thread.interrupted(); // reported by the exception instead
        throw new InterruptedException("interrupted while waiting for lock " + key);
      }
      throw e;
    } finally {
      // After this, no interrupt can reach dlock_cancel. Acquired or timed out despite an
      // interrupt: the lock is kept and so is the thread's interrupt status.
      hook.exit();
    }
  }

  /**
   * dlock_try for a virtual thread: on a platform thread of the binding, while the virtual thread
   * parks on the result instead of pinning its carrier in native code (a few pinned waiters could
   * otherwise occupy every carrier while the holder, unmounted, needs one to unlock).
   */
  private int waitOnHost(long ptr, long waitMs, boolean interruptible)
      throws InterruptedException {
    Future<Integer> f = Natives.WAIT_HOSTS.submit(() -> nativeTry(ptr, waitMs));
    boolean interrupted = false;
    try {
      for (;; ) {
        try {
          if (!(interrupted && interruptible)) return f.get();
          // Cancelled; a cancel sent before the host entered dlock_try is not seen: send again
          // (as CancelOnInterrupt does for platform threads).
          try {
            return f.get(CancelOnInterrupt.RECANCEL_MS, TimeUnit.MILLISECONDS);
          } catch (TimeoutException e) {
            DLockNative.dlock_cancel(ptr);
          }
        } catch (InterruptedException e) {
          interrupted = true;
          if (interruptible) DLockNative.dlock_cancel(ptr);
        }
      }
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (interrupted && interruptible && c instanceof CancelledException) {
        interrupted = false; // reported by the exception instead
        throw new InterruptedException("interrupted while waiting for lock " + key);
      }
      if (c instanceof RuntimeException) throw (RuntimeException) c;
      if (c instanceof Error) throw (Error) c;
      throw new IllegalStateException(c);
    } finally {
      if (interrupted) Thread.currentThread().interrupt();
    }
  }

  /**
   * The one place the binding asks the library for the lock. HOLDER ID: when dlock.h takes a
   * caller-supplied holder, pass {@link #holderId()} of the calling thread here and in
   * {@link #nativeRelease} (and drop {@code holder=lock} in {@link DLockClient#newLock}).
   */
  private static int nativeTry(long ptr, long waitMs) {
    return DLockNative.dlock_try(ptr, waitMs);
  }

  private static int nativeRelease(long ptr) {
    return DLockNative.dlock_release(ptr);
  }

  /**
   * The holder id this thread will pass once the C library accepts one: the Java thread's id, which
   * a virtual thread keeps while it moves between carrier threads. Unused until then.
   */
  @SuppressWarnings("deprecation") // Thread.threadId() is JDK 19+; getId() is the same number
  static long holderId() {
    return Thread.currentThread().getId();
  }

  // ---- holding ------------------------------------------------------------------------------

  /**
   * Releases one hold: the lock is freed when the hold count returns to zero.
   *
   * @throws LockLostException if the lock had expired or been taken meanwhile
   * @throws LockStateException if it is not held
   */
  @Override
  public void unlock() {
    guard.readLock().lock();
    try {
      ensureOpen();
      nativeRelease(handle.ptr);
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Extends the held lease by its ttl, from the database's clock (not needed with {@code
   * auto_renew=1}).
   *
   * @throws LockLostException if it expired or was taken
   * @throws MaxHoldException if max_hold_ms has passed since it was acquired
   */
  public void renew() {
    guard.readLock().lock();
    try {
      ensureOpen();
      DLockNative.dlock_renew(handle.ptr);
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * The fencing token of the current (or last) acquisition: strictly increasing per key, across
   * holders, languages and server restarts; 0 before the first, and always 0 for row locks.
   */
  public long token() {
    return read(() -> DLockNative.dlock_token(handle.ptr));
  }

  /** True if held now (for a lease: not expired by this process's clock). */
  public boolean isHeld() {
    return read(() -> (long) DLockNative.dlock_held(handle.ptr)) != 0;
  }

  /** Reentrant hold count: 0 when not held. */
  public int holdCount() {
    return (int) read(() -> (long) DLockNative.dlock_hold_count(handle.ptr));
  }

  /** The owner id of the current (or last) acquisition ("" before the first). */
  public String owner() {
    guard.readLock().lock();
    try {
      ensureOpen();
      return DLockNative.dlock_owner(handle.ptr);
    } finally {
      guard.readLock().unlock();
    }
  }

  /** Milliseconds left on the lease by this process's clock; 0 if not held; -1 for row locks. */
  public long remainingMillis() {
    return read(() -> DLockNative.dlock_remaining_ms(handle.ptr));
  }

  /** Not supported: a distributed lock has no condition variables. */
  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("dlock locks have no conditions");
  }

  // ---- loss -----------------------------------------------------------------------------------

  /**
   * Runs handler, on a thread of the binding, when a hold of this lock is lost (expired, taken,
   * connection died, max hold ran out) — not when it is released. The thread blocks in
   * dlock_wait_lost while the lock is held; the library never calls back. A handler should be
   * short; exceptions it throws go to that thread's uncaught-exception handler.
   */
  public void onLost(Runnable handler) {
    Objects.requireNonNull(handler, "handler");
    guard.readLock().lock();
    try {
      ensureOpen();
      lostHandlers.add(handler);
      if (DLockNative.dlock_held(handle.ptr) != 0) watchIfNeeded();
    } finally {
      guard.readLock().unlock();
    }
  }

  /** Starts the watcher thread if handlers exist and none runs. Called after each acquisition. */
  private void watchIfNeeded() {
    if (lostHandlers.isEmpty()) return;
    synchronized (watcherLock) {
      if (watcher != null) return;
      watcher = new Thread(this::watch, "dlock-lost-" + key);
      watcher.setDaemon(true);
      watcher.start();
    }
  }

  private void watch() {
    for (;; ) {
      boolean lost = false;
      guard.readLock().lock();
      try {
        if (closing) break;
        DLockNative.dlock_wait_lost(handle.ptr, MAX_WAIT_MS);
      } catch (LockLostException e) {
        lost = true;
      } catch (CancelledException | DLockTimeoutException e) {
        continue; // close() (seen above) or another thread's interrupt; or a day passed
      } finally {
        guard.readLock().unlock();
      }
      if (lost) {
        for (Runnable r : lostHandlers) {
          try {
            r.run();
          } catch (RuntimeException | Error e) {
            Thread t = Thread.currentThread();
            t.getUncaughtExceptionHandler().uncaughtException(t, e);
          }
        }
      }
      // Released or lost: watch on only if a new hold began meanwhile (it saw us running).
      synchronized (watcherLock) {
        if (closing || !heldNow()) {
          watcher = null;
          return;
        }
      }
    }
    synchronized (watcherLock) {
      watcher = null;
    }
  }

  private boolean heldNow() {
    guard.readLock().lock();
    try {
      return !closing && DLockNative.dlock_held(handle.ptr) != 0;
    } finally {
      guard.readLock().unlock();
    }
  }

  // ---- closing --------------------------------------------------------------------------------

  /**
   * Closes the lock object, releasing it first if held. Waits of other threads on it end (with
   * IllegalStateException); the onLost watcher stops. Idempotent.
   */
  @Override
  public void close() {
    if (closing && handle.ptr == 0) return;
    closing = true;
    // Cancel waits still running on the handle until every user has left it.
    try {
      while (!guard.writeLock().tryLock(20, TimeUnit.MILLISECONDS)) {
        // Under a (barging) read lock, so that a concurrent close() cannot free the handle.
        if (guard.readLock().tryLock()) {
          try {
            if (handle.ptr != 0) DLockNative.dlock_cancel(handle.ptr);
          } finally {
            guard.readLock().unlock();
          }
        }
      }
    } catch (InterruptedException e) {
      guard.writeLock().lock();
      Thread.currentThread().interrupt();
    }
    try {
      cleanable.clean();
    } finally {
      guard.writeLock().unlock();
    }
    Thread w;
    synchronized (watcherLock) {
      w = watcher;
    }
    if (w != null && w != Thread.currentThread()) {
      try {
        w.join(TimeUnit.SECONDS.toMillis(5));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private void ensureOpen() {
    if (closing) throw new IllegalStateException("dlock lock " + key + " is closed");
  }

  private IllegalStateException closedWhileWaiting() {
    return new IllegalStateException("dlock lock " + key + " was closed while waiting");
  }

  private interface LongCall {
    long call();
  }

  private long read(LongCall c) {
    guard.readLock().lock();
    try {
      ensureOpen();
      return c.call();
    } finally {
      guard.readLock().unlock();
    }
  }

  @Override
  public String toString() {
    return "DLock[" + key + "]";
  }
}
