package io.dlock;

import io.dlock.internal.DLockNative;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.ref.Cleaner;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/** What the facade classes share: the Cleaner, option maps as dlock_config, thread helpers. */
final class Natives {
  private Natives() {}

  /** Safety net only: close() is the way to free a handle. */
  static final Cleaner CLEANER = Cleaner.create();

  /**
   * The oldest libdlock this binding works with, as dlock_version_number counts (major * 10000 +
   * minor * 100 + patch): it calls dlock_abort_as and dlock_mode and passes negative waits (1.3).
   */
  static final int NEED_LIBRARY = 10300;

  private static volatile boolean libraryChecked;

  /**
   * Throws IllegalStateException, naming both versions, when the loaded libdlock is older than
   * NEED_LIBRARY. Reads dlock_version(), which every release has: on an older library, calling
   * one of 1.3's functions (dlock_version_number among them) would fail in the dynamic loader.
   */
  static void requireLibrary() {
    if (libraryChecked) return;
    String problem = checkLibrary(DLockNative.dlock_version());
    if (problem != null) throw new IllegalStateException(problem);
    libraryChecked = true;
  }

  /** null when version ("major.minor.patch") is recent enough, else why not. */
  static String checkLibrary(String version) {
    String need = (NEED_LIBRARY / 10000) + "." + (NEED_LIBRARY / 100 % 100) + "." + (NEED_LIBRARY % 100);
    String[] parts = version == null ? new String[0] : version.split("\\.");
    try {
      if (parts.length == 3) {
        int major = Integer.parseInt(parts[0]);
        int number = major * 10000 + Integer.parseInt(parts[1]) * 100 + Integer.parseInt(parts[2]);
        if (major == NEED_LIBRARY / 10000 && number >= NEED_LIBRARY) return null;
        return "dlock: the loaded libdlock is " + version + ", but this binding needs " + need
            + " or later (same major version): install a newer libdlock, or put one first on the"
            + " loader's path (LD_LIBRARY_PATH)";
      }
    } catch (NumberFormatException e) {
      // below
    }
    return "dlock: the loaded libdlock reports version \"" + version + "\", which this binding"
        + " cannot read (it needs " + need + " or later)";
  }

  /** Builds a dlock_config from options (copied by the open call), or 0 for none. */
  static long config(Map<String, String> options) {
    if (options == null || options.isEmpty()) return 0;
    long cfg = DLockNative.dlockswig_config_new();
    try {
      for (Map.Entry<String, String> e : options.entrySet()) {
        DLockNative.dlock_config_set(
            cfg,
            Objects.requireNonNull(e.getKey(), "option name"),
            Objects.requireNonNull(e.getValue(), () -> "value of option " + e.getKey()));
      }
      return cfg;
    } catch (RuntimeException e) {
      DLockNative.dlock_config_free(cfg);
      throw e;
    }
  }

  private static final MethodHandle IS_VIRTUAL = isVirtualHandle();

  private static MethodHandle isVirtualHandle() {
    try {
      return MethodHandles.publicLookup()
          .findVirtual(Thread.class, "isVirtual", MethodType.methodType(boolean.class));
    } catch (ReflectiveOperationException e) {
      return null; // JDK 17..20: no virtual threads
    }
  }

  /** Thread.currentThread().isVirtual() on JDK 21+, false before. */
  static boolean onVirtualThread() {
    if (IS_VIRTUAL == null) return false;
    try {
      return (boolean) IS_VIRTUAL.invokeExact(Thread.currentThread());
    } catch (Throwable t) {
      return false;
    }
  }

  /**
   * Platform threads that host a blocking native wait for a virtual thread. A virtual thread in a
   * native call pins its carrier; a few waiters could then occupy every carrier while the holder,
   * unmounted, waits for one to run its unlock. The virtual thread parks on the result instead.
   */
  static final ExecutorService WAIT_HOSTS =
      Executors.newCachedThreadPool(
          new java.util.concurrent.ThreadFactory() {
            private final AtomicInteger n = new AtomicInteger();

            @Override
            public Thread newThread(Runnable r) {
              Thread t = new Thread(r, "dlock-wait-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            }
          });
}
