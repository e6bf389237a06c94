package io.dlock.internal;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * Loads libdlock_jni.so once, for DLockNativeJNI's static initialiser. In this order:
 *
 * <ol>
 *   <li>the file named by the system property {@code dlock.jni.path}, if set (nothing else is
 *       tried then);
 *   <li>the library the jar carries for this platform, {@code /native/<os>-<arch>/libdlock_jni.so}
 *       (e.g. {@code native/linux-x86_64}), copied to a directory first: {@code dlock.native.dir}
 *       if set, else {@code <java.io.tmpdir>/dlock-native-<user>} (made owner-only);
 *   <li>{@code System.loadLibrary("dlock_jni")} ({@code java.library.path}).
 * </ol>
 *
 * The copy is named by the library's SHA-256, written to a unique temporary file in that directory
 * and renamed into place atomically, so JVMs starting together never load a half-written file,
 * and later starts reuse it after checking its hash; copies of other versions unused for an hour
 * are removed. A failure names every step it tried.
 */
public final class NativeLoader {
  private NativeLoader() {}

  /** The library's file name, in the jar and on disk. */
  static final String LIB = "libdlock_jni.so";

  private static boolean loaded;

  /** Loads the JNI library, or throws UnsatisfiedLinkError saying what was tried and why. */
  public static synchronized void load() {
    if (loaded) return;
    String path = System.getProperty("dlock.jni.path");
    if (path != null && !path.isEmpty()) {
      try {
        System.load(path);
      } catch (UnsatisfiedLinkError e) {
        throw failure("dlock: cannot load the JNI library named by -Ddlock.jni.path=" + path
            + ": " + e.getMessage(), e);
      }
      loaded = true;
      return;
    }
    List<String> tried = new ArrayList<>();
    Throwable first = null;
    String platform = platform();
    String resource = "/native/" + platform + "/" + LIB;
    if (NativeLoader.class.getResource(resource) == null) {
      tried.add("the jar has no " + resource.substring(1) + " (no build for this platform)");
    } else {
      try {
        Path file = extract(resource);
        try {
          System.load(file.toString());
          loaded = true;
          return;
        } catch (UnsatisfiedLinkError e) {
          first = e;
          tried.add("the jar's " + resource.substring(1) + ", copied to " + file + ": "
              + e.getMessage() + hint(e.getMessage()));
        }
      } catch (IOException | RuntimeException e) {
        first = e;
        tried.add("copying the jar's " + resource.substring(1) + " failed: " + e
            + " (set -Ddlock.native.dir=DIR to a writable directory)");
      }
    }
    try {
      System.loadLibrary("dlock_jni");
      loaded = true;
    } catch (UnsatisfiedLinkError e) {
      if (first == null) first = e;
      tried.add("System.loadLibrary(\"dlock_jni\"): " + e.getMessage());
      throw failure("dlock: cannot load the JNI library; tried " + String.join("; then ", tried)
          + " (or set -Ddlock.jni.path=/path/to/" + LIB + ")", first);
    }
  }

  private static UnsatisfiedLinkError failure(String message, Throwable cause) {
    UnsatisfiedLinkError err = new UnsatisfiedLinkError(message);
    err.initCause(cause);
    return err;
  }

  /** What a loader message most likely means, for the usual causes. */
  private static String hint(String message) {
    if (message == null) return "";
    if (message.contains("failed to map segment") || message.contains("operation not permitted")) {
      return " (the directory may be mounted noexec: set -Ddlock.native.dir=DIR)";
    }
    if (message.contains("cannot open shared object file")) {
      return " (a system library it needs is missing; the binding's README lists them)";
    }
    return "";
  }

  /** This JVM's platform as the jar names it: {@code <os>-<arch>}, e.g. linux-x86_64. */
  static String platform() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    if (os.startsWith("linux")) {
      os = "linux";
    } else if (os.startsWith("mac") || os.startsWith("darwin")) {
      os = "macos";
    } else if (os.startsWith("windows")) {
      os = "windows";
    } else {
      os = os.replaceAll("[^a-z0-9]+", "");
    }
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    switch (arch) {
      case "amd64":
      case "x86_64":
        arch = "x86_64";
        break;
      case "aarch64":
      case "arm64":
        arch = "aarch64";
        break;
      default:
        arch = arch.replaceAll("[^a-z0-9_]+", "");
    }
    return os + "-" + arch;
  }

  /** Copies the resource to the extraction directory (unless an identical copy is there). */
  static Path extract(String resource) throws IOException {
    byte[] bytes;
    try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
      if (in == null) throw new IOException("resource " + resource + " not found");
      bytes = in.readAllBytes();
    }
    String hash = sha256(bytes);
    Path dir = directory();
    Path target = dir.resolve("libdlock_jni-" + hash.substring(0, 16) + ".so");
    if (Files.isRegularFile(target, LinkOption.NOFOLLOW_LINKS)
        && hash.equals(sha256(Files.readAllBytes(target)))) {
      // In use again: its time tells removeStale that it is not stale.
      Files.setLastModifiedTime(target, FileTime.fromMillis(System.currentTimeMillis()));
      removeStale(dir, target);
      return target;
    }
    Path tmp = Files.createTempFile(dir, "libdlock_jni-", ".tmp");
    try {
      try (OutputStream out = Files.newOutputStream(tmp)) {
        out.write(bytes);
      }
      try {
        Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (AtomicMoveNotSupportedException e) {
        // Not on a POSIX file system: a unique name instead; never a shared half-written file.
        Path own = Files.createTempFile(dir, "libdlock_jni-" + hash.substring(0, 16) + "-", ".so");
        Files.move(tmp, own, StandardCopyOption.REPLACE_EXISTING);
        return own;
      }
    } finally {
      Files.deleteIfExists(tmp);
    }
    removeStale(dir, target);
    return target;
  }

  /** How long an unused copy (another version's) stays: a JVM starting with it is long done. */
  static final long STALE_MS = 3_600_000L;

  /**
   * Deletes other versions' copies (and temporary files of failed copies) that nobody has started
   * with for STALE_MS, so that upgrades do not pile libraries up in the directory. Best effort: a
   * JVM that has loaded a deleted copy keeps it.
   */
  static void removeStale(Path dir, Path keep) {
    long cutoff = System.currentTimeMillis() - STALE_MS;
    try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "libdlock_jni-*.{so,tmp}")) {
      for (Path f : files) {
        try {
          if (!f.getFileName().equals(keep.getFileName())
              && Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)
              && Files.getLastModifiedTime(f, LinkOption.NOFOLLOW_LINKS).toMillis() < cutoff) {
            Files.deleteIfExists(f);
          }
        } catch (IOException e) {
          // someone else's, or gone already
        }
      }
    } catch (IOException | RuntimeException e) {
      // best effort
    }
  }

  private static final Set<PosixFilePermission> OWNER_ONLY =
      EnumSet.of(
          PosixFilePermission.OWNER_READ,
          PosixFilePermission.OWNER_WRITE,
          PosixFilePermission.OWNER_EXECUTE);

  /**
   * dlock.native.dir (created if missing), else a per-user directory under java.io.tmpdir that
   * only its owner may write: another user's file there could otherwise be loaded as ours.
   */
  static Path directory() throws IOException {
    String set = System.getProperty("dlock.native.dir");
    if (set != null && !set.isEmpty()) {
      return Files.createDirectories(Path.of(set));
    }
    String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9._-]", "_");
    Path dir = Path.of(System.getProperty("java.io.tmpdir"), "dlock-native-" + user);
    boolean posix = dir.getFileSystem().supportedFileAttributeViews().contains("posix");
    if (!posix) return Files.createDirectories(dir);
    try {
      Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
    } catch (FileAlreadyExistsException e) {
      // made before (by us, we check below)
    }
    if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)
        || !ownedByMe(dir)
        || !OWNER_ONLY.containsAll(Files.getPosixFilePermissions(dir, LinkOption.NOFOLLOW_LINKS))) {
      // Not ours, or others may write it: a fresh private directory instead.
      return Files.createTempDirectory("dlock-native-");
    }
    return dir;
  }

  /**
   * Whether this process's user owns dir, by uid: user.name is "?" for a uid without a passwd
   * entry (containers), whose owner name is the number, so names would never match and every
   * start would extract into a fresh temp directory.
   */
  private static boolean ownedByMe(Path dir) throws IOException {
    Path probe = Files.createTempFile("dlock-uid-", ".probe");
    try {
      return Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS)
          .equals(Files.getAttribute(probe, "unix:uid", LinkOption.NOFOLLOW_LINKS));
    } catch (UnsupportedOperationException e) {
      return Files.getOwner(dir, LinkOption.NOFOLLOW_LINKS).equals(Files.getOwner(probe));
    } finally {
      Files.deleteIfExists(probe);
    }
  }

  private static String sha256(byte[] bytes) {
    try {
      byte[] d = MessageDigest.getInstance("SHA-256").digest(bytes);
      StringBuilder s = new StringBuilder(d.length * 2);
      for (byte b : d) s.append(String.format("%02x", b));
      return s.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("no SHA-256", e);
    }
  }
}
