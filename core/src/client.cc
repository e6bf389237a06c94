// The client behind dlock::Client: opening (URL, options, the first
// connection and the schema), the pool, owner ids and the retry deadline.
// The lock schemes are in lease_scheme.cc and row_scheme.cc.
#include <mysqld_error.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <system_error>

#include "client_impl.h"
#include "lease_ops.h"

namespace dlock {

namespace {

// A zero wait still needs a connection; this is how long it may wait for one.
constexpr auto kPoolGrace = std::chrono::milliseconds(1000);

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown-host";
  std::string h(buf);
  if (h.size() > 64) h.resize(64);
  return h;
}

}  // namespace

ClientImpl::ClientImpl(ClientOptions opts, LockOptions lock_defaults,
                       std::shared_ptr<Events> events)
    : opts_(std::move(opts)),
      lock_defaults_(lock_defaults),
      pool_(opts_),
      pid_(getpid()),
      host_(HostName()),
      owner_prefix_(host_ + ":" + std::to_string(pid_) + ":"),
      events_(events ? std::move(events)
                     : std::make_shared<Events>(static_cast<size_t>(opts_.events))),
      renewer_(this) {}

Status ClientImpl::Open(ClientOptions opts, const Config& cfg, std::unique_ptr<ClientImpl>* out,
                        std::shared_ptr<Events> events) {
  Status s;
  LockOptions lock_defaults;
  for (const auto& kv : cfg.values())
    if (!IsClientKey(kv.first) && !(s = ApplyLockOption(kv.first, kv.second, &lock_defaults)).ok())
      return s;
  std::unique_ptr<ClientImpl> c(new ClientImpl(std::move(opts), lock_defaults, std::move(events)));
  {
    PooledConn conn;
    // The open's connect keeps connect_timeout per node: a multi-host URL
    // whose first nodes are down still opens.
    s = c->pool_.Get(Clock::now() + std::chrono::seconds(c->opts_.connect_timeout_s),
                     Clock::time_point::max(), &conn);
    if (!s.ok()) return s;
    c->server_ = conn->server();
    // The statements are built once the server said what it is.
    c->sql_ = c->server_.dialect->build(c->opts_, c->server_.mariadb);
    s = c->InitSchema(*conn);
    if (!s.ok()) return s;
  }
  if (c->server_.galera && c->opts_.read_timeout_s < kGaleraMinReadTimeoutS)
    c->Raise(EventType::kTopology, Severity::kWarning, "", "", 0,
             "read_timeout is " + std::to_string(c->opts_.read_timeout_s) +
                 " s on Galera: a node's death stalls every write for ~6 s, and a renewal cut off "
                 "by the timeout has an unknown outcome; use read_timeout=" +
                 std::to_string(kGaleraMinReadTimeoutS) + " or more");
  c->CheckTtlForTopology(c->lock_defaults_, "");
  *out = std::move(c);
  return Status::OK();
}

void ClientImpl::CheckTtlForTopology(const LockOptions& lock, const std::string& key) {
  if (!server_.galera || lock.mode != LockMode::kLease || lock.ttl_ms >= kGaleraMinTtlMs) return;
  if (warned_short_ttl_.exchange(true)) return;
  Raise(EventType::kTopology, Severity::kWarning, key, "", 0,
        "ttl " + std::to_string(lock.ttl_ms) +
            " ms on Galera: a node's death stalls every write for ~6 s, so a lease renewed every "
            "ttl/3 survives it only with a ttl of about 10 s or more; use " +
            std::to_string(kGaleraMinTtlMs / 1000) + " s or more (warned once per client)");
}

ClientImpl::~ClientImpl() {
  {
    MutexLock g(janitor_mu_);
    janitor_stop_ = true;
    janitor_cv_.notify_all();
  }
  if (janitor_.joinable()) {
    if (getpid() == pid_) janitor_.join();
    else janitor_.detach();  // forked child: the thread is not ours
  }
  std::thread unclaimer;
  {
    MutexLock g(unclaim_mu_);
    unclaim_stop_ = true;
    unclaim_cv_.notify_all();
    unclaimer = std::move(unclaimer_);
  }
  if (unclaimer.joinable()) {
    if (getpid() == pid_) unclaimer.join();
    else unclaimer.detach();  // forked child: the thread is not ours
  }
}

void ClientImpl::UnclaimSoon(const std::string& key, const std::string& owner) {
  {
    MutexLock g(unclaim_mu_);
    if (!unclaim_stop_) {  // always so: a client closes after its locks
      try {
        if (!unclaimer_.joinable()) unclaimer_ = std::thread([this] { UnclaimLoop(); });
        unclaims_.push_back(Unclaim{key, owner, Clock::now()});
        unclaim_cv_.notify_all();
        return;
      } catch (const std::system_error&) {
        // No thread (EAGAIN): the winner deletes its claim itself, below.
      }
    }
  }
  (void)LeaseUnclaim(*this, key, owner, nullptr);
}

void ClientImpl::UnclaimLoop() {
  mysql_thread_init();
  RelockableMutexLock g(unclaim_mu_);
  for (;;) {
    while (!unclaim_stop_ && unclaims_.empty()) unclaim_cv_.wait(unclaim_mu_);
    // A close waits for what is queued, so that a closed client leaves no
    // live claim behind.
    if (unclaims_.empty()) break;
    std::vector<Unclaim> batch;
    batch.swap(unclaims_);
    const bool closing = unclaim_stop_;
    g.Unlock();
    for (const Unclaim& u : batch) {
      // Older than a claim's window: dead already, it keeps nothing.
      if (Clock::now() - u.queued > std::chrono::microseconds(kClaimWindowUs)) continue;
      Status s = LeaseUnclaim(*this, u.key, u.owner, nullptr);
      // Closing, a server that does not answer holds the close up once at
      // most: the rest die by their windows.
      if (!s.ok() && closing) break;
    }
    g.Lock();
  }
  g.Unlock();
  mysql_thread_end();
}

std::string ClientImpl::NewOwner() {
  unsigned char b[16];
  ssize_t n = getrandom(b, sizeof b, 0);
  if (n != static_cast<ssize_t>(sizeof b)) {  // never expected; fall back, still unique enough
    std::random_device rd;
    for (auto& x : b) x = static_cast<unsigned char>(rd());
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // UUID v4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  // 8-4-4-4-12 hex digits, lower case; by hand (snprintf was the costliest
  // part of an uncontended row lock's own work).
  static const char kHex[] = "0123456789abcdef";
  char uuid[36];
  for (int i = 0, o = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uuid[o++] = '-';
    uuid[o++] = kHex[b[i] >> 4];
    uuid[o++] = kHex[b[i] & 0x0f];
  }
  // host:pid: was made once (owner_prefix_): an acquisition runs only in
  // the process that opened the client (a forked child's calls are refused
  // before they get here), so pid_ is getpid() here.
  std::string owner;
  owner.reserve(owner_prefix_.size() + sizeof uuid);
  owner.append(owner_prefix_).append(uuid, sizeof uuid);
  return owner;
}

Status ClientImpl::GetConn(Clock::time_point deadline, PooledConn* out,
                           const std::function<bool()>& stop, ConnectBy by) {
  return GetConn(deadline, out, stop, by, Clock::now());
}

Status ClientImpl::GetConn(Clock::time_point deadline, PooledConn* out,
                           const std::function<bool()>& stop, ConnectBy by,
                           Clock::time_point now) {
  auto floor = now + kPoolGrace;
  if (deadline < floor) deadline = floor;
  return pool_.Get(deadline, by == ConnectBy::kWait ? deadline : Clock::time_point::max(), out,
                   stop);
}

Clock::time_point ClientImpl::RetryUntil(Clock::time_point deadline) const {
  return std::max(deadline, Clock::now() + std::chrono::seconds(opts_.connect_timeout_s));
}

Status PoolConns::Fresh(SqlConn** out) {
  held_.Reset();
  Status s = client_->GetConn(deadline_, &held_, stop_, by_);
  if (s.ok()) *out = &*held_;
  return s;
}

bool ClientImpl::RowKnown(const std::string& name) {
  MutexLock g(rows_mu_);
  return known_rows_.count(name) > 0;
}

void ClientImpl::NoteRow(const std::string& name) {
  MutexLock g(rows_mu_);
  if (known_rows_.size() > 100000) known_rows_.clear();  // bound the memory
  known_rows_.insert(name);
}

}  // namespace dlock
