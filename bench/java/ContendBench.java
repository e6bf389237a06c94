// The Java rows of the benchmark (bench/run.sh): the scenarios of dlock_bench
// through the Java binding, one thread per contender with its own DLock
// object.
//
//   java -cp CLASSES:. -Ddlock.jni.path=... ContendBench URL [PROCS THREADS SECONDS]
//
// (b) uncontended acquire + release, lease and row; (c) the article's loop
// (release, then at once acquire again); (d) every handoff to a waiter
// (20 ms outside). 20 ms inside, PROCS*THREADS contenders in one JVM and
// THREADS in each of PROCS JVMs (this class started again with -child).
// DLOCK_BENCH_PARTS (e.g. "b" or "cd"): only those sections; bench/run.sh
// runs (b) with the server and this JVM pinned to one core.
import io.dlock.DLock;
import io.dlock.DLockClient;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

public final class ContendBench {
  // The wall clock: the same in every process of this machine.
  static double nowMs() {
    java.time.Instant i = java.time.Instant.now();
    return i.getEpochSecond() * 1e3 + i.getNano() / 1e6;
  }

  static List<double[]> child(String url, String mode, String key, int proc, int threads, double start,
                              double end, double outside) throws Exception {
    List<double[]> out = Collections.synchronizedList(new ArrayList<>());
    try (DLockClient c = DLockClient.open(url, Map.of("pool", Integer.toString(threads + 4)))) {
      List<Thread> ts = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        final int id = proc * threads + t;
        String fair = System.getenv("DLOCK_BENCH_FAIR");  // e.g. 0: the fair=0 figures
        final DLock l = c.newLock(key, fair == null ? Map.of("mode", mode) : Map.of("mode", mode, "fair", fair));
        Thread th = new Thread(() -> {
          try {
            while (nowMs() < start) Thread.sleep(1);
            while (nowMs() < end) {
              if (!l.tryLock(10, TimeUnit.SECONDS)) continue;
              double acq = nowMs();
              Thread.sleep(20);
              double rel = nowMs();
              l.unlock();
              out.add(new double[] {acq, rel, id, proc});
              if (outside > 0) Thread.sleep((long) outside);
            }
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          } finally {
            l.close();
          }
        });
        th.start();
        ts.add(th);
      }
      for (Thread th : ts) th.join();
    }
    return out;
  }

  static String ratio(int most, int fewest) {
    return fewest == 0 ? most + ":0" : String.format("%.1f:1", (double) most / fewest);
  }

  static void contend(String url, String mode, int procs, int threads, double seconds, double outside,
                      boolean loop) throws Exception {
    String key = "bench:java:" + ProcessHandle.current().pid() + ":" + System.nanoTime();
    double start = nowMs() + 6000;  // JVMs take seconds to start on a busy 2-core machine
    double end = start + seconds * 1000;
    String java = ProcessHandle.current().info().command().orElse("java");
    List<Process> ps = new ArrayList<>();
    for (int p = 0; p < procs; p++) {
      List<String> cmd = new ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"),
          "-Ddlock.jni.path=" + System.getProperty("dlock.jni.path"), "--enable-native-access=ALL-UNNAMED",
          "ContendBench", "-child", url, mode, key, Integer.toString(p), Integer.toString(threads),
          Double.toString(start), Double.toString(end), Double.toString(outside)));
      ps.add(new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start());
    }
    List<double[]> all = new ArrayList<>();
    for (Process p : ps) {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
        String line;
        while ((line = r.readLine()) != null) {
          String[] f = line.trim().split(" ");
          all.add(new double[] {Double.parseDouble(f[0]), Double.parseDouble(f[1]), Double.parseDouble(f[2]),
                                Double.parseDouble(f[3])});
        }
      }
      if (p.waitFor() != 0) throw new IllegalStateException("a contender JVM failed");
    }
    all.sort((a, b) -> Double.compare(a[0], b[0]));
    List<Double> hand = new ArrayList<>();
    int retakes = 0, overlaps = 0;
    for (int i = 1; i < all.size(); i++) {
      double h = all.get(i)[0] - all.get(i - 1)[1];
      if (h < 0) overlaps++;
      else hand.add(h);
      if (all.get(i)[2] == all.get(i - 1)[2]) retakes++;
    }
    Collections.sort(hand);
    double p50 = hand.isEmpty() ? 0 : hand.get(Math.min(hand.size() - 1, (int) (0.5 * hand.size())));
    double p99 = hand.isEmpty() ? 0 : hand.get(Math.min(hand.size() - 1, (int) (0.99 * hand.size())));
    int[] per = new int[procs * threads];
    int inwin = 0;
    for (double[] r : all) {
      per[(int) r[2]]++;
      if (r[0] >= start && r[0] < end) inwin++;
    }
    int most = Arrays.stream(per).max().orElse(0), fewest = Arrays.stream(per).min().orElse(0);
    String name = "java " + mode;
    if (loop) {
      System.out.printf("  %-30s %6d acq  %4.0f%% of limit  per thread max:min %-8s re-take %4.0f%%  overlaps %d%n",
          name, all.size(), inwin / seconds / 50 * 100, ratio(most, fewest),
          all.size() > 1 ? 100.0 * retakes / (all.size() - 1) : 0.0, overlaps);
    } else {
      System.out.printf("  %-30s %6d acq  %4.0f%% of limit  handoff p50 %6.2f ms  p99 %6.2f ms (%4.1fx)  per thread %-7s overlaps %d%n",
          name, all.size(), inwin / seconds / 50 * 100, p50, p99, p50 > 0 ? p99 / p50 : 0.0, ratio(most, fewest),
          overlaps);
    }
    System.out.flush();
  }

  static double uncontended(DLockClient c, String mode, int n) {
    try (DLock l = c.newLock("bench:java:uncontended:" + mode + ":" + ProcessHandle.current().pid(),
        Map.of("mode", mode))) {
      l.lock();
      l.unlock();
      double t0 = nowMs();
      for (int i = 0; i < n; i++) {
        l.lock();
        l.unlock();
      }
      return (nowMs() - t0) / n;
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("-child")) {
      List<double[]> out = child(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
          Double.parseDouble(args[6]), Double.parseDouble(args[7]), Double.parseDouble(args[8]));
      StringBuilder b = new StringBuilder();
      synchronized (out) {
        for (double[] r : out) b.append(r[0]).append(' ').append(r[1]).append(' ').append((int) r[2]).append(' ')
            .append((int) r[3]).append('\n');
      }
      System.out.print(b);
      System.out.flush();
      System.exit(0);
    }
    String url = args[0];
    int procs = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    int threads = args.length > 2 ? Integer.parseInt(args[2]) : 10;
    double seconds = args.length > 3 ? Double.parseDouble(args[3]) : 10;
    String parts = System.getenv("DLOCK_BENCH_PARTS");
    if (parts != null && parts.isEmpty()) parts = null;  // as in Go: empty is every section
    if (parts == null || parts.contains("b")) try (DLockClient c = DLockClient.open(url)) {
      double[] l = new double[5], r = new double[5];
      for (int i = 0; i < 5; i++) {
        l[i] = uncontended(c, "lease", 60);
        r[i] = uncontended(c, "row", 300);
      }
      Arrays.sort(l);
      Arrays.sort(r);
      System.out.printf("(b) Java, uncontended acquire + release (median of 5 rounds): lease %.3f ms, row %.3f ms%n",
          l[2], r[2]);
    }
    int n = procs * threads;
    String only = System.getenv("DLOCK_BENCH_SCENARIOS");  // e.g. "d1,cp": only those
    for (boolean loop : new boolean[] {true, false}) {
      if (parts != null && !parts.contains(loop ? "c" : "d")) continue;
      for (int[] lay : new int[][] {{1, n}, {procs, threads}}) {
        if (only != null && !only.contains((loop ? "c" : "d") + (lay[0] == 1 ? "1" : "p"))) continue;
        System.out.printf("%s, %d threads in %d JVM%s, 20 ms inside, %.0f s, Java%n",
            loop ? "(c) the article's loop" : "(d) every handoff to a waiter (20 ms outside)", n, lay[0],
            lay[0] == 1 ? "" : "s", seconds);
        for (String mode : new String[] {"lease", "row"}) contend(url, mode, lay[0], lay[1], seconds, loop ? 0 : 20, loop);
      }
    }
  }
}
