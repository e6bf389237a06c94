package io.dlock;

import java.io.IOException;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Takes a lock through the Java binding and holds it until standard input closes: a building block
 * for interop tests (a lock held in Java must be refused to C, Go and Python, and the other way
 * round). Same arguments, output and exit status as Go's dlock-hold:
 *
 * <pre>
 * java -cp dlock-1.0.0.jar io.dlock.Hold -url URL -key KEY [-wait MS] [-ttl MS] [-mode lease|row]
 * </pre>
 *
 * Prints "held &lt;fencing token&gt;" once held, "released" after the release. Exit status: 0 done,
 * 3 busy (not acquired within -wait), 1 any other error.
 */
public final class Hold {
  private Hold() {}

  public static void main(String[] args) {
    System.exit(run(args));
  }

  static int run(String[] args) {
    Map<String, String> a = new HashMap<>();
    a.put("-url", System.getenv("DLOCK_URL"));
    a.put("-wait", "0");
    a.put("-ttl", "30000");
    a.put("-mode", "lease");
    for (int i = 0; i + 1 < args.length; i += 2) a.put(args[i], args[i + 1]);
    if (args.length % 2 != 0 || a.get("-url") == null || a.get("-key") == null) {
      System.err.println(
          "usage: io.dlock.Hold -url URL -key KEY [-wait MS] [-ttl MS] [-mode lease|row]");
      return 1;
    }
    // Renewed until released (the binding's default; a row lock has no expiry).
    Map<String, String> opts = Map.of("mode", a.get("-mode"), "ttl_ms", a.get("-ttl"));
    try (DLockClient client = DLockClient.open(a.get("-url"));
        DLock lock = client.newLock(a.get("-key"), opts)) {
      if (!lock.tryLock(Long.parseLong(a.get("-wait")), TimeUnit.MILLISECONDS)) {
        System.err.println("io.dlock.Hold: " + a.get("-key") + " is busy");
        return 3;
      }
      System.out.println("held " + lock.token());
      System.out.flush();
      InputStream in = System.in;
      byte[] buf = new byte[256];
      while (in.read(buf) >= 0) {
        // hold until stdin closes
      }
      lock.unlock();
      System.out.println("released");
      return 0;
    } catch (DLockException | NumberFormatException | IOException e) {
      System.err.println("io.dlock.Hold: " + e.getMessage());
      return 1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return 1;
    }
  }
}
