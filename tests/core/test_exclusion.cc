// core_exclusion: mutual exclusion under contention, both schemes: threads of
// one process (their own Lock objects on shared clients) and separate
// processes (each with its own client), with overlap detectors that would
// notice two holders at once.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include "core_test_util.h"
#include "options.h"

using dlock::Code;
using namespace dtest;

namespace {

const std::string kPrefix = UniquePrefix("excl");

// Spins for us microseconds: a critical section long enough that an overlap
// would be seen, without sleeping.
void BusyFor(int us) {
  const auto end = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < end) {
  }
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/dlock-excl-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~TempDir() {
    std::remove((path + "/counter").c_str());
    std::remove((path + "/inside").c_str());
    rmdir(path.c_str());
  }
};

// ---- processes ----

// Runs in a forked child: its own client, iterations acquisitions of key.
// Inside the lock: create the marker exclusively (fails if another process
// is inside), read "count last_token" from the counter file, check the token
// grew, write count+1 and our token, remove the marker. Exit code 0 = fine.
[[noreturn]] void ChildMain(const std::string& dir, const std::string& key, const std::string& mode,
                            int iterations) {
  const std::string marker = dir + "/inside", counter = dir + "/counter";
  const bool tokens = mode == "lease";  // row locks have no token
  bool marker_is_mine = false;
  auto fail = [&](int code, const std::string& what) {
    std::fprintf(stderr, "child %d (%s): %s\n", static_cast<int>(getpid()), mode.c_str(), what.c_str());
    std::fflush(stderr);
    if (marker_is_mine) unlink(marker.c_str());  // do not make the others report an overlap
    _exit(code);
  };
  std::shared_ptr<dlock::Client> client;
  dlock::Status s = dlock::Client::Open(dlock_test_url(), dlock::Config(), &client);
  if (!s.ok()) fail(10, "Client::Open: " + s.message());
  dlock::Config cfg;
  (void)cfg.Set("mode", mode);
  std::unique_ptr<dlock::Lock> lock;
  s = dlock::Lock::Open(client, key, cfg, &lock);
  if (!s.ok()) fail(11, "Lock::Open: " + s.message());
  for (int i = 0; i < iterations; ++i) {
    s = lock->Try(60000);
    if (!s.ok()) fail(12, std::string("Try: ") + dlock::CodeName(static_cast<int>(s.code())) + ": " + s.message());
    int fd = open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0) fail(13, "OVERLAP: the marker exists, another process is inside the lock: " + std::string(std::strerror(errno)));
    close(fd);
    marker_is_mine = true;
    long long count = -1;
    unsigned long long last = 0;
    {
      std::ifstream in(counter);
      if (!(in >> count >> last)) fail(14, "cannot read the counter file");
    }
    BusyFor(300);
    if (tokens && lock->token() <= last)
      fail(15, "token did not grow: " + std::to_string(lock->token()) + " after " + std::to_string(last));
    {
      std::ofstream out(counter, std::ios::trunc);
      out << (count + 1) << " " << lock->token() << "\n";
      if (!out.flush()) fail(16, "cannot write the counter file");
    }
    if (unlink(marker.c_str()) != 0) fail(17, "cannot remove the marker");
    marker_is_mine = false;
    s = lock->Release();
    if (!s.ok()) fail(18, "Release: " + s.message());
  }
  lock.reset();
  client.reset();
  _exit(0);
}

void RunProcesses(const std::string& mode, int procs, int iterations) {
  TempDir dir;
  {
    std::ofstream out(dir.path + "/counter");
    out << "0 0\n";
  }
  const std::string key = kPrefix + "procs_" + mode;
  std::fflush(nullptr);
  // Fork before this process opens any client: each child opens its own.
  std::vector<pid_t> kids;
  for (int i = 0; i < procs; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) ChildMain(dir.path, key, mode, iterations);
    kids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : kids) {
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    INFO("child ", pid, " status ", st);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);  // 13 = overlap; see the child's stderr
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
  }
  long long count = -1;
  unsigned long long last = 0;
  std::ifstream in(dir.path + "/counter");
  REQUIRE(static_cast<bool>(in >> count >> last));
  CHECK(failed == 0);
  CHECK(count == static_cast<long long>(procs) * iterations);
  if (mode == "lease") CHECK(last > 0);
  CHECK(access((dir.path + "/inside").c_str(), F_OK) != 0);
}

// ---- threads ----

struct Shared {
  std::atomic<bool> inside{false};
  // Read and written as two separate steps (load, busy, store), never as one
  // atomic increment: two holders at once would lose an increment. Atomic
  // only so that ThreadSanitizer, which cannot see the database's ordering,
  // does not call the handoff a race.
  std::atomic<int64_t> counter{0};
  std::atomic<uint64_t> last_token{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> token_regressions{0};
  std::mutex mu;
  std::vector<std::string> errors;
  void Error(const std::string& e) {
    std::lock_guard<std::mutex> g(mu);
    errors.push_back(e);
  }
};

// pool 0 = the default pool size (8). holder: the locks' holder option
// ("lock": every object its own holder, sharing the lock with the others of
// its client: a release hands the lease on to the next object in line).
void RunThreads(const std::string& mode, int clients, int threads_per_client, int iterations, int pool,
                const char* holder = nullptr) {
  std::vector<std::shared_ptr<dlock::Client>> cs;
  dlock::Config ccfg;
  if (pool > 0) REQUIRE(ccfg.Set("pool", std::to_string(pool)).ok());
  for (int i = 0; i < clients; ++i) cs.push_back(OpenClient(ccfg));
  const std::string key = kPrefix + "threads_" + mode;
  std::vector<std::unique_ptr<dlock::Lock>> locks;
  dlock::Config lcfg = LockConfig(mode);
  if (holder != nullptr) REQUIRE(lcfg.Set("holder", holder).ok());
  for (int i = 0; i < clients * threads_per_client; ++i) {
    std::unique_ptr<dlock::Lock> l;
    REQUIRE(dlock::Lock::Open(cs[i % clients], key, lcfg, &l).ok());
    locks.push_back(std::move(l));
  }

  Shared sh;
  const bool tokens = mode == "lease";  // row locks have no token
  std::vector<std::thread> ts;
  const auto start = Clock::now();
  for (auto& l : locks) {
    dlock::Lock* lock = l.get();
    ts.emplace_back([&sh, lock, iterations, tokens] {
      for (int i = 0; i < iterations; ++i) {
        dlock::Status s = lock->Try(60000);
        if (!s.ok()) {
          sh.Error(std::string("Try: ") + CodeStr(s.code()) + ": " + s.message());
          continue;
        }
        if (sh.inside.exchange(true)) sh.overlaps.fetch_add(1);
        const uint64_t tok = lock->token();
        if (tokens && tok <= sh.last_token.load(std::memory_order_relaxed)) sh.token_regressions.fetch_add(1);
        sh.last_token.store(tok, std::memory_order_relaxed);
        const int64_t v = sh.counter.load(std::memory_order_relaxed);
        BusyFor(200);
        sh.counter.store(v + 1, std::memory_order_relaxed);
        sh.inside.store(false);
        s = lock->Release();
        if (!s.ok()) sh.Error(std::string("Release: ") + CodeStr(s.code()) + ": " + s.message());
      }
    });
  }
  for (auto& t : ts) t.join();
  MESSAGE(mode, ": ", locks.size(), " threads x ", iterations, " acquisitions in ", MsSince(start), " ms");
  for (const std::string& e : sh.errors) CHECK_MESSAGE(false, e);
  CHECK(sh.errors.empty());
  CHECK(sh.overlaps == 0);
  CHECK(sh.token_regressions == 0);
  CHECK(sh.counter == static_cast<int64_t>(locks.size()) * iterations);
}

}  // namespace

// First: these fork, and should do so before this process opened anything.
TEST_CASE("exclusion: 4 processes, lease") { RunProcesses("lease", 4, 40); }
TEST_CASE("exclusion: 4 processes, row") { RunProcesses("row", 4, 40); }

TEST_CASE("exclusion: 8 threads on 2 shared clients, lease") { RunThreads("lease", 2, 4, 50, 4); }
TEST_CASE("exclusion: 8 threads on 2 shared clients, row") { RunThreads("row", 2, 4, 50, 4); }
// One client with the default pool of 8: every row-lock waiter holds one.
TEST_CASE("exclusion: 8 threads on one shared client, lease") { RunThreads("lease", 1, 8, 30, 0); }
TEST_CASE("exclusion: 8 threads on one shared client, row") { RunThreads("row", 1, 8, 30, 0); }
// Each thread's object its own holder (as every Go lock is), sharing the
// lock with the other objects of its client: the line and the hand-over.
TEST_CASE("exclusion: 8 holder=lock objects on 2 shared clients, lease") {
  RunThreads("lease", 2, 4, 40, 4, "lock");
}
TEST_CASE("exclusion: 8 holder=lock objects on one shared client, row") {
  RunThreads("row", 1, 8, 30, 0, "lock");
}

namespace {

// A valid value of option o other than its default, as dlock_config_set
// takes it.
std::string OtherValue(const dlock::OptionInfo& o) {
  const std::string def = dlock::OptionDefault(o);
  switch (o.rule) {
    case dlock::OptionRule::kInt: {
      const int64_t d = std::stoll(def);
      return std::to_string(d < o.max ? d + 1 : d - 1);
    }
    case dlock::OptionRule::kBool:
      return def == "1" ? "0" : "1";
    case dlock::OptionRule::kWords:
      for (const char* const* w = o.words; *w != nullptr; ++w)
        if (def != *w) return *w;
      break;
    case dlock::OptionRule::kKeyPrefix:
      return kPrefix + "group";
    default:
      break;
  }
  FAIL("no other value for option ", o.name);
  return def;
}

std::unique_ptr<dlock::Lock> OpenWith(const std::shared_ptr<dlock::Client>& c, const std::string& key,
                                      const dlock::Config& cfg, dlock::Status* s) {
  std::unique_ptr<dlock::Lock> l;
  *s = dlock::Lock::Open(c, key, cfg, &l);
  return l;
}

}  // namespace

// Lock objects of one client, key and mode with holder=thread and reentrant
// share one hold; they must agree on every lock option, each row of the
// option table taken in turn (a new option is covered without being named
// here). mode makes another lock; holder=lock and reentrant=0 make a holder
// of its own: neither is refused.
TEST_CASE("sharing: a second object for a key must agree on every lock option") {
  auto c = OpenClient();
  size_t n = 0;
  const dlock::OptionInfo* all = dlock::Options(&n);
  int covered = 0;
  for (size_t i = 0; i < n; ++i) {
    const dlock::OptionInfo& o = all[i];
    if (o.kind != dlock::OptionKind::kLock) continue;
    ++covered;
    const std::string name = o.name, value = OtherValue(o);
    INFO("option ", name, "=", value);
    const std::string key = kPrefix + "agree-" + name;
    dlock::Config other;
    REQUIRE(other.Set(name, value).ok());
    if (name == "shards") REQUIRE(other.Set("shard_group", kPrefix + "agree").ok());
    dlock::Status s;
    auto a = OpenWith(c, key, dlock::Config(), &s);
    REQUIRE(s.ok());
    auto b = OpenWith(c, key, other, &s);
    if (name == "mode") {
      // A row lock and a lease of one key are two locks: both free.
      REQUIRE(s.ok());
      DT_CHECK_CODE(a->Try(0), Code::kOk);
      DT_CHECK_CODE(b->Try(0), Code::kOk);
      DT_CHECK_CODE(b->Release(), Code::kOk);
      DT_CHECK_CODE(a->Release(), Code::kOk);
    } else if (name == "holder" || name == "reentrant") {
      // Shares nothing: another holder, in this very thread.
      REQUIRE(s.ok());
      DT_CHECK_CODE(a->Try(0), Code::kOk);
      DT_CHECK_CODE(b->Try(0), Code::kBusy);
      DT_CHECK_CODE(a->Release(), Code::kOk);
    } else {
      DT_CHECK_CODE(s, Code::kInvalid);
      CHECK(b == nullptr);
      CHECK_MESSAGE(s.message().find(name + "=" + OptionDefault(o)) != std::string::npos, s.message());
      CHECK_MESSAGE(s.message().find(name + "=" + value) != std::string::npos, s.message());
      // Two objects with the same (other) value share the hold.
      const std::string key2 = key + "-same";
      auto x = OpenWith(c, key2, other, &s);
      REQUIRE(s.ok());
      auto y = OpenWith(c, key2, other, &s);
      REQUIRE(s.ok());
      DT_CHECK_CODE(x->Try(0), Code::kOk);
      DT_CHECK_CODE(y->Try(0), Code::kOk);
      CHECK(x->hold_count() == 2);
      DT_CHECK_CODE(y->Release(), Code::kOk);
      DT_CHECK_CODE(x->Release(), Code::kOk);
    }
  }
  CHECK(covered >= 10);
}

// Objects with holder=lock share the lock when their options agree: each is
// its own holder, and one waits for another in this process (a busy answer
// says so, with the sibling's lease by our clock). One whose options differ
// is not refused: it has a lock of its own, excluded through the server.
TEST_CASE("sharing: holder=lock objects of one key share the lock when their options agree") {
  auto c = OpenClient();
  const std::string key = kPrefix + "objects";
  dlock::Config cfg = LockConfig("lease");
  REQUIRE(cfg.Set("holder", "lock").ok());
  dlock::Config other = cfg;
  REQUIRE(other.Set("ttl_ms", "20000").ok());
  dlock::Status s;
  auto a = OpenWith(c, key, cfg, &s);
  REQUIRE(s.ok());
  auto b = OpenWith(c, key, cfg, &s);
  REQUIRE(s.ok());
  auto d = OpenWith(c, key, other, &s);
  REQUIRE(s.ok());
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  CHECK(a->hold_count() == 1);
  s = b->Try(0);
  DT_CHECK_CODE(s, Code::kBusy);
  CHECK_MESSAGE(s.message().find("another lock object of this client") != std::string::npos, s.message());
  CHECK(b->busy_remaining_ms() > 25000);
  CHECK(b->busy_remaining_ms() <= 30000);
  CHECK(b->state() == dlock::LockState::kIdle);
  CHECK(b->token() == 0);
  DT_CHECK_CODE(b->Release(), Code::kState);
  s = d->Try(0);  // asked the server: a's lease is someone else's there
  DT_CHECK_CODE(s, Code::kBusy);
  CHECK_MESSAGE(s.message().find("another lock object") == std::string::npos, s.message());
  CHECK(d->busy_remaining_ms() > 25000);
  // a is released from another thread: the object is the holder.
  std::thread([&] { DT_CHECK_CODE(a->Release(), Code::kOk); }).join();
  DT_REQUIRE_CODE(b->Try(0), Code::kOk);
  CHECK(b->token() > a->token());
  CHECK(a->state() == dlock::LockState::kIdle);
  DT_CHECK_CODE(a->Release(), Code::kState);
  // Closing b gives its hold back; a takes it.
  b.reset();
  DT_CHECK_CODE(a->Try(0), Code::kOk);
  DT_CHECK_CODE(a->Release(), Code::kOk);
}

// A holder=lock object waiting for a sibling's hold is cancelled alone, and
// closing the holder while another object waits hands the lock on.
TEST_CASE("sharing: holder=lock objects: cancel and close while a sibling waits") {
  auto c = OpenClient();
  const std::string key = kPrefix + "objects-wait";
  dlock::Config cfg = LockConfig("lease");
  REQUIRE(cfg.Set("holder", "lock").ok());
  dlock::Status s;
  auto a = OpenWith(c, key, cfg, &s);
  REQUIRE(s.ok());
  auto b = OpenWith(c, key, cfg, &s);
  REQUIRE(s.ok());
  auto w = OpenWith(c, key, cfg, &s);
  REQUIRE(s.ok());
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);

  // b waits without limit; its cancel ends its wait only.
  std::atomic<int> got_b{-1};
  const uint64_t mark = b->cancel_mark();
  std::thread tb([&] { got_b = static_cast<int>(b->TryFrom(0, mark, -1).code()); });
  dlock::Lock* wp = w.get();
  std::atomic<int> got_w{-1};
  std::atomic<uint64_t> w_token{0};
  std::thread tw([&] {
    dlock::Status ws = wp->Try(30000);
    if (ws.ok()) w_token = wp->token();
    got_w = static_cast<int>(ws.code());
    if (ws.ok()) DT_CHECK_CODE(wp->Release(), Code::kOk);
  });
  // Both wait (neither can have it while a holds); cancel b.
  CHECK(!PollUntil(Clock::now() + std::chrono::milliseconds(200),
                   [&] { return got_b.load() != -1 || got_w.load() != -1; }));
  const auto t0 = Clock::now();
  DT_CHECK_CODE(b->Cancel(), Code::kOk);
  tb.join();
  CHECK(got_b.load() == static_cast<int>(Code::kCancelled));
  CHECK(MsSince(t0) < 5000);
  CHECK(a->state() == dlock::LockState::kHeld);
  CHECK(got_w.load() == -1);
  // Closing the holder gives its hold back: w, still waiting, takes it.
  const uint64_t a_token = a->token();
  a.reset();
  tw.join();
  CHECK(got_w.load() == static_cast<int>(Code::kOk));
  CHECK(w_token.load() > a_token);
  // b, closed while waiting again, returns at once.
  std::atomic<int> again{-1};
  DT_REQUIRE_CODE(w->Try(0), Code::kOk);
  dlock::Lock* bp = b.get();
  std::thread tb2([&] { again = static_cast<int>(bp->Try(-1).code()); });
  CHECK(!PollUntil(Clock::now() + std::chrono::milliseconds(100), [&] { return again.load() != -1; }));
  b.reset();  // close: cancels the wait, waits for the call to return
  tb2.join();
  CHECK(again.load() == static_cast<int>(Code::kCancelled));
  DT_CHECK_CODE(w->Release(), Code::kOk);
}
