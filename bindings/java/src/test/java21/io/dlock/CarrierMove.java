package io.dlock;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Child JVM of VirtualThreadTest#reentersAfterMovingBetweenCarriers, run with several carrier
 * threads (the test JVM has one): a virtual thread takes the lock, moves to another carrier,
 * re-enters, moves again and releases, while a platform thread is kept out. Prints one line,
 * "ok moves=N reentered=2 other=false released=true", or "fail ..." and exits 1.
 *
 * <p>Arguments: URL KEY.
 */
final class CarrierMove {
  private CarrierMove() {}

  public static void main(String[] args) throws Exception {
    try (DLockClient client = DLockClient.open(args[0]);
        DLock lock = client.newLock(args[1])) {
      AtomicReference<String> result = new AtomicReference<>("fail: no result");
      Thread vt =
          Thread.ofVirtual()
              .start(
                  () -> {
                    try {
                      lock.lock(); // waited for on a host thread, on behalf of this thread
                      int moves = moveToAnotherCarrier();
                      boolean reentered = lock.tryLock(); // in place, on the new carrier
                      int count = lock.holdCount();
                      AtomicReference<Boolean> other = new AtomicReference<>();
                      Thread p = new Thread(() -> other.set(lock.tryLock()));
                      p.start();
                      p.join();
                      lock.unlock();
                      moves += moveToAnotherCarrier();
                      lock.unlock();
                      result.set(
                          (reentered && count == 2 && !other.get() && !lock.isHeld()
                                  ? "ok"
                                  : "fail")
                              + " moves="
                              + moves
                              + " reentered="
                              + count
                              + " other="
                              + other.get()
                              + " released="
                              + !lock.isHeld());
                    } catch (Throwable e) {
                      result.set("fail: " + e);
                    }
                  });
      vt.join();
      System.out.println(result.get());
      System.out.flush();
      if (!result.get().startsWith("ok")) System.exit(1);
    }
  }

  /**
   * Sleeps (unmounting) until the current virtual thread resumes on another carrier: 1 move. A
   * virtual thread that spins meanwhile keeps the old carrier busy (and makes the scheduler start
   * the others).
   */
  private static int moveToAnotherCarrier() throws InterruptedException {
    String first = carrier();
    long deadline = System.nanoTime() + 10_000_000_000L;
    AtomicBoolean stop = new AtomicBoolean();
    try {
      while (carrier().equals(first)) {
        if (System.nanoTime() > deadline) throw new AssertionError("never left carrier " + first);
        Thread.ofVirtual()
            .start(
                () -> {
                  long until = System.nanoTime() + 20_000_000L;
                  while (!stop.get() && System.nanoTime() < until) Thread.onSpinWait();
                });
        Thread.sleep(2);
      }
    } finally {
      stop.set(true);
    }
    return 1;
  }

  /** The carrier's name, from VirtualThread's toString ("VirtualThread[#22]/runnable@worker"). */
  private static String carrier() {
    String s = Thread.currentThread().toString();
    int at = s.lastIndexOf('@');
    if (at < 0) throw new AssertionError("no carrier in " + s);
    return s.substring(at + 1);
  }
}
