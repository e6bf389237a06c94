package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;

import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Two JVMs contend for one key: a second java process runs {@link Contender}. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TwoJvmTest {
  @TempDir Path dir;

  static Process startJvm(String... args) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-cp");
    cmd.add(System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")));
    cmd.add("-Ddlock.jni.path=" + System.getProperty("dlock.jni.path", ""));
    cmd.add("--enable-native-access=ALL-UNNAMED");
    cmd.add(Contender.class.getName());
    cmd.add(TestDb.url());
    for (String a : args) cmd.add(a);
    return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
  }

  /**
   * Both JVMs append numbered lines to one file under the lock, each line numbered from the last
   * one read: an overlap would repeat a number. The lines must also interleave (real contention).
   */
  @Test
  void processesExcludeEachOther() throws Exception {
    String key = TestDb.key("jvms");
    Path counter = dir.resolve("counter");
    Files.writeString(counter, "");
    int rounds = 60;
    Process child = startJvm("count", key, counter.toString(), String.valueOf(rounds));
    BufferedReader out =
        new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
    try (DLockClient client = DLockClient.open(TestDb.url());
        DLock lock = client.newLock(key)) {
      assertEquals("READY", out.readLine()); // both loops start together
      Contender.count(lock, counter, rounds, "parent");
    }
    assertTrue(child.waitFor(60, TimeUnit.SECONDS), "child did not finish");
    assertEquals(0, child.exitValue());
    List<String> lines = Files.readAllLines(counter);
    assertEquals(2 * rounds, lines.size());
    int switches = 0;
    for (int i = 0; i < lines.size(); i++) {
      String[] f = lines.get(i).split(" ");
      assertEquals(i + 1, Integer.parseInt(f[0]), "line " + (i + 1) + ": " + lines.get(i));
      if (i > 0 && !f[1].equals(lines.get(i - 1).split(" ")[1])) switches++;
    }
    System.out.println("two JVMs: " + lines.size() + " increments, " + switches + " handoffs between them");
    assertTrue(switches >= 2, "the JVMs did not interleave: " + switches + " switches");
  }

  /** The child holds; this JVM is refused, then gets it after the child releases. */
  @Test
  void handoffBetweenProcesses() throws Exception {
    String key = TestDb.key("jvm-handoff");
    Process child = startJvm("hold", key);
    BufferedReader out =
        new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
    String line = out.readLine();
    assertTrue(line != null && line.startsWith("HELD "), "child said " + line);
    long childToken = Long.parseLong(line.substring(5).trim());
    try (DLockClient client = DLockClient.open(TestDb.url());
        DLock lock = client.newLock(key)) {
      assertFalse(lock.tryLock());
      try (Writer in = new OutputStreamWriter(child.getOutputStream(), StandardCharsets.UTF_8)) {
        in.write("release\n");
      }
      assertTrue(lock.tryLock(10, TimeUnit.SECONDS));
      assertTrue(lock.token() > childToken, lock.token() + " > " + childToken);
      lock.unlock();
    }
    assertTrue(child.waitFor(30, TimeUnit.SECONDS));
    assertEquals(0, child.exitValue());
  }

  /** A wrong JNI library path fails with a message that says what to set, not a crash. */
  @Test
  void missingJniLibraryIsExplained() throws Exception {
    Process p =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")),
                "-Ddlock.jni.path=" + dir.resolve("no-such-libdlock_jni.so"),
                Hold.class.getName(),
                "-url",
                TestDb.url(),
                "-key",
                "k")
            .redirectErrorStream(true)
            .start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(30, TimeUnit.SECONDS));
    assertTrue(p.exitValue() != 0);
    assertTrue(out.contains("cannot load the JNI library"), out);
    assertTrue(out.contains("-Ddlock.jni.path="), out);
  }

  /** The other JVM. */
  public static final class Contender {
    public static void main(String[] args) throws Exception {
      String url = args[0];
      String mode = args[1];
      String key = args[2];
      try (DLockClient client = DLockClient.open(url);
          DLock lock = client.newLock(key)) {
        if (mode.equals("count")) {
          System.out.println("READY");
          System.out.flush();
          count(lock, Path.of(args[3]), Integer.parseInt(args[4]), "child");
        } else {
          lock.lock();
          System.out.println("HELD " + lock.token());
          System.out.flush();
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
          lock.unlock();
        }
      }
    }

    static void count(DLock lock, Path file, int rounds, String who) throws Exception {
      for (int i = 0; i < rounds; i++) {
        lock.lock();
        try {
          List<String> lines = Files.readAllLines(file);
          int last = lines.isEmpty() ? 0 : Integer.parseInt(lines.get(lines.size() - 1).split(" ")[0]);
          Files.writeString(file, (last + 1) + " " + who + "\n", StandardOpenOption.APPEND);
        } finally {
          lock.unlock();
        }
        // Work outside the lock: without it the releasing JVM takes the lock straight back
        // (the library promises exclusion, not fairness), and the other may never get a turn.
        Thread.sleep(2);
      }
    }
  }

}
