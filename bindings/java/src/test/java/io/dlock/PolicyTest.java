package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The one policy of every dlock binding (issue 17): failed work is rolled back and the lock is free
 * at once, successful work commits; a wait without a bound has no limit; a lock keeps itself until
 * unlocked; a wait that ran out of pool connections says so; the library's version is checked.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PolicyTest {
  static DLockClient client;
  static DLockClient other;
  static final String TABLE = "java_policy_" + TestDb.RUN.replace('-', '_');
  static final String INSERT = "INSERT INTO " + TABLE + " (k, v) VALUES (?, ?)";

  @BeforeAll
  static void open() throws Exception {
    client = DLockClient.open(TestDb.url());
    other = DLockClient.open(TestDb.url());
    TestDb.sql("CREATE TABLE " + TABLE + " (k VARCHAR(200) PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB");
  }

  @AfterAll
  static void close() throws Exception {
    if (client != null) client.close();
    if (other != null) other.close();
    TestDb.sql("DROP TABLE IF EXISTS " + TABLE);
  }

  /** The row k as another connection (the mariadb client) sees it: "" when none is committed. */
  static String committed(String k) throws Exception {
    return TestDb.sql("SELECT v FROM " + TABLE + " WHERE k = '" + k + "'");
  }

  static void assertFreeForOthers(String key, Map<String, String> options) {
    try (DLock probe = other.newLock(key, options)) {
      assertTrue(probe.tryLock(), "the key is not free for another client");
      probe.unlock();
    }
  }

  @Test
  void withLockRollsBackFailedWorkAndCommitsSuccess() throws Exception {
    List<Map<String, String>> forms =
        List.of(Map.of("mode", "row"), Map.of("transaction", "1"), Map.of("begin", "1"));
    for (Map<String, String> form : forms) {
      Map<String, String> options = new HashMap<>(form);
      boolean begin = options.remove("begin") != null;
      String key = TestDb.key("with-abort-" + form);
      String failed = key + ":failed", ok = key + ":ok";
      IllegalStateException boom =
          assertThrows(
              IllegalStateException.class,
              () ->
                  client.withLock(
                      key,
                      options,
                      null,
                      lock -> {
                        if (begin) lock.begin();
                        assertEquals(1, lock.execute(INSERT, failed, "failed"));
                        throw new IllegalStateException("the work failed");
                      }));
      assertEquals("the work failed", boom.getMessage());
      assertEquals(0, boom.getSuppressed().length, "the abort failed");
      assertEquals("", committed(failed), form + ": the failed work was committed");
      assertFreeForOthers(key, options);
      client.withLock(
          key,
          options,
          null,
          lock -> {
            if (begin) lock.begin();
            return lock.execute(INSERT, ok, "ok");
          });
      assertEquals("ok", committed(ok), form + ": the successful work was not committed");
    }
  }

  @Test
  void tryWithResourcesLeftByAnExceptionCommitsNothing() throws Exception {
    String key = TestDb.key("twr-abort");
    Map<String, String> row = Map.of("mode", "row");
    assertThrows(
        IllegalStateException.class,
        () -> {
          try (DLock lock = client.newLock(key, row)) {
            lock.lock();
            lock.execute(INSERT, key, "failed");
            throw new IllegalStateException("the work failed");
          }
        });
    assertEquals("", committed(key));
    assertFreeForOthers(key, row);
  }

  @Test
  void abortEndsEveryLevel() throws Exception {
    String key = TestDb.key("abort-levels");
    try (DLock lock = client.newLock(key, Map.of("mode", "row"))) {
      assertThrows(IllegalMonitorStateException.class, lock::abort); // not held
      lock.lock();
      lock.lock();
      assertEquals(2, lock.holdCount());
      AtomicReference<Throwable> fromOther = new AtomicReference<>();
      Thread t = new Thread(() -> fromOther.set(assertThrows(Throwable.class, lock::abort)));
      t.start();
      t.join();
      assertTrue(fromOther.get() instanceof IllegalMonitorStateException, String.valueOf(fromOther.get()));
      assertTrue(lock.isHeldByCurrentThread(), "another thread's abort ended the hold");
      lock.abort();
      assertEquals(0, lock.holdCount());
      assertThrows(IllegalMonitorStateException.class, lock::unlock);
    }
    assertFreeForOthers(key, Map.of("mode", "row"));
  }

  /** lock() waits without limit (no 1-day slices): until the holder lets go. */
  @Test
  void lockWaitsUntilReleased() throws Exception {
    String key = TestDb.key("no-limit");
    try (DLock a = client.newLock(key);
        DLock b = other.newLock(key)) {
      a.lock();
      CountDownLatch got = new CountDownLatch(1);
      Thread waiter =
          new Thread(
              () -> {
                b.lock();
                got.countDown();
                b.unlock();
              });
      waiter.start();
      assertFalse(got.await(1500, TimeUnit.MILLISECONDS), "lock() returned while held elsewhere");
      waiter.interrupt(); // lock() is not interruptible: it goes on waiting
      assertFalse(got.await(300, TimeUnit.MILLISECONDS), "an interrupt ended lock()");
      a.unlock();
      assertTrue(got.await(10, TimeUnit.SECONDS), "lock() still waits after the release");
      waiter.join();
      // lockInterruptibly: until interrupted.
      a.lock();
      AtomicReference<Throwable> outcome = new AtomicReference<>();
      Thread w2 =
          new Thread(
              () -> {
                try {
                  b.lockInterruptibly();
                  outcome.set(new AssertionError("acquired while held"));
                } catch (Throwable e) {
                  outcome.set(e);
                }
              });
      w2.start();
      Thread.sleep(200); // (a duration to wait through, not a synchronisation)
      w2.interrupt();
      w2.join(5000);
      assertTrue(outcome.get() instanceof InterruptedException, String.valueOf(outcome.get()));
      a.unlock();
    }
  }

  @Test
  void modeComesFromTheLibrary() {
    try (DLock lease = client.newLock(TestDb.key("mode-lease"));
        DLock row = client.newLock(TestDb.key("mode-row"), Map.of("mode", "row"));
        DLockClient rows = DLockClient.open(TestDb.url(), Map.of("mode", "row"));
        DLock inherited = rows.newLock(TestDb.key("mode-inherited"))) {
      assertEquals("lease", lease.mode());
      assertEquals("row", row.mode());
      assertEquals("row", inherited.mode());
      inherited.lock(); // the binding's auto_renew=1 default: a no-op on a row lock
      assertEquals(-1, inherited.remainingMillis());
      inherited.unlock();
    }
  }

  /**
   * newLock + lock() keeps the lock until unlock(): a 1.2 s lease is renewed (every 0.4 s) and held
   * for 2.5 of its ttl. (A renewal must land within ttl of the last one's send: with 300 ms, a
   * busy CI machine's commit stall of over 200 ms once lost it.)
   */
  @Test
  void lockKeepsItselfUntilUnlocked() throws Exception {
    String key = TestDb.key("keeps");
    try (DLock lock = client.newLock(key, Map.of("ttl_ms", "1200"));
        DLock probe = other.newLock(key)) {
      lock.lock();
      long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(3000);
      while (System.nanoTime() < end) {
        assertTrue(lock.isHeld(), "a renewed lease was not held");
        Thread.sleep(100);
      }
      assertFalse(probe.tryLock());
      lock.unlock(); // no LockLostException
    }
  }

  /**
   * pool=2 with two row locks held: waits for free keys end with DLOCK_E_POOL, never "busy". 200
   * waits at once, each with its own lock object and a 1.2 s wait.
   */
  @Test
  void fullPoolIsAPoolError() throws Exception {
    try (DLockClient small = DLockClient.open(TestDb.url(), Map.of("pool", "2"));
        DLock r1 = small.newLock(TestDb.key("pool-1"), Map.of("mode", "row"));
        DLock r2 = small.newLock(TestDb.key("pool-2"), Map.of("mode", "row"))) {
      r1.lock();
      r2.lock();
      int runs = 200;
      List<Thread> threads = new ArrayList<>();
      AtomicReference<String> wrong = new AtomicReference<>();
      for (int i = 0; i < runs; i++) {
        String key = TestDb.key("pool-free-" + i);
        Thread t =
            new Thread(
                () -> {
                  try (DLock l = small.newLock(key)) {
                    boolean got = l.tryLock(1200, TimeUnit.MILLISECONDS);
                    wrong.compareAndSet(null, "tryLock returned " + got);
                  } catch (DLockException e) {
                    if (!"DLOCK_E_POOL".equals(e.codeName())) wrong.compareAndSet(null, e.toString());
                  } catch (Throwable e) {
                    wrong.compareAndSet(null, e.toString());
                  }
                });
        threads.add(t);
        t.start();
      }
      for (Thread t : threads) t.join();
      assertNull(wrong.get(), "a wait on a full pool");
      r1.unlock();
      r2.unlock();
    }
  }

  @Test
  void libraryVersionIsChecked() {
    assertNull(Natives.checkLibrary(DLockClient.libraryVersion()));
    assertNull(Natives.checkLibrary("1.3.0"));
    assertNull(Natives.checkLibrary("1.12.4"));
    for (String old : new String[] {"1.2.0", "0.9.9", "2.0.0", "1.x", ""}) {
      String why = Natives.checkLibrary(old);
      assertNotNull(why, old);
      assertTrue(why.contains("1.3.0") && why.contains(old), why);
    }
    assertSame(null, Natives.checkLibrary("1.3.1"));
  }
}
