package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * One table, several languages: a lock held elsewhere is refused to Java and the other way round,
 * and fencing tokens keep growing across them. The other side is a "hold" tool with one protocol
 * (Go's cmd/dlock-hold): args -url -key [-wait MS], prints "held TOKEN", holds until stdin closes,
 * exits 3 when busy. Always: C (tools/c_hold.c, built next to the JNI library) and a second JVM
 * (io.dlock.Hold); Go if DLOCK_GO_HOLD names a built dlock-hold; Python if DLOCK_PYTHON names a
 * python with the dlock package.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class InteropTest {
  static final String PY_HOLD =
      String.join(
          "\n",
          "import sys, dlock",
          "a = dict(zip(sys.argv[1::2], sys.argv[2::2]))",
          "c = dlock.connect(a['-url'])",
          "try:",
          "    with c.lock(a['-key'], ttl=30, wait=float(a.get('-wait', '0')) / 1000) as h:",
          "        print('held', h.token, flush=True)",
          "        sys.stdin.read()",
          "except dlock.LockTimeout:",
          "    sys.exit(3)",
          "print('released', flush=True)");

  record Holder(String name, List<String> command) {}

  static List<Holder> holders() {
    List<Holder> hs = new ArrayList<>();
    Path c = TestDb.tool("dlock-c-hold");
    hs.add(new Holder("C", List.of(c.toString())));
    hs.add(
        new Holder(
            "Java (another JVM)",
            List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")),
                "-Ddlock.jni.path=" + System.getProperty("dlock.jni.path", ""),
                "--enable-native-access=ALL-UNNAMED",
                Hold.class.getName())));
    String go = System.getenv("DLOCK_GO_HOLD");
    if (go != null && !go.isEmpty()) hs.add(new Holder("Go", List.of(go)));
    String py = System.getenv("DLOCK_PYTHON");
    if (py != null && !py.isEmpty()) hs.add(new Holder("Python", List.of(py, "-c", PY_HOLD)));
    return hs;
  }

  /** A running hold tool that printed "held TOKEN". */
  static final class Held implements AutoCloseable {
    final Process p;
    final long token;

    Held(Process p, long token) {
      this.p = p;
      this.token = token;
    }

    /** Closes its stdin: it releases and exits 0. */
    @Override
    public void close() throws java.io.IOException {
      p.getOutputStream().close();
      try {
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "hold tool did not exit");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
      assertEquals(0, p.exitValue(), "hold tool failed");
    }
  }

  static Process start(Holder h, String key) throws Exception {
    List<String> cmd = new ArrayList<>(h.command());
    cmd.addAll(List.of("-url", TestDb.url(), "-key", key, "-wait", "0"));
    return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
  }

  static Held hold(Holder h, String key) throws Exception {
    Process p = start(h, key);
    String line =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))
            .readLine();
    assertTrue(line != null && line.startsWith("held "), h.name() + " said " + line);
    return new Held(p, Long.parseLong(line.substring(5).trim()));
  }

  @TestFactory
  Stream<DynamicTest> lockedElsewhereMeansLockedHere() {
    return holders().stream()
        .map(
            h ->
                DynamicTest.dynamicTest(
                    h.name(),
                    () -> {
                      assertTrue(
                          !h.name().equals("C") || Files.isExecutable(Path.of(h.command().get(0))),
                          "not built: " + h.command().get(0));
                      String key = TestDb.key("interop-" + h.name().replace(' ', '-'));
                      try (DLockClient client = DLockClient.open(TestDb.url());
                          DLock lock = client.newLock(key)) {
                        long t1;
                        try (Held other = hold(h, key)) {
                          t1 = other.token;
                          assertFalse(lock.tryLock(), "Java took a lock " + h.name() + " holds");
                        }
                        assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
                        long t2 = lock.token();
                        assertTrue(t2 > t1, "token " + t2 + " after " + h.name() + "'s " + t1);
                        Process refused = start(h, key);
                        assertTrue(refused.waitFor(30, TimeUnit.SECONDS));
                        assertEquals(3, refused.exitValue(), h.name() + " took a lock Java holds");
                        lock.unlock();
                        try (Held other = hold(h, key)) {
                          assertTrue(other.token > t2, h.name() + " token " + other.token + " after " + t2);
                          System.out.printf(
                              "interop: Java and %s exclude each other; tokens %d (%s) < %d (Java) < %d (%s)%n",
                              h.name(), t1, h.name(), t2, other.token, h.name());
                        }
                      }
                    }));
  }
}
