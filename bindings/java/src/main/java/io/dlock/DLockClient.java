package io.dlock;

import io.dlock.internal.DLockNative;
import io.dlock.internal.dlock_event;
import java.lang.ref.Cleaner;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * A connection to the lock server: a bounded pool of the library's own connections, safe to share
 * by every thread of the process. Open one per process and database, close it at shutdown.
 *
 * <pre>{@code
 * try (DLockClient client = DLockClient.open("mysql://app@db:3306/app");
 *      DLock lock = client.newLock("job:refresh")) {
 *   if (lock.tryLock(3, TimeUnit.SECONDS)) {
 *     try { refresh(lock.token()); } finally { lock.unlock(); }
 *   }
 * }
 * }</pre>
 */
public final class DLockClient implements AutoCloseable {
  /** Owns the native client; run once, by close() or, if the client was dropped, the Cleaner. */
  private static final class Handle implements Runnable {
    volatile long ptr;

    Handle(long ptr) {
      this.ptr = ptr;
    }

    @Override
    public void run() {
      long p = ptr;
      ptr = 0;
      DLockNative.dlock_client_close(p); // the core keeps it alive for locks still open
    }
  }

  private final Handle handle;
  private final Cleaner.Cleanable cleanable;
  // Readers: calls that use the handle; writer: close, which frees it.
  private final ReentrantReadWriteLock guard = new ReentrantReadWriteLock();
  private volatile boolean closed;

  private DLockClient(long ptr) {
    handle = new Handle(ptr);
    cleanable = Natives.CLEANER.register(this, handle);
  }

  /**
   * Opens a client from {@code mysql://user[:password]@host[:port]/database[?pool=8&...]}. Checks
   * the server (reachable, writable, not a replica) and creates the lock tables if missing.
   *
   * @throws InvalidArgumentException for a bad URL
   * @throws ConnectionException if the server cannot be reached or refuses the login
   */
  public static DLockClient open(String url) {
    return open(url, Map.of());
  }

  /**
   * Opens a client with options, as dlock.h's {@code dlock_config_set} keys: client options
   * ({@code pool}, {@code connect_timeout}, {@code table}, ...) and lock defaults ({@code ttl_ms},
   * {@code auto_renew}, {@code max_hold_ms}, {@code mode}, ...). They override the URL's query.
   *
   * <p>A lock keeps itself until it is unlocked, as a {@link java.util.concurrent.locks.Lock}
   * should: the client's locks renew their lease ({@code auto_renew=1}) unless {@code
   * auto_renew=0} is given here or to {@link #newLock(String, Map)}. Max hold ({@code
   * max_hold_ms}, 5 minutes by default) still ends a hold that is never released, and a loss is
   * always reported ({@link LockLostException}, {@link DLock#onLost}).
   *
   * @throws IllegalStateException if the loaded libdlock is older than this binding needs (1.3)
   */
  public static DLockClient open(String url, Map<String, String> options) {
    Objects.requireNonNull(url, "url");
    Natives.requireLibrary();
    Map<String, String> all = new HashMap<>();
    all.put("auto_renew", "1");
    if (options != null) all.putAll(options);
    long cfg = Natives.config(all);
    try {
      return new DLockClient(DLockNative.dlockswig_client_open(url, cfg));
    } finally {
      DLockNative.dlock_config_free(cfg);
    }
  }

  /** The loaded C library's version, e.g. "1.3.0". */
  public static String libraryVersion() {
    return DLockNative.dlock_version();
  }

  /** A lock object for key (not acquired yet), with the client's defaults. */
  public DLock newLock(String key) {
    return newLock(key, Map.of());
  }

  /**
   * A lock object for key (not acquired yet). Keys are compared byte for byte as UTF-8, 1..512
   * bytes, no NUL. Options are dlock.h's lock keys ({@code mode}, {@code ttl_ms}, {@code
   * auto_renew}, {@code max_hold_ms}, {@code reentrant}, {@code transaction}, {@code wakeup}, ...).
   * The holder is the Java thread ({@code holder=thread}, the default here); {@code holder=lock}
   * makes it the object.
   */
  public DLock newLock(String key, Map<String, String> options) {
    Objects.requireNonNull(key, "key");
    Map<String, String> all = new HashMap<>();
    // The holder is the Java thread (DLock passes its id to dlock_try_from/dlock_release_as);
    // options may say holder=lock.
    all.put("holder", "thread");
    all.putAll(options);
    byte[] keyBytes = key.getBytes(StandardCharsets.UTF_8);
    long cfg = Natives.config(all);
    guard.readLock().lock();
    try {
      ensureOpen();
      return new DLock(this, key, DLockNative.dlockswig_open(handle.ptr, keyBytes, cfg));
    } finally {
      guard.readLock().unlock();
      DLockNative.dlock_config_free(cfg);
    }
  }

  /**
   * Runs work while holding key's lock, waiting for it as long as it takes (interruptibly), and
   * ends the hold afterwards by the one policy of every dlock binding: when work returns, the lock
   * is released and its transaction (a row lock's, a lease's) commits; when work throws, {@link
   * DLock#abort()} rolls that transaction back and gives the lock back. A lease is renewed by the
   * library while work runs.
   *
   * @throws LockLostException if the lease was lost while work ran (the work's result is then
   *     discarded: another holder may have run meanwhile)
   * @throws InterruptedException if interrupted while waiting
   * @throws Exception whatever work throws
   */
  public <T> T withLock(String key, Callable<T> work) throws Exception {
    Objects.requireNonNull(work, "work");
    return withLock(key, Map.of(), null, lock -> work.call());
  }

  /**
   * Like {@link #withLock(String, Callable)} but waits at most {@code wait}.
   *
   * @throws LockBusyException if another holder kept the lock for the whole wait
   */
  public <T> T withLock(String key, Duration wait, Callable<T> work) throws Exception {
    Objects.requireNonNull(wait, "wait");
    Objects.requireNonNull(work, "work");
    return withLock(key, Map.of(), wait, lock -> work.call());
  }

  /**
   * The general form: lock options (as {@link #newLock(String, Map)}), a wait (null = as long as it
   * takes), and work that is given the held lock, e.g. for its fencing token or {@link
   * DLock#execute}. The lease is renewed ({@code auto_renew=1}) unless the options say otherwise;
   * a row lock takes that as a no-op. Work that throws ends with {@link DLock#abort()} (nothing it
   * executed is committed; an abort failure is added as suppressed), work that returns with
   * {@link DLock#unlock()} (which commits).
   *
   * @throws LockBusyException if another holder kept the lock for the whole wait
   * @throws LockLostException if the lock was lost while work ran
   */
  public <T> T withLock(String key, Map<String, String> options, Duration wait, LockedWork<T> work)
      throws Exception {
    Objects.requireNonNull(options, "options");
    Objects.requireNonNull(work, "work");
    Map<String, String> opts = new HashMap<>(options);
    opts.putIfAbsent("auto_renew", "1");
    try (DLock lock = newLock(key, opts)) {
      if (wait == null) {
        lock.lockInterruptibly();
      } else if (!lock.tryLock(wait.toMillis(), TimeUnit.MILLISECONDS)) {
        throw new LockBusyException("lock " + key + " is held by another holder (waited " + wait + ")");
      }
      T result;
      try {
        result = work.run(lock);
      } catch (Throwable t) {
        try {
          lock.abort();
        } catch (DLockException | IllegalMonitorStateException e) {
          t.addSuppressed(e);
        }
        throw t;
      }
      lock.unlock(); // commits; LockLostException if the lease was lost during the work
      return result;
    }
  }

  /**
   * A counter of this client, by name: acquisitions, reentries, busy, wait_ms, releases, renewals,
   * lost, max_hold_trips, statements, table_rows, ... (see dlock.h).
   */
  public long counter(String name) {
    Objects.requireNonNull(name, "name");
    guard.readLock().lock();
    try {
      ensureOpen();
      return DLockNative.dlockswig_client_counter(handle.ptr, name);
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Creates the lock tables that are missing and checks the columns of those that exist, as opening
   * a client does, on one of this client's own connections: for after the tables were dropped, or a
   * setup step. Idempotent; any thread. Needs libdlock 1.2.
   *
   * @throws DLockException {@code DLOCK_E_DB} when a table of that name is not dlock's (the message
   *     names table and column) or may not be created; {@link ConnectionException} when the server
   *     cannot be reached
   * @throws IllegalStateException if the client is closed
   */
  public void initSchema() {
    guard.readLock().lock();
    try {
      ensureOpen();
      DLockNative.dlock_client_init_schema(handle.ptr);
    } finally {
      guard.readLock().unlock();
    }
  }

  /**
   * Takes the oldest event from the client's queue (lost leases, max-hold trips, ...), waiting up to
   * wait for one; empty if none came. The queue is bounded (client option {@code events}); the
   * oldest are dropped when it is full. Any thread.
   */
  public Optional<DLockEvent> nextEvent(Duration wait) {
    Objects.requireNonNull(wait, "wait");
    long ms = 0; // the library takes any wait >= 0
    if (!wait.isNegative()) {
      ms = wait.getSeconds() >= Long.MAX_VALUE / 1000 ? Long.MAX_VALUE : wait.toMillis();
    }
    dlock_event e = new dlock_event();
    guard.readLock().lock();
    try {
      ensureOpen();
      DLockNative.dlock_client_next_event(handle.ptr, e, ms);
      return Optional.of(new DLockEvent(e));
    } catch (DLockTimeoutException none) {
      return Optional.empty();
    } finally {
      guard.readLock().unlock();
      e.delete();
    }
  }

  private void ensureOpen() {
    if (closed) throw new IllegalStateException("the dlock client is closed");
  }

  /**
   * Closes the client. Locks opened on it stay usable until they are closed themselves. Idempotent.
   */
  @Override
  public void close() {
    guard.writeLock().lock();
    try {
      if (closed) return;
      closed = true;
      cleanable.clean();
    } finally {
      guard.writeLock().unlock();
    }
  }
}
