// Acquisitions per second over 1, 2 and 4 independent servers (a URL of
// several joined by ';', each key on one by rendezvous hashing), in one run,
// with ratios to the 1-server figure. Not run by CI: bench/servers_bench.sh
// starts the throwaway servers and runs it.
//
//   servers_bench [--seconds S] [--threads T] [--keys K] URL1 URL2 [URL3 URL4 ...]
//
// Each of T threads cycles over K keys of its own (no contention: the figure
// is the servers' and the client's capacity), acquire (wait 0) + release of
// a lease. Beside each figure: the client process's CPU (user+sys, in % of
// one core, from getrusage) and the whole machine's busy share (from
// /proc/stat), to say whether the client, the servers or the machine's
// cores are the limit.
#include <dlock/dlock.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "servers_bench: %s\n", what.c_str());
  std::exit(1);
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

// Busy and total jiffies of the machine (all cores).
void MachineJiffies(uint64_t* busy, uint64_t* total) {
  std::ifstream f("/proc/stat");
  std::string line;
  std::getline(f, line);
  std::istringstream in(line.substr(3));
  uint64_t v[10] = {0};
  for (auto& x : v) in >> x;
  *total = 0;
  for (auto x : v) *total += x;
  *busy = *total - v[3] - v[4];  // minus idle and iowait
}

struct Result {
  double per_s = 0, client_cpu = 0, machine_busy = 0;
  uint64_t errors = 0;
};

Result Run(const std::string& url, int threads, int keys, double seconds, const std::string& tag) {
  dlock_error err;
  dlock_client* client = nullptr;
  dlock_config* cfg = nullptr;
  if (dlock_config_new(&cfg, &err) != DLOCK_OK) Die(err.message);
  // Enough connections for every thread; the pool is per server.
  if (dlock_config_set(cfg, "pool", std::to_string(threads).c_str(), &err) != DLOCK_OK) Die(err.message);
  if (dlock_client_open(&client, url.c_str(), cfg, &err) != DLOCK_OK) Die(err.message);
  dlock_config_free(cfg);
  std::vector<std::vector<dlock_lock*>> locks(threads);
  for (int t = 0; t < threads; ++t)
    for (int k = 0; k < keys; ++k) {
      const std::string key = "sbench:" + tag + ":" + std::to_string(t) + ":" + std::to_string(k);
      dlock_lock* l = nullptr;
      if (dlock_open(&l, client, key.data(), key.size(), nullptr, &err) != DLOCK_OK) Die(err.message);
      locks[t].push_back(l);
    }
  // Warm-up: every key's row exists and every connection is open.
  for (int t = 0; t < threads; ++t)
    for (dlock_lock* l : locks[t])
      if (dlock_try(l, 0, &err) == DLOCK_OK) (void)dlock_release(l, &err);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0}, errors{0};
  uint64_t b0, t0, b1, t1;
  MachineJiffies(&b0, &t0);
  const double cpu0 = CpuSeconds();
  const auto start = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      dlock_error e;
      uint64_t n = 0, bad = 0;
      for (size_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        dlock_lock* l = locks[t][i % locks[t].size()];
        if (dlock_try(l, 0, &e) == DLOCK_OK && dlock_release(l, &e) == DLOCK_OK) ++n;
        else ++bad;
      }
      done += n;
      errors += bad;
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = CpuSeconds() - cpu0;
  MachineJiffies(&b1, &t1);
  for (auto& v : locks)
    for (dlock_lock* l : v) dlock_close(l);
  dlock_client_close(client);
  Result r;
  r.per_s = done / wall;
  r.client_cpu = 100.0 * cpu / wall;
  r.machine_busy = t1 > t0 ? 100.0 * (b1 - b0) / (t1 - t0) : 0;
  r.errors = errors;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  int threads = 8, keys = 64;
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--keys" && i + 1 < argc) keys = std::atoi(argv[++i]);
    else urls.push_back(a);
  }
  if (urls.size() < 2 || threads < 1 || keys < 1 || seconds <= 0)
    Die("usage: servers_bench [--seconds S] [--threads T] [--keys K] URL1 URL2 [URL3 URL4 ...]");
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("servers_bench: %d threads x %d keys each, lease acquire(wait 0)+release, %.0f s per "
              "figure, %u cores\n",
              threads, keys, seconds, cores);
  std::printf("%-8s %12s %8s %12s %16s %14s %8s\n", "servers", "acq/s", "ratio", "client CPU",
              "client us/acq", "machine busy", "errors");
  double base = 0;
  for (size_t n = 1; n <= urls.size(); n *= 2) {
    std::string url;
    for (size_t i = 0; i < n; ++i) url += (i ? ";" : "") + urls[i];
    Result r = Run(url, threads, keys, seconds, std::to_string(n));
    if (n == 1) base = r.per_s;
    // Client CPU per acquisition: its ceiling is about 1e6 / this per core.
    const double us_per = r.per_s > 0 ? r.client_cpu * 1e4 / r.per_s : 0;
    std::printf("%-8zu %12.0f %7.2fx %10.0f%% %16.0f %13.0f%% %8llu\n", n, r.per_s,
                r.per_s / base, r.client_cpu, us_per, r.machine_busy,
                static_cast<unsigned long long>(r.errors));
    std::fflush(stdout);
  }
  std::printf("(client CPU in %% of one core, and per acquisition; machine busy in %% of all %u "
              "cores, whoever uses them: the servers, this client, anything else running)\n",
              cores);
  return 0;
}
