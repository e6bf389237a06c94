package io.dlock;

import io.dlock.internal.DLockNative;
import io.dlock.internal.dlock_code;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.ref.Cleaner;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.BiConsumer;

/**
 * A distributed lock on one key, as a {@link Lock}. Made by {@link DLockClient#newLock}; close it
 * (try-with-resources) when done: closing a held lock releases it.
 *
 * <p>Waiting, renewal (option {@code auto_renew=1}), reentrancy, fencing and cancellation are the
 * C library's; this class only adapts them to Java. A lease lost while held is reported by the next
 * {@link #renew()} or {@link #unlock()} throwing {@link LockLostException}, by {@link #isHeld()},
 * and by the {@link #onLost(Runnable)} handlers.
 *
 * <p><b>Who holds it.</b> The Java thread that acquired it, as with {@link
 * java.util.concurrent.locks.ReentrantLock}: the library is asked on behalf of the thread's id
 * (core option {@code holder=thread} with {@code dlock_try_from}, {@code dlock_release_as}, {@code
 * dlock_rollback_as} and {@code dlock_hold_count_as}), which a virtual thread keeps while it moves
 * between carrier threads. The same thread re-enters (the hold
 * count goes up, counted by the library), other threads, platform or virtual, wait for it like any
 * other holder's, and only the holding thread may {@link #unlock()} ({@link
 * IllegalMonitorStateException} otherwise). Option {@code holder=lock} makes the object the holder
 * instead (any thread re-enters and unlocks).
 *
 * <p>Thread safety: all methods may be called from any thread, including virtual threads.
 */
public final class DLock implements Lock, AutoCloseable {
  /** The wait dlock_try and dlock_wait_lost take for "no limit". */
  private static final long NO_LIMIT = -1;

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

  /**
   * Waits until the lock is held, without limit (as {@link Lock#lock()}: an interrupt does not end
   * it; {@link #lockInterruptibly()} is the wait an interrupt ends).
   */
  @Override
  public void lock() {
    try {
      acquire(NO_LIMIT, false);
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
    acquire(NO_LIMIT, true);
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
   * waitMs: NO_LIMIT = until held, else the total wait. One dlock_try_from; it is repeated only
   * after a cancellation meant for another thread of this object (dlock_cancel cancels every wait
   * on the object), with what is left of the wait.
   */
  private boolean acquire(long waitMs, boolean interruptible) throws InterruptedException {
    if (interruptible && Thread.interrupted()) throw new InterruptedException();
    final long holder = holderId();
    guard.readLock().lock();
    try {
      ensureOpen();
      final long start = System.nanoTime();
      for (;; ) {
        long left = NO_LIMIT;
        if (waitMs >= 0) {
          left = Math.max(0, waitMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
        }
        int rc;
        try {
          rc = waitInLibrary(holder, left, interruptible);
        } catch (CancelledException e) {
          if (closing) throw closedWhileWaiting();
          continue; // another thread's interrupt: this wait goes on
        }
        if (rc == dlock_code.DLOCK_OK) {
          watchIfNeeded();
          return true;
        }
        return false; // DLOCK_BUSY: another holder kept it for the whole wait
      }
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * One dlock_try_from; throws InterruptedException if an interrupt of this thread cancelled it.
   * The cancel mark is taken before anything that may cancel (the interrupt hook, the virtual
   * thread's wait for its host) is armed, so a cancel is never lost, however close to the call's
   * start the interrupt comes.
   */
  private int waitInLibrary(long holder, long waitMs, boolean interruptible)
      throws InterruptedException {
    final long ptr = handle.ptr;
    final long mark = DLockNative.dlock_cancel_mark(ptr);
    // close() sets closing before it cancels: either its cancel comes after the mark (and ends
    // the call) or closing is seen here.
    if (closing) throw closedWhileWaiting();
    if (waitMs != 0 && Natives.onVirtualThread()) {
      return waitOnHost(ptr, holder, mark, waitMs, interruptible);
    }
    if (!interruptible || waitMs == 0) return nativeTry(ptr, holder, mark, waitMs);
    CancelOnInterrupt hook = new CancelOnInterrupt(ptr);
    hook.enter();
    try {
      return nativeTry(ptr, holder, mark, waitMs);
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
  private int waitOnHost(long ptr, long holder, long mark, long waitMs, boolean interruptible)
      throws InterruptedException {
    // On behalf of the virtual thread: its id, not the host's; and its mark, taken before it
    // could be interrupted here, so a cancel sent before the host enters the library counts.
    Future<Integer> f = Natives.WAIT_HOSTS.submit(() -> nativeTry(ptr, holder, mark, waitMs));
    boolean interrupted = false;
    try {
      for (;; ) {
        try {
          return f.get();
        } catch (InterruptedException e) {
          // Once: the mark makes the host's call see it whenever it starts.
          if (!interrupted && interruptible) DLockNative.dlock_cancel(ptr);
          interrupted = true;
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
   * The one place the binding asks the library for the lock, on behalf of holder, counting every
   * cancel after mark (dlock_cancel_mark).
   */
  private static int nativeTry(long ptr, long holder, long mark, long waitMs) {
    return DLockNative.dlock_try_from(ptr, holder, mark, waitMs);
  }

  private static final MethodHandle THREAD_ID = threadIdHandle();

  private static MethodHandle threadIdHandle() {
    try {
      return MethodHandles.publicLookup()
          .findVirtual(Thread.class, "threadId", MethodType.methodType(long.class));
    } catch (ReflectiveOperationException e) {
      return null; // JDK 17, 18: getId()
    }
  }

  /**
   * The holder id of the calling thread: the Java thread's id (Thread.threadId(), JDK 19+; getId()
   * before), unique for the JVM's lifetime and kept by a virtual thread across carrier threads.
   */
  @SuppressWarnings("deprecation") // getId() only where threadId() does not exist
  static long holderId() {
    Thread t = Thread.currentThread();
    if (THREAD_ID == null) return t.getId();
    try {
      return (long) THREAD_ID.invokeExact(t);
    } catch (Throwable e) {
      throw new AssertionError(e); // threadId() throws nothing
    }
  }

  // ---- holding ------------------------------------------------------------------------------

  /**
   * Releases one hold of the calling thread: the lock is freed when the hold count returns to zero.
   * A row lock commits its transaction (statements run by {@link #execute}); so does a lease's
   * transaction opened by {@link #begin()}.
   *
   * @throws LockLostException if the lock had expired or been taken meanwhile
   * @throws IllegalMonitorStateException if the calling thread does not hold it (not held, or held
   *     by another thread), as {@link java.util.concurrent.locks.ReentrantLock#unlock()} does; its
   *     cause is the library's {@link LockStateException}
   */
  @Override
  public void unlock() {
    endHold(true);
  }

  /**
   * Ends the calling thread's hold without committing, for work that failed: a row lock's
   * transaction and a lease's (opened by {@link #begin()} or option {@code transaction=1}) roll
   * back, the lease is given back, and every reentrant level ends at once (they share the
   * transaction; an outer {@link #unlock()} then throws {@link IllegalMonitorStateException}).
   * {@link DLockClient#withLock} calls it when the work throws; {@link #close()} of a held lock
   * does not commit either.
   *
   * @throws LockLostException if the hold had been lost meanwhile (nothing was committed either
   *     way)
   * @throws IllegalMonitorStateException if the calling thread does not hold it
   */
  public void abort() {
    endHold(false);
  }

  /** unlock() (commit) or abort(), on behalf of the calling Java thread. */
  private void endHold(boolean commit) {
    final long holder = holderId();
    guard.readLock().lock();
    try {
      ensureOpen();
      if (commit) {
        DLockNative.dlock_release_as(handle.ptr, holder);
      } else {
        DLockNative.dlock_abort_as(handle.ptr, holder);
      }
    } catch (LockStateException e) {
      IllegalMonitorStateException m = new IllegalMonitorStateException(e.getMessage());
      m.initCause(e);
      throw m;
    } finally {
      guard.readLock().unlock();
    }
  }

  // ---- the lock's transaction -----------------------------------------------------------------

  /**
   * Lease locks: opens a transaction on a connection of the lock's own; {@link #execute} runs in
   * it, {@link #unlock()} commits it together with the release (or, if the lease was lost, rolls
   * both back and throws {@link LockLostException}), {@link #rollback()} discards it and keeps the
   * lease. Option {@code transaction=1} begins one at every acquisition instead. Row locks are
   * always in their transaction: nothing to do.
   *
   * @throws LockStateException if not held, or a transaction is already open
   */
  public void begin() {
    guard.readLock().lock();
    try {
      ensureOpen();
      DLockNative.dlock_begin(handle.ptr);
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Runs one SQL statement (INSERT, UPDATE, DELETE; no result set) in the lock's transaction: a
   * row lock's, or a lease's after {@link #begin()}, so that {@link #unlock()} commits it with the
   * release. Parameters ({@code ?}) are bound as strings; a null parameter is SQL NULL. Statements
   * that would end the transaction (COMMIT, DDL, ...) are refused by the library with {@link
   * InvalidArgumentException} before they are sent.
   *
   * @return the number of affected rows
   * @throws LockStateException if not held, or a lease has no open transaction
   * @throws LockLostException if a row lock's transaction ended (the server released the row)
   * @throws IllegalArgumentException if sql or a parameter contains a NUL character
   */
  public long execute(String sql, String... params) {
    Objects.requireNonNull(sql, "sql");
    Objects.requireNonNull(params, "params");
    byte[][] args = new byte[params.length + 1][];
    args[0] = cString(sql, "sql");
    for (int i = 0; i < params.length; i++) {
      args[i + 1] = params[i] == null ? null : cString(params[i], "parameter " + (i + 1));
    }
    long[] affected = new long[1];
    guard.readLock().lock();
    try {
      ensureOpen();
      DLockNative.dlock_exec(handle.ptr, args, affected);
      return affected[0];
    } finally {
      guard.readLock().unlock();
    }
  }

  private static byte[] cString(String s, String what) {
    if (s.indexOf('\0') >= 0) {
      throw new IllegalArgumentException(what + " contains a NUL character");
    }
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /**
   * Discards the lock's transaction. A row lock: ROLLBACK, which also ends the hold (every
   * reentrant hold); a lease: the transaction opened by {@link #begin()} is rolled back and the
   * lease stays held. On behalf of the calling Java thread (dlock_rollback_as): a row lock must be
   * held by it (with {@code holder=lock}: by the object).
   *
   * @throws LockStateException if not held (a row lock: by the calling thread), or a lease has no
   *     open transaction
   */
  public void rollback() {
    final long holder = holderId();
    guard.readLock().lock();
    try {
      ensureOpen();
      DLockNative.dlock_rollback_as(handle.ptr, holder);
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

  /**
   * True if held now through this object, by any thread (for a lease: not expired by this
   * process's clock), like {@link java.util.concurrent.locks.ReentrantLock#isLocked()}.
   */
  public boolean isHeld() {
    return read(() -> (long) DLockNative.dlock_held(handle.ptr)) != 0;
  }

  /**
   * True if the calling Java thread holds it, like {@link
   * java.util.concurrent.locks.ReentrantLock#isHeldByCurrentThread()}: its hold count is above 0
   * ({@link #holdCount()}). With {@code holder=lock}: if the object holds it, whichever thread
   * asks.
   */
  public boolean isHeldByCurrentThread() {
    return holdCount() > 0;
  }

  /**
   * The calling Java thread's reentrant hold count (dlock_hold_count_as with its id), like {@link
   * java.util.concurrent.locks.ReentrantLock#getHoldCount()}: 0 when the lock is not held or is
   * held by another thread. Counts the thread's holds of the key through every lock object of this
   * client opened with the same options (the library shares them). With {@code holder=lock}: the
   * object's count, whichever thread asks. No network.
   */
  public int holdCount() {
    final long holder = holderId();
    return (int) read(() -> (long) DLockNative.dlock_hold_count_as(handle.ptr, holder));
  }

  /**
   * The owner id of the current (or last) acquisition ("" before the first); never torn by another
   * thread's acquisition (dlock_owner_copy).
   */
  public String owner() {
    guard.readLock().lock();
    try {
      ensureOpen();
      byte[] buf = new byte[256]; // owner ids are shorter (dlock.h)
      for (;; ) {
        long n = DLockNative.dlock_owner_copy(handle.ptr, buf);
        if (n < buf.length) return new String(buf, 0, (int) n, StandardCharsets.UTF_8);
        buf = new byte[(int) Math.min(Integer.MAX_VALUE - 8, n + 1)];
      }
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * The lock's mode, {@code "lease"} or {@code "row"}: as given to {@link DLockClient#newLock(String,
   * java.util.Map)} or inherited from the client's options.
   */
  public String mode() {
    guard.readLock().lock();
    try {
      ensureOpen();
      return DLockNative.dlock_mode(handle.ptr);
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

  /**
   * Set by tests only: runs in the watcher between its closing check and its wait, where a cancel
   * without a mark would be lost.
   */
  static volatile BiConsumer<DLock, Long> watchGapHook;

  /** The handle's cancel count now (dlock_cancel_mark), for tests; 0 once closed. */
  long cancelMark() {
    return DLockNative.dlock_cancel_mark(handle.ptr);
  }

  private void watch() {
    for (;; ) {
      boolean lost = false;
      guard.readLock().lock();
      try {
        // The mark, then the closing check, then the wait from the mark: close() sets closing
        // before its one cancel, so either closing is seen here or that cancel comes after the
        // mark and ends the wait, however close to its start it lands.
        if (closing) break; // (the handle may be freed already)
        final long mark = DLockNative.dlock_cancel_mark(handle.ptr);
        if (closing) break;
        BiConsumer<DLock, Long> hook = watchGapHook;
        if (hook != null) hook.accept(this, mark);
        DLockNative.dlock_wait_lost_from(handle.ptr, mark, NO_LIMIT);
      } catch (LockLostException e) {
        lost = true;
      } catch (CancelledException e) {
        continue; // close() (seen above) or another thread's interrupt
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
   * Closes the lock object, giving it back first if held, without committing (as {@link #abort()}:
   * a row lock's or a lease's transaction rolls back), so that try-with-resources left by an
   * exception commits nothing: call {@link #unlock()} at the end of the block for work that
   * succeeded. Waits of other threads on it end (with IllegalStateException); the onLost watcher
   * stops. Idempotent.
   */
  @Override
  public void close() {
    if (closing && handle.ptr == 0) return;
    closing = true;
    // One cancel, never repeated: every wait on the handle (an acquire, the onLost watcher) takes
    // a cancel mark before it checks closing and waits from that mark (dlock_try_from,
    // dlock_wait_lost_from), so this cancel ends it wherever it is. Under a (barging) read lock,
    // so that a concurrent close() cannot free the handle meanwhile; if that close holds the write
    // lock, it has cancelled already.
    if (guard.readLock().tryLock()) {
      try {
        if (handle.ptr != 0) DLockNative.dlock_cancel(handle.ptr);
      } finally {
        guard.readLock().unlock();
      }
    }
    guard.writeLock().lock(); // every user of the handle has left it
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
