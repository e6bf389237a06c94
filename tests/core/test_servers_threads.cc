// Threads on clients over two real servers (fixtures db and db2), the suite
// that puts a several-servers client under ThreadSanitizer
// (scripts/repeat.sh core_servers_threads 10): threads of two clients, which
// list the servers in opposite orders, lock keys that live on both servers,
// each key's exclusion and token order checked; the clients' last
// references are dropped by the workers, not by the thread that opened
// them; and a lock closed while another thread waits in Try on it ends that
// wait (kCancelled) promptly, on either server.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core_test_util.h"

using namespace dtest;

namespace {

void BusyFor(int us) {
  const auto end = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < end) {
  }
}

// One key's overlap detector. The counter is read and written in two steps
// (a lost update shows two holders at once); atomics only so that TSan, which
// cannot see the database's ordering, does not call the handoff a race.
struct KeyState {
  std::atomic<bool> inside{false};
  std::atomic<int64_t> counter{0};
  std::atomic<uint64_t> last_token{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> token_regressions{0};
};

struct Errors {
  std::mutex mu;
  std::vector<std::string> list;
  void Add(const std::string& e) {
    std::lock_guard<std::mutex> g(mu);
    list.push_back(e);
  }
};

}  // namespace

TEST_CASE("two servers, threads: keys on both servers, exclusion and tokens per key") {
  const std::string u1 = dlock_test_url(), u2 = Url2();
  auto a = OpenUrl(u1 + ";" + u2);
  auto b = OpenUrl(u2 + ";" + u1);  // the same servers, the other order
  const std::string p = UniquePrefix("srvthr");
  // Two keys on each server (a's order: index 0 is u1).
  const std::vector<std::string> keys = {KeyOn(*a, p + "a", 0), KeyOn(*a, p + "b", 0),
                                         KeyOn(*a, p + "c", 1), KeyOn(*a, p + "d", 1)};
  constexpr int kThreads = 6, kRounds = 40;
  std::vector<KeyState> state(keys.size());
  Errors errors;
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    // Each worker owns a reference to its client; the opener drops its own
    // below, so the last one to finish destroys the client (both servers'
    // clients, their janitors and renewers) on a worker thread.
    std::shared_ptr<dlock::Client> c = t % 2 == 0 ? a : b;
    ts.emplace_back([&, t, c]() mutable {
      std::vector<std::unique_ptr<dlock::Lock>> locks;
      for (const auto& k : keys) {
        std::unique_ptr<dlock::Lock> l;
        dlock::Status s = dlock::Lock::Open(c, k, LockConfig("lease", 10000), &l);
        if (!s.ok()) {
          errors.Add("Lock::Open: " + s.message());
          ++ready;
          return;
        }
        locks.push_back(std::move(l));
      }
      ++ready;
      for (int r = 0; r < kRounds; ++r) {
        const size_t i = static_cast<size_t>(t + r) % keys.size();
        dlock::Lock* lock = locks[i].get();
        KeyState& st = state[i];
        dlock::Status s = lock->Try(60000);
        if (!s.ok()) {
          errors.Add("Try " + keys[i] + ": " + CodeStr(s.code()) + ": " + s.message());
          continue;
        }
        if (st.inside.exchange(true)) st.overlaps.fetch_add(1);
        const uint64_t tok = lock->token();
        if (tok <= st.last_token.load(std::memory_order_relaxed)) st.token_regressions.fetch_add(1);
        st.last_token.store(tok, std::memory_order_relaxed);
        const int64_t v = st.counter.load(std::memory_order_relaxed);
        BusyFor(300);
        st.counter.store(v + 1, std::memory_order_relaxed);
        st.inside.store(false);
        s = lock->Release();
        if (!s.ok()) errors.Add("Release " + keys[i] + ": " + CodeStr(s.code()) + ": " + s.message());
      }
      locks.clear();
      c.reset();
    });
  }
  REQUIRE(PollUntil(Clock::now() + std::chrono::seconds(60), [&] { return ready == kThreads; }));
  a.reset();
  b.reset();
  for (auto& t : ts) t.join();
  for (const std::string& e : errors.list) CHECK_MESSAGE(false, e);
  int64_t total = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO("key ", keys[i]);
    CHECK(state[i].overlaps == 0);
    CHECK(state[i].token_regressions == 0);
    CHECK(state[i].last_token > 0);
    total += state[i].counter;
  }
  CHECK(total == kThreads * kRounds);
  // Every row on its key's server only, none left held.
  Admin s1(u1.c_str()), s2(u2.c_str());
  for (size_t i = 0; i < keys.size(); ++i) {
    Admin& on = i < 2 ? s1 : s2;
    Admin& off = i < 2 ? s2 : s1;
    CHECK(LeaseRow(off, keys[i]).empty());
    CHECK(on.Int("SELECT COUNT(*) FROM distributed_lock WHERE lock_key = " + Lit(keys[i]) +
                 " AND owner <> '' AND expire_time > NOW(6)") == 0);
  }
}

TEST_CASE("two servers, threads: a lock closed while another thread waits in Try") {
  const std::string u1 = dlock_test_url(), u2 = Url2();
  auto a = OpenUrl(u1 + ";" + u2);
  auto b = OpenUrl(u2 + ";" + u1);
  const std::string p = UniquePrefix("srvclose");
  for (int variant = 0; variant < 4; ++variant) {
    const size_t want = static_cast<size_t>(variant % 2);
    const std::string k = KeyOn(*a, p + std::to_string(variant) + "_", want);
    INFO("key on server ", want + 1, " of a, variant ", variant);
    auto holder = OpenLock(a, k);
    REQUIRE(holder->Try(0).ok());
    // holder=lock: the waiter shares no hold with anyone; a short ttl, so
    // that a lease attempt the close cut off after it was sent (the server
    // may run it late, after the holder's release) runs out soon.
    dlock::Config wcfg = LockConfig("lease", 3000);
    REQUIRE(wcfg.Set("holder", "lock").ok());
    std::unique_ptr<dlock::Lock> waiter;
    REQUIRE(dlock::Lock::Open(b, k, wcfg, &waiter).ok());
    uint64_t sent0 = 0;
    REQUIRE(b->Counter("statements", &sent0).ok());
    dlock::Lock* w = waiter.get();
    std::atomic<int> rc{1};
    std::atomic<int64_t> returned_ms{-1};
    const auto t0 = Clock::now();
    std::thread t([&] {
      dlock::Status s = w->Try(20000);
      rc = static_cast<int>(s.code());
      returned_ms = MsSince(t0);
    });
    // Inside the library once the try sent its first statement (nothing
    // else on client b sends one meanwhile): only then may the close come.
    const bool inside = PollUntil(Clock::now() + std::chrono::seconds(10), [&] {
      uint64_t sent = 0;
      return b->Counter("statements", &sent).ok() && sent != sent0;
    });
    CHECK(inside);
    // Not synchronisation: the close must be right at any point of the
    // call; variants 2 and 3 come well into the wait.
    if (variant >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int64_t close_at = MsSince(t0);
    waiter.reset();  // must cancel the wait and wait for it, not free under it
    const int64_t close_ms = MsSince(t0) - close_at;
    t.join();
    CHECK(rc == static_cast<int>(Code::kCancelled));
    CHECK(close_ms < 3000);
    CHECK(returned_ms - close_at < 3000);  // the 20 s wait ended at the close
    REQUIRE(holder->Release().ok());
    // The key is free for another object of b (within the closed waiter's
    // ttl, should its cut-off attempt have won after the release).
    auto next = OpenLock(b, k);
    CHECK(next->Try(3000 + 3000).ok());
    CHECK(next->Release().ok());
  }
}
