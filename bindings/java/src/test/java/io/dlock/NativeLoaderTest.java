package io.dlock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.dlock.internal.DLockNative;
import io.dlock.internal.NativeLoader;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The jar's own copy of libdlock_jni.so: found, extracted safely, loaded without any path set. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NativeLoaderTest {
  @TempDir Path dir;

  static final String RESOURCE = "/native/linux-x86_64/libdlock_jni.so";

  /**
   * This JVM loaded the library from the classpath's resource, not from a path it was given (nor
   * from java.library.path, which run-tests.sh's LD_LIBRARY_PATH, for the Go holder, feeds).
   */
  @Test
  void loadsTheCopyTheJarCarries() throws Exception {
    assertEquals("", System.getProperty("dlock.jni.path", ""));
    assertTrue(DLockNative.dlock_version().startsWith("1."));
    String maps = Files.readString(Path.of("/proc/self/maps"));
    String mapped =
        maps.lines()
            .filter(l -> l.contains("libdlock_jni"))
            .map(l -> l.substring(l.indexOf('/')))
            .findFirst()
            .orElseThrow();
    assertTrue(mapped.matches(".*/dlock-native-[^/]+/libdlock_jni-[0-9a-f]{16}\\.so"), mapped);
  }

  @Test
  void platformNameOfThisJvm() {
    if (System.getProperty("os.name").equals("Linux") && System.getProperty("os.arch").equals("amd64")) {
      assertEquals("linux-x86_64", platformName());
      assertNotNull(NativeLoader.class.getResource(RESOURCE));
    }
  }

  private static String platformName() {
    try {
      var m = NativeLoader.class.getDeclaredMethod("platform");
      m.setAccessible(true);
      return (String) m.invoke(null);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  /**
   * Many threads extract into one new directory at once: each gets the same file, whole, and no
   * temporary file is left; an existing copy is reused; another version's old copy is removed.
   */
  @Test
  void concurrentExtractionGivesOneWholeFile() throws Exception {
    Path target = dir.resolve("native");
    byte[] want;
    try (InputStream in = NativeLoader.class.getResourceAsStream(RESOURCE)) {
      want = in.readAllBytes();
    }
    Path stale = Files.createDirectories(target).resolve("libdlock_jni-0123456789abcdef.so");
    Files.writeString(stale, "an older version");
    Files.setLastModifiedTime(stale, FileTime.fromMillis(System.currentTimeMillis() - 7_200_000L));
    Path recent = target.resolve("libdlock_jni-fedcba9876543210.so");
    Files.writeString(recent, "another version, in use");

    String before = System.getProperty("dlock.native.dir");
    System.setProperty("dlock.native.dir", target.toString());
    ExecutorService pool = Executors.newFixedThreadPool(8);
    try {
      CountDownLatch go = new CountDownLatch(1);
      List<Future<Path>> results = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        results.add(
            pool.submit(
                () -> {
                  go.await();
                  return (Path) extract().invoke(null, RESOURCE);
                }));
      }
      go.countDown();
      Set<Path> paths = new HashSet<>();
      for (Future<Path> f : results) paths.add(f.get(60, TimeUnit.SECONDS));
      assertEquals(1, paths.size(), paths.toString());
      Path file = paths.iterator().next();
      assertArrayEquals(want, Files.readAllBytes(file));
      Path again = (Path) extract().invoke(null, RESOURCE);
      assertEquals(file, again);
      try (Stream<Path> s = Files.list(target)) {
        Set<String> names = s.map(p -> p.getFileName().toString()).collect(Collectors.toSet());
        assertEquals(Set.of(file.getFileName().toString(), recent.getFileName().toString()), names);
      }
    } finally {
      pool.shutdownNow();
      if (before == null) System.clearProperty("dlock.native.dir");
      else System.setProperty("dlock.native.dir", before);
    }
  }

  private static java.lang.reflect.Method extract() throws NoSuchMethodException {
    var m = NativeLoader.class.getDeclaredMethod("extract", String.class);
    m.setAccessible(true);
    return m;
  }

  /** Three JVMs start together on one empty directory (dlock.native.dir): all three load. */
  @Test
  void jvmsStartingTogetherAllLoad() throws Exception {
    Path target = dir.resolve("shared");
    List<Process> ps = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      ps.add(
          new ProcessBuilder(
                  Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                  "-cp",
                  System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")),
                  "-Ddlock.native.dir=" + target,
                  "--enable-native-access=ALL-UNNAMED",
                  PrintVersion.class.getName())
              .redirectErrorStream(true)
              .start());
    }
    for (Process p : ps) {
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertTrue(p.waitFor(60, TimeUnit.SECONDS));
      assertEquals(0, p.exitValue(), out);
      assertEquals(DLockNative.dlock_version(), out.strip());
    }
    try (Stream<Path> s = Files.list(target)) {
      List<String> names = s.map(p -> p.getFileName().toString()).collect(Collectors.toList());
      assertEquals(1, names.size(), names.toString());
      assertTrue(names.get(0).matches("libdlock_jni-[0-9a-f]{16}\\.so"), names.toString());
    }
  }

  /**
   * Without the jar's copy for the platform (a classpath without native/), the library comes from
   * java.library.path; without that either, the error names both steps.
   */
  @Test
  void fallsBackToLoadLibraryAndExplainsWhenThatFails() throws Exception {
    Path classes = Path.of(NativeLoader.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path testClasses = Path.of(PrintVersion.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path bare = dir.resolve("classes");
    try (Stream<Path> s = Files.walk(classes)) {
      for (Path p : (Iterable<Path>) s::iterator) {
        Path rel = classes.relativize(p);
        if (rel.toString().startsWith("native")) continue;
        if (Files.isDirectory(p)) Files.createDirectories(bare.resolve(rel.toString()));
        else Files.copy(p, bare.resolve(rel.toString()));
      }
    }
    Path lib = Files.createDirectories(dir.resolve("lib"));
    try (InputStream in = NativeLoader.class.getResourceAsStream(RESOURCE)) {
      Files.copy(in, lib.resolve("libdlock_jni.so"));
    }
    String cp = bare + java.io.File.pathSeparator + testClasses;

    String ok = runJvm(0, cp, "-Djava.library.path=" + lib);
    assertEquals(DLockNative.dlock_version(), ok.strip());

    String fail = runJvm(1, cp, "-Djava.library.path=" + dir.resolve("empty"));
    assertTrue(fail.contains("dlock: cannot load the JNI library; tried the jar has no native/"), fail);
    assertTrue(fail.contains("System.loadLibrary(\"dlock_jni\")"), fail);
    assertTrue(fail.contains("-Ddlock.jni.path="), fail);
  }

  private static String runJvm(int wantExit, String classpath, String... jvmArgs) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(List.of(jvmArgs));
    cmd.add("--enable-native-access=ALL-UNNAMED");
    cmd.add("-cp");
    cmd.add(classpath);
    cmd.add(PrintVersion.class.getName());
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS));
    assertEquals(wantExit, p.exitValue(), out);
    return out;
  }

  /** The child JVM of jvmsStartingTogetherAllLoad. */
  public static final class PrintVersion {
    public static void main(String[] args) {
      System.out.println(DLockNative.dlock_version());
    }
  }
}
