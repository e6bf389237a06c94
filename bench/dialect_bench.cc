// What the MySQL dialect's way of bounding a row lock's wait costs, against
// MariaDB's per-statement bound, measured in one run on one server with
// each dialect forced (core/src/dialect.h):
//
//   dialect_bench URL [--rounds N]
//
// (a) uncontended row acquire + release: time and statements per cycle
// (b) a waiter with 5 s to wait, let in 300 ms later: the MySQL dialect
//     waits on the server under a session innodb_lock_wait_timeout, set
//     and restored around the wait
// (c) a waiter with 900 ms to wait, let in 300 ms later: below the
//     session's one-second grain the MySQL dialect polls with NOWAIT
// For (b) and (c): the delay from the holder's release to the waiter's
// hold, and the statements the waiter sent. Ratios are mysql / mariadb.
#include <dlock/dlock.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

[[noreturn]] void Die(const std::string& what, const dlock_error& err) {
  std::fprintf(stderr, "dialect_bench: %s: %s\n", what.c_str(), err.message);
  std::exit(1);
}

struct Side {
  dlock_client* client = nullptr;
  dlock_lock* lock = nullptr;
};

Side Open(const std::string& url, const std::string& key) {
  Side s;
  dlock_error err;
  dlock_config* cfg = nullptr;
  if (dlock_config_new(&cfg, &err) != DLOCK_OK) Die("config", err);
  if (dlock_config_set(cfg, "mode", "row", &err) != DLOCK_OK ||
      dlock_config_set(cfg, "holder", "lock", &err) != DLOCK_OK)  // acquired and released on two threads
    Die("config", err);
  if (dlock_client_open(&s.client, url.c_str(), cfg, &err) != DLOCK_OK) Die("open " + url, err);
  if (dlock_open(&s.lock, s.client, key.data(), key.size(), nullptr, &err) != DLOCK_OK)
    Die("lock", err);
  dlock_config_free(cfg);
  return s;
}

uint64_t Statements(const Side& s) {
  uint64_t n = 0;
  dlock_error err;
  if (dlock_client_counter(s.client, "statements", &n, &err) != DLOCK_OK) Die("counter", err);
  return n;
}

struct Figures {
  double cycle_us = 0, cycle_stmts = 0;
  double long_ms = 0, long_stmts = 0;    // (b): mean handoff delay, statements per wait
  double short_ms = 0, short_stmts = 0;  // (c)
};

// One holder, one waiter on another client; the waiter gets wait_ms.
void Handoff(Side& holder, Side& waiter, int64_t wait_ms, int rounds, double* delay_ms,
             double* stmts) {
  dlock_error err;
  double total = 0;
  uint64_t sent = 0;
  for (int i = 0; i < rounds; ++i) {
    if (dlock_try(holder.lock, 0, &err) != DLOCK_OK) Die("holder try", err);
    std::atomic<bool> got{false};
    Clock::time_point got_at;
    const uint64_t before = Statements(waiter);
    std::thread t([&] {
      dlock_error e;
      if (dlock_try(waiter.lock, wait_ms, &e) != DLOCK_OK) Die("waiter try", e);
      got_at = Clock::now();
      got = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto released = Clock::now();
    if (dlock_release(holder.lock, &err) != DLOCK_OK) Die("holder release", err);
    t.join();
    sent += Statements(waiter) - before;
    total += std::chrono::duration<double, std::milli>(got_at - released).count();
    if (dlock_release(waiter.lock, &err) != DLOCK_OK) Die("waiter release", err);
  }
  *delay_ms = total / rounds;
  *stmts = static_cast<double>(sent) / rounds;
}

Figures Measure(const std::string& base, const char* dialect, int rounds) {
  const std::string url =
      base + (base.find('?') == std::string::npos ? "?" : "&") + "dialect=" + dialect;
  const std::string key = "bench:dialect:" + std::to_string(getpid()) + ":" + dialect;
  Side a = Open(url, key), b = Open(url, key);
  Figures f;
  dlock_error err;
  const int cycles = rounds * 30;
  for (int i = 0; i < 20; ++i) {  // warm: the row exists, statements are prepared
    if (dlock_try(b.lock, 5000, &err) != DLOCK_OK || dlock_release(b.lock, &err) != DLOCK_OK)
      Die("warm-up", err);
  }
  uint64_t before = Statements(b);
  auto t = Clock::now();
  for (int i = 0; i < cycles; ++i) {
    if (dlock_try(b.lock, 5000, &err) != DLOCK_OK || dlock_release(b.lock, &err) != DLOCK_OK)
      Die("cycle", err);
  }
  f.cycle_us = MsSince(t) * 1000 / cycles;
  f.cycle_stmts = static_cast<double>(Statements(b) - before) / cycles;
  Handoff(a, b, 5000, rounds, &f.long_ms, &f.long_stmts);
  Handoff(a, b, 900, rounds, &f.short_ms, &f.short_stmts);
  dlock_close(a.lock);
  dlock_close(b.lock);
  dlock_client_close(a.client);
  dlock_client_close(b.client);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dialect_bench URL [--rounds N]\n");
    return 2;
  }
  int rounds = 10;
  for (int i = 2; i + 1 < argc; i += 2)
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
  const Figures m = Measure(argv[1], "mariadb", rounds);
  const Figures y = Measure(argv[1], "mysql", rounds);
  std::printf("row lock, %d rounds; mysql dialect forced against the same server; ratio = mysql/mariadb\n",
              rounds);
  std::printf("%-44s %12s %12s %8s\n", "", "mariadb", "mysql", "ratio");
  auto row = [](const char* what, double a, double b) {
    std::printf("%-44s %12.2f %12.2f %8.2f\n", what, a, b, a > 0 ? b / a : 0.0);
  };
  row("(a) uncontended try+release, us", m.cycle_us, y.cycle_us);
  row("(a) statements per cycle", m.cycle_stmts, y.cycle_stmts);
  row("(b) 5 s wait: release -> held, ms", m.long_ms, y.long_ms);
  row("(b) statements per wait", m.long_stmts, y.long_stmts);
  row("(c) 900 ms wait: release -> held, ms", m.short_ms, y.short_ms);
  row("(c) statements per wait", m.short_stmts, y.short_stmts);
  return 0;
}
