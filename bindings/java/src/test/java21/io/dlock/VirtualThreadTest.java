package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Virtual threads (JDK 21+; run on JDK 25 by run-tests.sh). The profile runs this JVM with one
 * carrier thread, so a waiter that pinned its carrier in native code would starve the holder.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class VirtualThreadTest {
  static DLockClient client;
  static DLockClient other;

  @BeforeAll
  static void open() {
    client = DLockClient.open(TestDb.url());
    other = DLockClient.open(TestDb.url());
  }

  @AfterAll
  static void close() {
    client.close();
    other.close();
  }

  @Test
  void manyVirtualThreadsContend() throws Exception {
    String key = TestDb.key("vthreads");
    int threads = 24;
    int rounds = 4;
    int[] counter = {0};
    AtomicInteger inside = new AtomicInteger();
    AtomicInteger maxInside = new AtomicInteger();
    try (ExecutorService ex = Executors.newVirtualThreadPerTaskExecutor()) {
      List<Future<?>> fs = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        fs.add(
            ex.submit(
                () -> {
                  try (DLock lock = client.newLock(key)) {
                    for (int i = 0; i < rounds; i++) {
                      lock.lock();
                      try {
                        maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                        int v = counter[0];
                        Thread.sleep(1); // unmounts the holder: it needs a free carrier back
                        counter[0] = v + 1;
                        inside.decrementAndGet();
                      } finally {
                        lock.unlock();
                      }
                    }
                  }
                  return null;
                }));
      }
      for (Future<?> f : fs) f.get(60, TimeUnit.SECONDS);
    }
    assertEquals(1, maxInside.get());
    assertEquals(threads * rounds, counter[0]);
  }

  @Test
  void holdSurvivesMovingBetweenCarriers() throws Exception {
    String key = TestDb.key("vt-move");
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread vt =
        Thread.ofVirtual()
            .start(
                () -> {
                  try (DLock lock = client.newLock(key)) {
                    lock.lock();
                    Thread.sleep(20); // unmount; may resume on another carrier
                    assertTrue(lock.tryLock()); // re-enters
                    assertEquals(2, lock.holdCount());
                    Thread.sleep(20);
                    lock.unlock();
                    lock.unlock(); // released by the same virtual thread, wherever it runs
                    assertFalse(lock.isHeld());
                  } catch (Throwable e) {
                    failure.set(e);
                  }
                });
    vt.join();
    if (failure.get() != null) throw new AssertionError(failure.get());
  }

  @Test
  void interruptCancelsAVirtualWaiter() throws Exception {
    String key = TestDb.key("vt-interrupt");
    try (DLock holder = client.newLock(key);
        DLock waiter = other.newLock(key)) {
      holder.lock();
      AtomicReference<Throwable> outcome = new AtomicReference<>();
      CountDownLatch done = new CountDownLatch(1);
      long before = other.counter("statements");
      Thread vt =
          Thread.ofVirtual()
              .start(
                  () -> {
                    try {
                      waiter.lockInterruptibly();
                      outcome.set(new AssertionError("acquired"));
                    } catch (Throwable e) {
                      outcome.set(e);
                    } finally {
                      done.countDown();
                    }
                  });
      TestDb.await("the waiter to ask the server", 5000, () -> other.counter("statements") > before);
      long t0 = System.nanoTime();
      vt.interrupt();
      assertTrue(done.await(5, TimeUnit.SECONDS), "the interrupted waiter did not return");
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertInstanceOf(InterruptedException.class, outcome.get());
      assertTrue(ms < 2000, "took " + ms + " ms");
      assertFalse(waiter.isHeld());
      holder.unlock();
      assertTrue(waiter.tryLock(2, TimeUnit.SECONDS));
      waiter.unlock();
    }
  }

  @Test
  void interruptAtAnyMomentEndsAVirtualWait() throws Exception {
    String key = TestDb.key("vt-interrupt-any");
    try (DLock holder = client.newLock(key);
        DLock waiter = other.newLock(key)) {
      holder.lock();
      for (int i = 0; i < 30; i++) {
        AtomicReference<Throwable> outcome = new AtomicReference<>();
        Thread vt =
            Thread.ofVirtual()
                .start(
                    () -> {
                      try {
                        waiter.tryLock(30, TimeUnit.SECONDS);
                        outcome.set(new AssertionError("returned"));
                      } catch (Throwable e) {
                        outcome.set(e);
                      }
                    });
        if (i % 2 == 1) Thread.sleep(0, (i * 7919) % 1_000_000);
        vt.interrupt();
        assertTrue(vt.join(java.time.Duration.ofSeconds(5)), "round " + i + ": still waiting");
        assertInstanceOf(InterruptedException.class, outcome.get(), "round " + i);
      }
      holder.unlock();
    }
  }

  /** The holder is the Java thread: another virtual thread neither re-enters nor unlocks. */
  @Test
  void twoVirtualThreadsOnOneLockExclude() throws Exception {
    try (DLock lock = client.newLock(TestDb.key("vt-holder"))) {
      AtomicReference<Throwable> failure = new AtomicReference<>();
      Thread.ofVirtual()
          .start(
              () -> {
                try {
                  lock.lock();
                  AtomicReference<Object> got = new AtomicReference<>();
                  AtomicReference<Throwable> unlock = new AtomicReference<>();
                  Thread.ofVirtual()
                      .start(
                          () -> {
                            got.set(lock.tryLock());
                            try {
                              lock.unlock();
                            } catch (Throwable e) {
                              unlock.set(e);
                            }
                          })
                      .join();
                  assertEquals(Boolean.FALSE, got.get());
                  assertInstanceOf(IllegalMonitorStateException.class, unlock.get());
                  assertEquals(1, lock.holdCount());
                  lock.unlock();
                  assertFalse(lock.isHeld());
                } catch (Throwable e) {
                  failure.set(e);
                }
              })
          .join();
      if (failure.get() != null) throw new AssertionError(failure.get());
    }
  }

  /**
   * A virtual thread re-enters after moving to another carrier thread, and releases from a third:
   * in a child JVM with four carriers (this one has one), see CarrierMove.
   */
  @Test
  void reentersAfterMovingBetweenCarriers() throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-cp");
    cmd.add(System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")));
    cmd.add("-Ddlock.jni.path=" + System.getProperty("dlock.jni.path", ""));
    cmd.add("--enable-native-access=ALL-UNNAMED");
    cmd.add("-Djdk.virtualThreadScheduler.parallelism=4");
    cmd.add("io.dlock.CarrierMove");
    cmd.add(TestDb.url());
    cmd.add(TestDb.key("vt-carriers"));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out;
    try (InputStream in = p.getInputStream()) {
      out = new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
    }
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "child JVM still running: " + out);
    System.out.println("carrier move: " + out);
    assertEquals(0, p.exitValue(), out);
    assertTrue(out.startsWith("ok moves=2 reentered=2 other=false released=true"), out);
  }
}
