// core_cutter: the watchdog's cutter and its own connection's bounds
// (renewer.cc), against real servers (fixtures db and db2) and a relay on
// loopback that can forward, freeze, delay statements, or accept and never
// answer:
//  - a frozen server (SIGSTOP of db2): the renewal on it is cut within its
//    budget, the lease on the other server keeps renewing, the frozen one's
//    loss is reported soon after its expiry (the reconnect is bounded);
//  - a relay that accepts and never answers, or greets and then hangs: the
//    watchdog's connect ends within its bound (ttl/3, the cut + 1 s), not
//    the client's connect_timeout/read_timeout, and the lock reports the
//    loss cleanly;
//  - a slow server that answers every statement in time: an attempt of
//    several statements is not cut for their sum;
//  - a long lease's renewal that stalls is cut at the budget of the
//    shortest lease the watchdog renews, not its own: the short lease,
//    waiting behind it on the one watchdog thread, keeps its hold;
//  - and the pool's connect (conn.cc, Conn::Connect): a multi-host URL whose
//    first nodes accept and never answer costs a try its wait, not a
//    connect_timeout per node, and a long enough wait still gets the node
//    that answers.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conn.h"
#include "core_test_util.h"
#include "renewer.h"

using namespace dtest;

namespace {

using std::chrono::milliseconds;

// The statements Connector/C runs for a new session inside its connect
// (MYSQL_INIT_COMMAND: conn.cc's kSessionInit).
constexpr int kSessionSetupCommands = 2;

// A TCP relay on 127.0.0.1 in front of a server. What it does with a
// connection depends on the mode when it was accepted; FreezeAll() stops
// the ones open now (a server that hangs with its sockets open). One
// thread polls every socket; the test thread only sets what it does next.
class Relay {
 public:
  enum class Mode {
    kForward,        // both ways, client-to-server statements delayed as set
    kSilent,         // accepted, never answered (no greeting)
    kGreetThenHang,  // the server's greeting forwarded, then nothing either way
    kHangAfterLogin,  // the login forwarded, then nothing (the first command hangs)
    kHangAfterSetup,  // the login and the session's set-up, then nothing
  };

  Relay(const std::string& host, unsigned upstream_port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    REQUIRE(getaddrinfo(host.c_str(), std::to_string(upstream_port).c_str(), &hints, &res) == 0);
    std::memcpy(&upstream_, res->ai_addr, sizeof upstream_);
    freeaddrinfo(res);
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(listener_, 64) == 0);
    socklen_t len = sizeof a;
    REQUIRE(getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Relay() { Stop(); }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  unsigned port() const { return port_; }
  void SetMode(Mode m) {
    std::lock_guard<std::mutex> g(mu_);
    mode_ = m;
  }
  void FreezeAll() {
    std::lock_guard<std::mutex> g(mu_);
    freeze_all_ = true;
  }
  // COM_STMT_PREPARE and COM_STMT_EXECUTE from the client reach the server
  // this much later (one round trip each): a slow, loaded server.
  void SetStatementDelay(milliseconds d) {
    std::lock_guard<std::mutex> g(mu_);
    delay_ = d;
  }
  // The next command from a client whose packet carries these bytes (a
  // statement's parameter, such as a lease's key) never reaches the
  // server, and its connection goes quiet both ways from there; the other
  // connections, and new ones, go on as before. Once.
  void StallNextCarrying(const std::string& bytes) {
    std::lock_guard<std::mutex> g(mu_);
    stall_bytes_ = bytes;
    stalled_at_ = {};
  }
  // When that command came (the epoch while it has not).
  Clock::time_point stalled_at() {
    std::lock_guard<std::mutex> g(mu_);
    return stalled_at_;
  }
  // Connections accepted so far.
  int accepted() {
    std::lock_guard<std::mutex> g(mu_);
    return accepted_;
  }
  // Closes the listener and every socket: whatever waits on the relay fails
  // at once, and new connects are refused.
  void Stop() {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stop_) return;
      stop_ = true;
    }
    thread_.join();
    for (Pair& p : pairs_) p.Close();
    pairs_.clear();
    close(listener_);
  }

 private:
  struct Chunk {
    Clock::time_point ready;
    std::string bytes;
  };
  struct Pair {
    int down = -1, up = -1;
    bool frozen = false, greet_only = false;
    int hang_at_command = 0;  // the n-th command hangs (0: none)
    int commands = 0;
    std::string c2s, s2c;       // bytes not yet framed into whole packets
    std::deque<Chunk> pending;  // client-to-server packets, each sent when ready
    void Close() {
      if (down >= 0) close(down);
      if (up >= 0) close(up);
      down = up = -1;
      frozen = true;
    }
  };

  static bool SendAll(int fd, const std::string& b) {
    size_t off = 0;
    while (off < b.size()) {
      ssize_t n = send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Whole MySQL packets (3-byte length, sequence, payload) taken off buf.
  static std::vector<std::string> Packets(std::string* buf) {
    std::vector<std::string> out;
    while (buf->size() >= 4) {
      const size_t len = static_cast<unsigned char>((*buf)[0]) |
                         static_cast<unsigned char>((*buf)[1]) << 8 |
                         static_cast<unsigned char>((*buf)[2]) << 16;
      if (buf->size() < 4 + len) break;
      out.push_back(buf->substr(0, 4 + len));
      buf->erase(0, 4 + len);
    }
    return out;
  }

  void Accept(Mode mode) {
    Pair p;
    p.down = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (p.down < 0) return;
    {
      std::lock_guard<std::mutex> g(mu_);
      ++accepted_;
    }
    if (mode == Mode::kSilent) {
      p.frozen = true;
    } else {
      p.up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (p.up < 0 || connect(p.up, reinterpret_cast<const sockaddr*>(&upstream_), sizeof upstream_) != 0) {
        p.Close();
        return;
      }
      p.greet_only = mode == Mode::kGreetThenHang;
      if (mode == Mode::kHangAfterLogin) p.hang_at_command = 1;
      if (mode == Mode::kHangAfterSetup) p.hang_at_command = 1 + kSessionSetupCommands;
    }
    pairs_.push_back(std::move(p));
  }

  void Loop() {
    for (;;) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      std::vector<std::pair<size_t, bool>> who;  // pair, upstream side
      auto wake = Clock::now() + milliseconds(5);
      for (size_t i = 0; i < pairs_.size(); ++i) {
        Pair& p = pairs_[i];
        if (p.frozen) continue;
        fds.push_back({p.down, POLLIN, 0});
        who.emplace_back(i, false);
        fds.push_back({p.up, POLLIN, 0});
        who.emplace_back(i, true);
        if (!p.pending.empty()) wake = std::min(wake, p.pending.front().ready);
      }
      const auto wait = std::chrono::duration_cast<milliseconds>(wake - Clock::now()).count();
      if (poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 0))) < 0) continue;
      // What the test set is read after the wait: it applies to whatever
      // the wait returned.
      Mode mode;
      milliseconds delay;
      std::string stall;
      {
        std::lock_guard<std::mutex> g(mu_);
        if (stop_) return;
        mode = mode_;
        delay = delay_;
        stall = stall_bytes_;
        if (freeze_all_) {
          for (Pair& p : pairs_) p.frozen = true;
          freeze_all_ = false;
        }
      }
      if (fds[0].revents & POLLIN) Accept(mode);
      for (size_t k = 1; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        Pair& p = pairs_[who[k - 1].first];
        if (p.frozen) continue;
        char buf[16384];
        const ssize_t n = recv(fds[k].fd, buf, sizeof buf, 0);
        if (n <= 0) {
          p.Close();  // one side closed: so does the other
          continue;
        }
        if (who[k - 1].second) {  // from the server
          if (!p.greet_only) {
            if (!SendAll(p.down, std::string(buf, n))) p.Close();
            continue;
          }
          p.s2c.append(buf, n);
          std::vector<std::string> greeting = Packets(&p.s2c);
          if (greeting.empty()) continue;
          if (!SendAll(p.down, greeting[0])) p.Close();
          p.frozen = true;  // and then nothing
        } else {  // from the client: statements wait their delay, in order
          p.c2s.append(buf, n);
          for (std::string& pkt : Packets(&p.c2s)) {
            // A command starts a new sequence (the login's packets do not).
            if (pkt[3] == 0 && ++p.commands == p.hang_at_command) {
              p.frozen = true;
              break;
            }
            if (pkt[3] == 0 && !stall.empty() && pkt.find(stall, 4) != std::string::npos) {
              p.frozen = true;
              std::lock_guard<std::mutex> g(mu_);
              if (stall_bytes_ == stall) {
                stall_bytes_.clear();
                stalled_at_ = Clock::now();
              }
              stall.clear();
              break;
            }
            const bool stmt = pkt[3] == 0 && pkt.size() > 4 && (pkt[4] == 0x16 || pkt[4] == 0x17);
            Clock::time_point ready = Clock::now() + (stmt ? delay : milliseconds(0));
            if (!p.pending.empty()) ready = std::max(ready, p.pending.back().ready);
            p.pending.push_back({ready, std::move(pkt)});
          }
        }
      }
      const auto now = Clock::now();
      for (Pair& p : pairs_) {
        while (!p.frozen && !p.pending.empty() && p.pending.front().ready <= now) {
          if (!SendAll(p.up, p.pending.front().bytes)) p.Close();
          else p.pending.pop_front();
        }
      }
    }
  }

  sockaddr_in upstream_{};
  int listener_ = -1;
  unsigned port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  Mode mode_ = Mode::kForward;      // guarded by mu_
  bool freeze_all_ = false;         // guarded by mu_
  milliseconds delay_{0};           // guarded by mu_
  std::string stall_bytes_;         // guarded by mu_
  Clock::time_point stalled_at_{};  // guarded by mu_
  int accepted_ = 0;                // guarded by mu_
  bool stop_ = false;               // guarded by mu_
  std::vector<Pair> pairs_;         // the relay's thread only (and Stop after the join)
};

std::string PercentEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// The test server's URL with hosts ("h:p" or "h1:p1,h2:p2,...") in place
// of its own address.
std::string HostsUrl(const std::string& hosts) {
  const dlock::ClientOptions o = ServerOptions();
  std::string url = "mysql://" + PercentEncode(o.user);
  if (!o.password.empty()) url += ":" + PercentEncode(o.password);
  return url + "@" + hosts + "/" + PercentEncode(o.database);
}

// The test server's URL with the relay's address in place of its own.
std::string RelayUrl(const Relay& r) { return HostsUrl("127.0.0.1:" + std::to_string(r.port())); }

std::shared_ptr<dlock::Client> Open(const std::string& url) {
  std::shared_ptr<dlock::Client> c;
  dlock::Status s = dlock::Client::Open(url, dlock::Config(), &c);
  REQUIRE_MESSAGE(s.ok(), "Client::Open: " << CodeStr(s.code()) << ": " << s.message());
  return c;
}

std::unique_ptr<dlock::Lock> AutoRenewed(const std::shared_ptr<dlock::Client>& c,
                                         const std::string& key, int64_t ttl_ms) {
  dlock::Config cfg = LockConfig("lease", ttl_ms);
  REQUIRE(cfg.Set("auto_renew", "1").ok());
  std::unique_ptr<dlock::Lock> l;
  REQUIRE(dlock::Lock::Open(c, key, cfg, &l).ok());
  DT_REQUIRE_CODE(l->Try(0), Code::kOk);
  return l;
}

std::string Expiry(Admin& admin, const std::string& key) {
  SqlRow row = LeaseRow(admin, key);
  REQUIRE(row.size() == 3);
  REQUIRE(row[1].has_value());
  return *row[1];
}

// Waits until the watchdog renewed key once (its row's expiry moved): its
// own connection is open and its statement prepared.
void AwaitRenewal(Admin& admin, const std::string& key, int64_t ttl_ms) {
  const std::string first = Expiry(admin, key);
  REQUIRE_MESSAGE(PollUntil(Clock::now() + milliseconds(ttl_ms),
                            [&] { return Expiry(admin, key) > first; }, milliseconds(20)),
                  "the watchdog did not renew " << key);
}

// What the event queue said about one key, and when the test saw it.
struct Seen {
  Clock::time_point cut_at{}, lost_at{};
  std::string cut_message, lost_message, other;
};

// Reads events for up to wait_ms; those of key go into seen.
void ReadEvents(dlock::Client& c, const std::string& key, int64_t wait_ms, Seen* seen) {
  dlock::Event e;
  while (c.NextEvent(wait_ms, &e).ok()) {
    wait_ms = 0;
    if (e.key != key) continue;
    if (e.type == dlock::EventType::kRenewRetry && e.message.find("the renewal was cut") != std::string::npos) {
      if (seen->cut_at == Clock::time_point{}) {
        seen->cut_at = Clock::now();
        seen->cut_message = e.message;
      }
    } else if (e.type == dlock::EventType::kLost) {
      if (seen->lost_at == Clock::time_point{}) {
        seen->lost_at = Clock::now();
        seen->lost_message = e.message;
      }
    } else {
      seen->other += e.message + "; ";
    }
  }
}

int64_t MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<milliseconds>(b - a).count();
}

// "within N ms" of the cut's message.
int64_t CutWaitMs(const std::string& message) {
  const size_t at = message.find(" within ");
  if (at == std::string::npos) return -1;
  return std::strtoll(message.c_str() + at + 8, nullptr, 10);
}

// A renewal that hung from t0 on: seen cut a budget later (its statement
// waited about 1 s) and the lease reported lost by t0 + ttl (its last
// renewal was sent before t0), both with their events.
void CheckCutThenLost(Clock::time_point t0, const Seen& seen) {
  INFO("events: cut " << seen.cut_message << "; lost " << seen.lost_message << "; other " << seen.other);
  REQUIRE(seen.cut_at != Clock::time_point{});
  REQUIRE(seen.lost_at != Clock::time_point{});
  MESSAGE("cut " << MsBetween(t0, seen.cut_at) << " ms after the hang (the statement waited "
                 << CutWaitMs(seen.cut_message) << " ms), loss reported after "
                 << MsBetween(t0, seen.lost_at) << " ms");
  // The renewal was due within ttl/3 of t0 and cut a budget later.
  CHECK(MsBetween(t0, seen.cut_at) < 2800);
  CHECK(CutWaitMs(seen.cut_message) >= 990);
  CHECK(CutWaitMs(seen.cut_message) < 1800);
  // The watchdog, free again within a connect bound, says so. With the
  // client's connect_timeout (5 s) it would have been stuck until ~t0 + 6 s.
  CHECK(MsBetween(t0, seen.lost_at) < 5300);
}

// SIGSTOPs a server we started and SIGCONTs it however the test ends: by
// Thaw(), by a failed REQUIRE (the destructor), or by the test process
// dying (a crash, a sanitizer's exit, ctest's kill): a child process waits
// on a pipe whose writing end only this process holds, and thaws the
// server when it closes.
class Frozen {
 public:
  explicit Frozen(pid_t pid) {
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    guard_ = fork();
    REQUIRE(guard_ >= 0);
    if (guard_ == 0) {  // async-signal-safe calls only: the parent has threads
      close(fds[1]);
      char c;
      while (read(fds[0], &c, 1) < 0 && errno == EINTR) {
      }
      kill(pid, SIGCONT);
      _exit(0);
    }
    close(fds[0]);
    pipe_ = fds[1];
    pid_ = pid;
    REQUIRE(kill(pid_, SIGSTOP) == 0);
  }
  ~Frozen() { Thaw(); }
  Frozen(const Frozen&) = delete;
  Frozen& operator=(const Frozen&) = delete;
  void Thaw() {
    if (pid_ > 0) (void)kill(pid_, SIGCONT);
    pid_ = 0;
    if (pipe_ >= 0) close(pipe_);
    pipe_ = -1;
    if (guard_ > 0) (void)waitpid(guard_, nullptr, 0);
    guard_ = 0;
  }

 private:
  pid_t pid_ = 0, guard_ = 0;
  int pipe_ = -1;
};

pid_t ServerPid(const char* dir) {
  std::ifstream f(std::string(dir) + "/mariadbd.pid");
  long pid = 0;
  f >> pid;
  return static_cast<pid_t>(pid);
}

constexpr int64_t kTtlMs = 3000;  // budget 1 s; the watchdog connects within 1 s, reads within 2 s

}  // namespace

TEST_CASE("the watchdog's connection options: ttl/3 to connect, just above the cut to read") {
  dlock::ClientOptions o;  // connect_timeout 5, read_timeout 30
  REQUIRE(o.connect_timeout_s == 5);
  REQUIRE(o.read_timeout_s == 30);
  struct Want {
    int64_t ttl_ms, budget_us;
    int connect_s, read_s;
  };
  for (const Want& w : {Want{3000, 1000000, 1, 2}, Want{1000, 1000000, 1, 2}, Want{10000, 3333333, 3, 5},
                        Want{15000, 5000000, 5, 6}, Want{30000, 10000000, 5, 11},
                        Want{600000, 200000000, 5, 30}}) {
    CAPTURE(w.ttl_ms);
    CHECK(dlock::RenewStatementBudgetUs(w.ttl_ms) == w.budget_us);
    const dlock::ClientOptions r = dlock::RenewerConnOptions(o, w.ttl_ms);
    CHECK(r.connect_timeout_s == w.connect_s);
    CHECK(r.read_timeout_s == w.read_s);
  }
  // Never looser than the client's own.
  o.connect_timeout_s = 1;
  o.read_timeout_s = 3;
  const dlock::ClientOptions r = dlock::RenewerConnOptions(o, 30000);
  CHECK(r.connect_timeout_s == 1);
  CHECK(r.read_timeout_s == 3);
}

TEST_CASE("a node that accepts and never answers, or stalls in the handshake: the watchdog's connect ends within its bound") {
  // Relays that hang at each step of a connect, tried all at once (each
  // takes its bound). Connector/C waits up to connect_timeout for whatever
  // its connect call reads (the greeting, the login's replies, the
  // session's set-up), up to read_timeout for what Conn reads after it (the
  // server's facts). With the client's defaults, 5 s and 30 s.
  const dlock::ClientOptions server = ServerOptions();
  struct Step {
    Relay::Mode mode;
    const char* what;
    int64_t bound_ms;  // ttl 3 s: connect_timeout 1 s, read_timeout 2 s
  };
  const Step steps[] = {{Relay::Mode::kSilent, "no greeting", 1000},
                        {Relay::Mode::kGreetThenHang, "greeting, then nothing", 1000},
                        {Relay::Mode::kHangAfterLogin, "login, then nothing", 1000},
                        {Relay::Mode::kHangAfterSetup, "session set up, then nothing", 2000}};
  std::vector<std::unique_ptr<Relay>> relays;
  std::vector<std::future<std::pair<dlock::Status, int64_t>>> ends;
  for (const Step& step : steps) {
    relays.push_back(std::make_unique<Relay>(server.host, server.port));
    relays.back()->SetMode(step.mode);
    dlock::ClientOptions o = dlock::RenewerConnOptions(server, kTtlMs);
    o.host = "127.0.0.1";
    o.port = relays.back()->port();
    o.socket.clear();
    o.nodes.clear();
    ends.push_back(std::async(std::launch::async, [o] {
      const auto t0 = Clock::now();
      std::unique_ptr<dlock::Conn> c;
      dlock::Status s = dlock::Conn::Connect(o, &c);
      return std::make_pair(s, MsSince(t0));
    }));
  }
  for (size_t i = 0; i < ends.size(); ++i) {
    const std::pair<dlock::Status, int64_t> end = ends[i].get();
    INFO(std::string(steps[i].what) << ": " << end.second << " ms: " << end.first.message());
    MESSAGE(std::string(steps[i].what) << ": " << end.second << " ms");
    CHECK(end.first.code() == Code::kConnect);
    CHECK(end.second >= steps[i].bound_ms - 100);
    CHECK(end.second < steps[i].bound_ms + 900);
  }
}

TEST_CASE("a renewal through a relay that goes silent: cut, the reconnect bounded, the loss reported soon after the expiry") {
  const dlock::ClientOptions server = ServerOptions();
  Relay relay(server.host, server.port);
  auto c = Open(RelayUrl(relay));
  Admin admin;
  const std::string key = UniquePrefix("cutrelay") + "k";
  auto l = AutoRenewed(c, key, kTtlMs);
  AwaitRenewal(admin, key, kTtlMs);

  // The server behind the relay hangs: the renewer's connection goes quiet,
  // and every new one is accepted and never answered.
  const auto t0 = Clock::now();
  relay.SetMode(Relay::Mode::kSilent);
  relay.FreezeAll();
  Seen seen;
  while (seen.lost_at == Clock::time_point{} && MsSince(t0) < 9000) ReadEvents(*c, key, 100, &seen);
  CheckCutThenLost(t0, seen);
  CHECK(seen.lost_message.find("no renewal succeeded") != std::string::npos);
  DT_CHECK_CODE(l->WaitLost(0), Code::kLost);
  CHECK(l->state() == dlock::LockState::kLost);

  // Nothing waits on the relay any more: the release and the close are quick.
  relay.Stop();
  const auto t1 = Clock::now();
  dlock::Status s = l->Release();
  CHECK_MESSAGE(s.code() != Code::kOk, s.message());
  l.reset();
  c.reset();
  CHECK(MsSince(t1) < 2000);
}

TEST_CASE("a frozen server (SIGSTOP): its renewal is cut within its budget, the other server's lease keeps renewing") {
  const char* dir = std::getenv("DLOCK_TEST_DB2_DIR");
  const char* u2 = dlock_test_url2();
  if (std::getenv("DLOCK_URL2") != nullptr || dir == nullptr || u2 == nullptr) {
    MESSAGE("SKIP: the second server is not ours to stop");
    return;
  }
  const pid_t pid = ServerPid(dir);
  REQUIRE(pid > 0);
  REQUIRE(kill(pid, 0) == 0);
  const std::string u1 = dlock_test_url();
  auto c = Open(u1 + ";" + u2);
  REQUIRE(c->server_count() == 2);
  Admin a1(u1.c_str());
  const std::string p = UniquePrefix("cutstop");
  // On the healthy server (0) and the frozen one (1).
  const std::string k1 = KeyOn(*c, p, 0), k2 = KeyOn(*c, p, 1);
  auto l1 = AutoRenewed(c, k1, kTtlMs);
  auto l2 = AutoRenewed(c, k2, kTtlMs);
  {
    Admin a2(u2);
    AwaitRenewal(a2, k2, kTtlMs);
  }

  const auto t0 = Clock::now();
  Frozen frozen(pid);  // thawed on every way out
  std::string last = Expiry(a1, k1);
  int advanced = 0;
  Seen seen;
  while (seen.lost_at == Clock::time_point{} && MsSince(t0) < 9000) {
    ReadEvents(*c, k2, 100, &seen);
    const std::string now = Expiry(a1, k1);
    if (now > last) ++advanced;
    last = now;
  }
  // As with the silent relay: a frozen server accepts TCP and never greets.
  CheckCutThenLost(t0, seen);
  DT_CHECK_CODE(l2->WaitLost(0), Code::kLost);
  // The healthy server's lease renewed every ttl/3 all along.
  CHECK(advanced >= 2);
  CHECK(l1->held());
  DT_CHECK_CODE(l1->WaitLost(0), Code::kTimeout);

  frozen.Thaw();
  DT_CHECK_CODE(l1->Release(), Code::kOk);
  CHECK(l2->Release().code() != Code::kOk);
}

TEST_CASE("a slow server that answers each statement in time: an attempt of several statements is not cut") {
  // ttl 6 s: each statement may take 2 s. Every prepare and execute
  // reaches the server 0.6 s late: the watchdog's first attempt (a batch
  // of two leases, prepare + execute, then, one lease being lost, the check,
  // prepare + execute) takes at least 2.4 s, each of its statements ~1.2 s
  // (0.8 s to spare for a loaded machine).
  constexpr int64_t kTtl = 6000;
  const dlock::ClientOptions server = ServerOptions();
  Relay relay(server.host, server.port);
  auto c = Open(RelayUrl(relay));
  Admin admin;
  const std::string p = UniquePrefix("cutslow");
  auto kept = AutoRenewed(c, p + "kept", kTtl);
  auto taken = AutoRenewed(c, p + "taken", kTtl);
  const std::string first = Expiry(admin, p + "kept");
  relay.SetStatementDelay(milliseconds(600));
  admin.Exec("UPDATE distributed_lock SET owner = 'someone else' WHERE lock_key = " + Lit(p + "taken"));

  const auto t0 = Clock::now();
  Seen seen_taken, seen_kept;
  while (seen_taken.lost_at == Clock::time_point{} && MsSince(t0) < 10000) {
    dlock::Event e;
    if (!c->NextEvent(100, &e).ok()) continue;
    Seen* s = e.key == p + "taken" ? &seen_taken : &seen_kept;
    if (e.type == dlock::EventType::kLost) {
      s->lost_at = Clock::now();
      s->lost_message = e.message;
    } else {
      s->other += e.message + "; ";
    }
  }
  INFO("taken: " << seen_taken.lost_message << " / " << seen_taken.other << "; kept: " << seen_kept.other);
  REQUIRE(seen_taken.lost_at != Clock::time_point{});
  MESSAGE("the taken lease reported lost " << MsBetween(t0, seen_taken.lost_at) << " ms after the delay began");
  CHECK(seen_taken.lost_message.find("another owner took it") != std::string::npos);
  CHECK(seen_taken.other.empty());  // no retry: nothing was cut
  CHECK(seen_kept.other.empty());
  CHECK(seen_kept.lost_at == Clock::time_point{});
  CHECK(kept->held());
  CHECK(Expiry(admin, p + "kept") > first);  // that same attempt renewed it

  relay.SetStatementDelay(milliseconds(0));
  DT_CHECK_CODE(kept->Release(), Code::kOk);
  CHECK(taken->Release().code() != Code::kOk);
  kept.reset();
  taken.reset();
  c.reset();
}

TEST_CASE("a long lease's renewal that stalls is cut at the shortest lease's budget: the short lease keeps its hold") {
  // One watchdog renews a 30 s lease (its own budget 10 s) and a 6 s one
  // (budget 2 s, renewed every 2 s), one batch after the other on one
  // thread. Its connection is opened for the 30 s lease alone (read
  // timeout 11 s), so only the cutter frees it. The 30 s lease's renewal
  // goes out with a tick of the 6 s one (it rides along once within ttl/6
  // of falling due), right after the 6 s lease's batch, and stalls: cut at
  // its own budget, the 6 s lease, renewed last just before, runs out
  // while the watchdog waits (~6 s). Cut at the 6 s lease's budget (2 s),
  // both are renewed on a new connection, ~4 s before the 6 s lease would
  // end (2 s to spare with the loaded machine's reconnect taken off).
  constexpr int64_t kLong = 30000, kShort = 6000;
  const dlock::ClientOptions server = ServerOptions();
  Relay relay(server.host, server.port);
  auto c = Open(RelayUrl(relay));
  Admin admin;
  const std::string p = UniquePrefix("cutmixed");
  const std::string long_key = p + "long", short_key = p + "short";
  uint64_t pool0 = 0;
  REQUIRE(c->Counter("pool_open", &pool0).ok());
  const int accepted0 = relay.accepted();
  auto long_lock = AutoRenewed(c, long_key, kLong);
  // The watchdog connects at once for its only lease: a connection the
  // relay took beyond the pool's is its own.
  REQUIRE_MESSAGE(PollUntil(Clock::now() + milliseconds(5000), [&] {
                    uint64_t pool = 0;
                    return c->Counter("pool_open", &pool).ok() &&
                           relay.accepted() - accepted0 > static_cast<int>(pool - pool0);
                  }, milliseconds(10)),
                  "the watchdog did not connect");
  auto short_lock = AutoRenewed(c, short_key, kShort);
  AwaitRenewal(admin, short_key, kShort);  // on that connection
  const std::string long_before = Expiry(admin, long_key);
  relay.StallNextCarrying(long_key);

  // The 30 s lease's renewal falls due (rides along) 5-7 s after its acquire.
  REQUIRE_MESSAGE(PollUntil(Clock::now() + milliseconds(kLong / 2),
                            [&] { return relay.stalled_at() != Clock::time_point{}; }, milliseconds(20)),
                  "the 30 s lease's renewal did not come");
  const Clock::time_point t0 = relay.stalled_at();
  const std::string short_at_stall = Expiry(admin, short_key);

  // Until both leases were renewed after the stall, or the 6 s one was
  // lost (without the cut at its budget: ~10 s after the stall, when the
  // watchdog is freed and sees it ran out).
  Seen seen_long, seen_short;
  bool renewed = false;
  while (!renewed && seen_short.lost_at == Clock::time_point{} && MsSince(t0) < 14000) {
    dlock::Event e;
    if (c->NextEvent(100, &e).ok()) {
      Seen* s = e.key == long_key ? &seen_long : e.key == short_key ? &seen_short : nullptr;
      if (s == nullptr) continue;
      if (e.type == dlock::EventType::kRenewRetry && e.message.find("the renewal was cut") != std::string::npos &&
          s->cut_at == Clock::time_point{}) {
        s->cut_at = Clock::now();
        s->cut_message = e.message;
      } else if (e.type == dlock::EventType::kLost && s->lost_at == Clock::time_point{}) {
        s->lost_at = Clock::now();
        s->lost_message = e.message;
      } else {
        s->other += e.message + "; ";
      }
      continue;
    }
    renewed = seen_long.cut_at != Clock::time_point{} && Expiry(admin, long_key) > long_before &&
              Expiry(admin, short_key) > short_at_stall;
  }
  INFO("long: cut " << seen_long.cut_message << "; lost " << seen_long.lost_message << "; other "
                    << seen_long.other);
  INFO("short: cut " << seen_short.cut_message << "; lost " << seen_short.lost_message << "; other "
                     << seen_short.other);
  CHECK_MESSAGE(seen_short.lost_at == Clock::time_point{},
                "the 6 s lease was lost " << MsBetween(t0, seen_short.lost_at) << " ms after the stall");
  REQUIRE(seen_long.cut_at != Clock::time_point{});
  MESSAGE("the 30 s lease's renewal cut " << MsBetween(t0, seen_long.cut_at)
                                          << " ms after it stalled (the statement waited "
                                          << CutWaitMs(seen_long.cut_message) << " ms)");
  // The 6 s lease's budget, not the 30 s one's (10 s).
  CHECK(CutWaitMs(seen_long.cut_message) >= 1990);
  CHECK(CutWaitMs(seen_long.cut_message) < 3500);
  CHECK(MsBetween(t0, seen_long.cut_at) < 4000);
  CHECK(renewed);
  CHECK(seen_short.cut_at == Clock::time_point{});  // its own batch was never cut
  CHECK(short_lock->held());
  DT_CHECK_CODE(short_lock->WaitLost(0), Code::kTimeout);
  CHECK(long_lock->held());

  DT_CHECK_CODE(short_lock->Release(), Code::kOk);
  DT_CHECK_CODE(long_lock->Release(), Code::kOk);
  short_lock.reset();
  long_lock.reset();
  c.reset();
}

TEST_CASE("a multi-host URL whose first nodes accept and never answer: a try's connect ends with its wait, a long wait gets the live node") {
  const dlock::ClientOptions server = ServerOptions();
  REQUIRE(server.socket.empty());
  Relay r1(server.host, server.port), r2(server.host, server.port);
  const std::string n1 = "127.0.0.1:" + std::to_string(r1.port());
  const std::string n2 = "127.0.0.1:" + std::to_string(r2.port());
  const std::string live = server.host + ":" + std::to_string(server.port);
  // connect_timeout 2 s: the old loop took 2 s per silent node (>= 4 s for
  // a try of any wait). The client opens while the relays still forward
  // (its first connection goes through r1 to the server); that connection
  // closes once idle, so the try below opens a new one.
  dlock::Config cfg;
  REQUIRE(cfg.Set("connect_timeout", "2").ok());
  REQUIRE(cfg.Set("pool_idle_ms", "20").ok());
  std::shared_ptr<dlock::Client> c;
  dlock::Status s = dlock::Client::Open(HostsUrl(n1 + "," + n2 + "," + live), cfg, &c);
  REQUIRE_MESSAGE(s.ok(), "Client::Open: " << CodeStr(s.code()) << ": " << s.message());
  r1.SetMode(Relay::Mode::kSilent);
  r2.SetMode(Relay::Mode::kSilent);
  REQUIRE(PollUntil(Clock::now() + milliseconds(5000), [&] {
    uint64_t open = 1;
    return c->Counter("pool_open", &open).ok() && open == 0;
  }));
  auto l = OpenLock(c, UniquePrefix("multihost") + "k", "lease", 10000);

  // (a) A 100 ms try: the pool's wait is 1 s (kPoolGrace), so r1 gets 1 s
  // and the others are not tried.
  auto t0 = Clock::now();
  s = l->Try(100);
  int64_t ms = MsSince(t0);
  MESSAGE("try(100) over two silent nodes: " << ms << " ms: " << s.message());
  CHECK(s.code() == Code::kConnect);
  CHECK(ms >= 900);
  CHECK(ms < 2500);
  CHECK(s.message().find("the wait ran out before " + n2 + ", " + live + " were tried") !=
        std::string::npos);
  CHECK(s.message().find("cannot connect to " + n1) != std::string::npos);

  // (b) A 10 s wait: r1 went last (it failed just now), r2 costs its full
  // connect_timeout, then the live server.
  t0 = Clock::now();
  s = l->Try(10000);
  ms = MsSince(t0);
  MESSAGE("try(10000) over two silent nodes: " << ms << " ms: " << s.message());
  DT_CHECK_CODE(s, Code::kOk);
  CHECK(ms >= 1900);
  CHECK(ms < 4000);
  if (s.ok()) DT_CHECK_CODE(l->Release(), Code::kOk);
  l.reset();
  c.reset();
}
