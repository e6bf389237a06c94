// core_unit: the client's local wait queues (waiters.cc), no database. A
// thread alone in a key's line is kept without a Queue (a Solo); these check
// that every other call still sees it as the line's head, in order.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "waiters.h"

using dlock::WaitQueues;
using Clock = WaitQueues::Clock;

namespace {

bool Never() { return false; }

// Waits in these queues are cut into slices of an hour, so a waiting thread
// that nobody wakes stays asleep until its own deadline: a missed or an
// extra wake-up shows in the tests below instead of being covered by a
// 50 ms slice running out.
constexpr auto kNoSlice = std::chrono::hours(1);

// key's line with a head (the returned ticket), as a holder's place.
uint64_t JoinAsHead(WaitQueues& wq, const std::string& key) {
  bool head = false;
  const uint64_t t = wq.Join(key, &head);
  REQUIRE(head);
  return t;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

TEST_CASE("a thread alone in line heads it, and the next one waits behind it") {
  WaitQueues wq;
  const std::string key = "k";
  bool head = false;
  const uint64_t a = wq.Join(key, &head);
  CHECK(head);
  CHECK(wq.GetHint(key).contended);  // someone is in line
  CHECK(wq.WaitHead(key, a, Clock::now(), Never));

  bool b_head = true;
  const uint64_t b = wq.Join(key, &b_head);
  CHECK_FALSE(b_head);
  CHECK(b != a);
  CHECK_FALSE(wq.WaitHead(key, b, Clock::now(), Never));  // a still heads it
  CHECK(wq.WaitHead(key, a, Clock::now(), Never));

  bool c_head = true;
  const uint64_t c = wq.Join(key, &c_head);
  CHECK_FALSE(c_head);

  wq.Leave(key, a);
  CHECK(wq.WaitHead(key, b, Clock::now(), Never));  // arrival order: b, then c
  CHECK_FALSE(wq.WaitHead(key, c, Clock::now(), Never));
  wq.Leave(key, b);
  CHECK(wq.WaitHead(key, c, Clock::now(), Never));
  wq.Leave(key, c);
  CHECK_FALSE(wq.GetHint(key).contended);

  // The line is gone: the next one heads a new one.
  bool d_head = false;
  const uint64_t d = wq.Join(key, &d_head);
  CHECK(d_head);
  wq.Leave(key, d);
  CHECK_FALSE(wq.GetHint(key).contended);
}

TEST_CASE("the head leaving wakes the thread waiting behind it") {
  WaitQueues wq(kNoSlice);
  const std::string key = "k";
  const uint64_t a = JoinAsHead(wq, key);
  std::atomic<bool> waiting{false};
  std::atomic<int> got{-1};
  std::thread t([&] {
    bool h = true;
    const uint64_t b = wq.Join(key, &h);
    // stop() runs under the queues' mutex, which the thread then holds until
    // it sleeps: once it ran, a's Leave finds the thread asleep, to be woken.
    auto stop = [&] {
      waiting.store(true);
      return false;
    };
    const bool headed = wq.WaitHead(key, b, Clock::now() + std::chrono::seconds(30), stop);
    got.store(h ? 2 : headed ? 1 : 0);
    wq.Leave(key, b);
  });
  const auto limit = Clock::now() + std::chrono::seconds(10);
  while (!waiting.load() && Clock::now() < limit) std::this_thread::yield();
  REQUIRE(waiting.load());
  CHECK(got.load() == -1);  // still waiting: a heads the line
  const auto start = Clock::now();
  wq.Leave(key, a);
  t.join();
  CHECK(got.load() == 1);  // it was behind a, and headed the line once a left
  CHECK(SecondsSince(start) < 10);  // woken by the Leave, not by its 30 s deadline
}

TEST_CASE("a release is counted for a thread alone in line") {
  WaitQueues wq;
  const std::string key = "k";
  bool head = false;
  const uint64_t a = wq.Join(key, &head);
  REQUIRE(head);
  const uint64_t seen = wq.Releases(key);
  wq.Notify(key);  // a local holder released the key
  CHECK(wq.Releases(key) == seen + 1);
  // So the head's sleep between attempts ends at once, not at `until`.
  const auto start = Clock::now();
  wq.Sleep(key, seen, start + std::chrono::seconds(10), Never);
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  wq.Leave(key, a);
}

TEST_CASE("many keys alone in line at once, past the inline limit") {
  WaitQueues wq;
  std::vector<std::string> keys;
  for (int i = 0; i < 100; ++i) keys.push_back("key" + std::to_string(i));
  std::vector<uint64_t> tickets;
  for (const std::string& k : keys) {
    bool head = false;
    tickets.push_back(wq.Join(k, &head));
    CHECK(head);
  }
  // A second thread for each: behind the first, whichever way it is kept.
  std::vector<uint64_t> second;
  for (const std::string& k : keys) {
    bool head = true;
    second.push_back(wq.Join(k, &head));
    CHECK_FALSE(head);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    CHECK(wq.GetHint(keys[i]).contended);
    CHECK_FALSE(wq.WaitHead(keys[i], second[i], Clock::now(), Never));
    wq.Leave(keys[i], tickets[i]);
    CHECK(wq.WaitHead(keys[i], second[i], Clock::now(), Never));
    wq.Leave(keys[i], second[i]);
    CHECK_FALSE(wq.GetHint(keys[i]).contended);
  }
}

TEST_CASE("a new head is woken alone: neither a release nor a head change wakes the rest of the line") {
  // 20 threads wait behind a head; each leaves as soon as it heads the line.
  // Each WaitHead round that does not find its thread at the front calls
  // stop() once, so the calls count the wake-ups that were for nothing:
  // woken alone, a thread calls it once (before it first waits) and finds
  // itself at the front when woken. A local release (Notify) waking the line
  // would add about n calls; each head change waking it, about n*n/2.
  WaitQueues wq(kNoSlice);
  const std::string key = "k";
  const uint64_t a = JoinAsHead(wq, key);
  constexpr int n = 20;
  std::atomic<int> calls{0}, headed{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&] {
      bool h = true;
      const uint64_t t = wq.Join(key, &h);
      auto stop = [&] {
        calls.fetch_add(1);
        return false;
      };
      if (wq.WaitHead(key, t, Clock::now() + std::chrono::seconds(30), stop)) headed.fetch_add(1);
      wq.Leave(key, t);
    });
  }
  // Every thread has checked once, under the queues' mutex, which it holds
  // from that check until it waits: all of them wait behind a.
  const auto limit = Clock::now() + std::chrono::seconds(10);
  while (calls.load() < n && Clock::now() < limit) std::this_thread::yield();
  REQUIRE(calls.load() == n);
  wq.Notify(key);  // a local release: for the head's Sleep only
  wq.Leave(key, a);
  for (auto& t : ts) t.join();
  CHECK(headed.load() == n);
  CHECK(calls.load() <= n + n / 2);  // a few spurious wake-ups at most
}

TEST_CASE("a cancel wakes a thread waiting behind the head") {
  WaitQueues wq(kNoSlice);
  const std::string key = "k";
  const uint64_t a = JoinAsHead(wq, key);
  std::atomic<bool> cancel{false}, checked{false};
  std::atomic<int> result{-1};
  std::thread t([&] {
    bool h = true;
    const uint64_t b = wq.Join(key, &h);
    auto stop = [&] {
      checked.store(true);
      return cancel.load();
    };
    // Not woken, it would sleep until this deadline.
    result.store(wq.WaitHead(key, b, Clock::now() + std::chrono::seconds(20), stop) ? 1 : 0);
    wq.Leave(key, b);
  });
  const auto limit = Clock::now() + std::chrono::seconds(10);
  while (!checked.load() && Clock::now() < limit) std::this_thread::yield();
  REQUIRE(checked.load());  // it waits: it checks stop() under the mutex until it sleeps
  const auto start = Clock::now();
  cancel.store(true);
  wq.WakeAll(key);  // what a lock's Cancel calls
  t.join();
  CHECK(result.load() == 0);  // gave up on stop(), never headed the line
  CHECK(SecondsSince(start) < 10);
  wq.Leave(key, a);
}

TEST_CASE("a local release wakes the head's sleep") {
  WaitQueues wq(kNoSlice);
  const std::string key = "k";
  const uint64_t a = JoinAsHead(wq, key);
  bool h = true;
  const uint64_t b = wq.Join(key, &h);  // a Queue, not a line of one
  REQUIRE_FALSE(h);
  std::atomic<bool> asleep{false};
  std::atomic<double> slept{-1};
  const uint64_t seen = wq.Releases(key);
  std::thread t([&] {
    const auto start = Clock::now();
    // Not woken, it would sleep until `until`.
    wq.Sleep(key, seen, start + std::chrono::seconds(20), [&] {
      asleep.store(true);
      return false;
    });
    slept.store(SecondsSince(start));
  });
  const auto limit = Clock::now() + std::chrono::seconds(10);
  while (!asleep.load() && Clock::now() < limit) std::this_thread::yield();
  REQUIRE(asleep.load());
  wq.Notify(key);
  t.join();
  CHECK(slept.load() >= 0);
  CHECK(slept.load() < 10);
  wq.Leave(key, b);
  wq.Leave(key, a);
}
