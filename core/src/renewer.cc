#include "renewer.h"

#include <mysql.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>

#include "client_impl.h"
#include "lease_ops.h"

namespace dlock {

namespace {

// Leases are renewed every ttl/3; one that falls due within the next ttl/6
// is renewed early with the rest (see Run).
int64_t DueUs(int64_t ttl_ms) { return ttl_ms * 1000 / 3; }
int64_t SlackUs(int64_t ttl_ms) { return ttl_ms * 1000 / 6; }
// Each statement of a renewal attempt waits a renew interval (at least
// 1 s) for its answer, not the whole read timeout (30 s by default, longer
// than most leases): then it is cut and the renewal retried on a new
// connection, which on a multi-host URL goes to another node first. The
// interval of the shortest lease the watchdog renews, whatever the
// statement's batch: the watchdog is one thread, and a longer lease's
// statement that stalls holds back every shorter lease's renewal (a 60 s
// lease's budget is 20 s, longer than a 5 s lease lives). Per
// statement, not per attempt: an attempt of several statements (a batch of
// more than kMaxRenewBatch leases, or the check after a loss) on a loaded
// server that answers each in time is healthy work, and a cut would also
// mark the node down for 30 s. Not cut at the lease's deadline: an answer
// after it still renews (the lease counts from the send). A cut
// renewal may still run on the server later (it had the statement): it
// matches only a row that our owner still holds, live by its NOW(), so it
// can extend our own lease but never revive a released row (its owner is
// empty) or one another owner took; our deadline is never taken from it
// (a renewed lease's deadline counts from the send whose answer we read;
// see the check in RenewOn).
int64_t AttemptUs(int64_t ttl_ms) { return std::max<int64_t>(ttl_ms * 1000 / 3, 1000000); }

constexpr size_t kMaxBatch = kMaxRenewBatch;

// Statements are prepared per size bucket (powers of two, padded by
// repeating the last lease), so a handful of prepared statements serve any
// number of leases. *log2: the bucket's index in RenewSql.
size_t Bucket(size_t n, size_t* log2) {
  size_t b = 1;
  *log2 = 0;
  while (b < n) {
    b <<= 1;
    ++*log2;
  }
  return b;
}

}  // namespace

int64_t RenewStatementBudgetUs(int64_t ttl_ms) { return AttemptUs(ttl_ms); }

// The cutter watches statements on an open connection only; a connect
// (after a cut or a drop, or ahead of the first tick) is bounded by its
// timeouts alone. With the client's (5 s and 30 s by default) a node that
// accepts TCP and then says nothing (frozen, hung, a relay with nothing
// behind it) held the watchdog for 5 s, and one that stalls after the
// session's set-up for 30 s: longer than a short lease, every lease of the
// client waiting, and on a multi-host URL before the next node was tried.
// Connector/C reads all of its connect (the greeting, the login's replies,
// the session's set-up) under the connect timeout; Conn then reads the
// server's facts under the read timeout (measured in core_cutter). So:
//  - connect_timeout: ttl/3, at least 1 s (the option is whole seconds).
//    A connect made as a renewal falls due (its connection dropped) that
//    meets a hung node gives up 2/3 into the lease, a third of it left
//    for the next node of a multi-host URL (each hung node tried costs as
//    much); one made ahead of the first tick, when that tick falls due.
//  - read_timeout: the cut rounded up to whole seconds, plus 1 s: just
//    above the cut, so that on an open connection the cutter (exact, with
//    its message and the node marked unresponsive) acts first, and a node
//    that stalls after the set-up frees the watchdog a second after a
//    statement's cut would.
// E.g. ttl 3 s: 1 s and 2 s; ttl 30 s (the default): 5 s (the client's,
// below ttl/3) and 11 s; ttl 15 s on Galera: 5 s and 6 s.
// The shortest ttl the watchdog renews when it connects sets them: it is
// the first at risk, and every statement is cut at its budget. A shorter
// lease added later leaves the connection's read timeout looser than the
// cut; the cutter, at the new shortest budget, still acts first.
ClientOptions RenewerConnOptions(const ClientOptions& client, int64_t ttl_ms) {
  ClientOptions o = client;
  const int64_t ttl = std::max<int64_t>(ttl_ms, 1);
  const int64_t connect_s = std::max<int64_t>(ttl / 3 / 1000, 1);
  const int64_t cut_s = (AttemptUs(ttl) + 999999) / 1000000;
  o.connect_timeout_s = static_cast<int>(std::min<int64_t>(client.connect_timeout_s, connect_s));
  o.read_timeout_s = static_cast<int>(std::min<int64_t>(client.read_timeout_s, cut_s + 1));
  return o;
}

Renewer::~Renewer() {
  {
    MutexLock g(mu_);
    stop_ = true;
    cv_.notify_all();
    cut_cv_.notify_all();
  }
  // No Add() can run any more (the client is going away), so thread_ is
  // read without mu_; the thread itself never touches thread_.
  for (std::thread* t : {&thread_, &cutter_}) {
    if (!t->joinable()) continue;
    if (getpid() == client_->pid()) t->join();
    else t->detach();  // forked child: the thread stayed in the parent
  }
}

void Renewer::Cutter() {
  RelockableMutexLock g(mu_);
  while (!stop_) {
    if (inflight_ == nullptr || cut_) {
      cut_cv_.wait(mu_);
      continue;
    }
    if (Clock::now() < cut_at_) {
      cut_cv_.wait_until(mu_, cut_at_);
      continue;
    }
    // Under mu_: the renewer's thread clears inflight_ (under mu_) before it
    // closes the connection. Abort() only shuts the socket down.
    inflight_->Abort();
    cut_ = true;
  }
}

void Renewer::Add(RenewedLease* lock, const std::string& key, const std::string& owner,
                  int64_t ttl_ms, int64_t max_hold_ms, Clock::time_point acquired_at,
                  Clock::time_point deadline) {
  MutexLock g(mu_);
  Entry& e = entries_[lock];
  e = Entry{};
  e.key = key;
  e.owner = owner;
  e.ttl_ms = ttl_ms;
  e.max_hold_ms = max_hold_ms;
  e.acquired_at = acquired_at;
  e.last_sent = deadline - LeaseSpan(ttl_ms);
  e.deadline = deadline;
  preconnect_failed_ = false;  // a new lease: worth another try
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { Run(); });
    cutter_ = std::thread([this] { Cutter(); });
  }
  cv_.notify_all();
}

void Renewer::Remove(RenewedLease* lock) {
  MutexLock g(mu_);
  entries_.erase(lock);
}

void Renewer::Renewed(RenewedLease* lock, Clock::time_point deadline) {
  MutexLock g(mu_);
  auto it = entries_.find(lock);
  if (it == entries_.end()) return;
  it->second.last_sent = deadline - LeaseSpan(it->second.ttl_ms);
  it->second.deadline = deadline;
  it->second.failures = 0;
}

int64_t Renewer::MinTtl() const {
  int64_t ttl = 0;
  for (const auto& kv : entries_)
    if (ttl == 0 || kv.second.ttl_ms < ttl) ttl = kv.second.ttl_ms;
  return ttl;
}

Status Renewer::EnsureConn(int64_t ttl_ms) {
  if (conn_ && !conn_->broken()) return Status::OK();
  conn_.reset();
  std::unique_ptr<Conn> c;
  Status s = Conn::Connect(RenewerConnOptions(client_->options(), ttl_ms), &c);
  if (!s.ok()) return s;
  c->set_counter(client_->pool().sent_counter());
  conn_ = std::move(c);
  conn_used_ = Clock::now();
  return Status::OK();
}

bool Renewer::ArmCut(int64_t cut_ttl_ms) {
  MutexLock g(mu_);
  if (inflight_ == nullptr) {  // the attempt's first statement
    inflight_ = conn_.get();
    cut_ = false;
  } else if (cut_) {
    // Cut as the last statement's answer came: the socket is shut, and the
    // statement that took its whole budget is the one to blame (armed_at_
    // stays its send).
    return false;
  }
  armed_at_ = Clock::now();
  cut_at_ = armed_at_ + std::chrono::microseconds(AttemptUs(cut_ttl_ms));
  cut_cv_.notify_all();
  return true;
}

bool Renewer::DisarmCut() {
  MutexLock g(mu_);
  const bool cut = inflight_ != nullptr && cut_;  // not armed: an older attempt's
  inflight_ = nullptr;
  return cut;
}

Status Renewer::RenewBatch(int64_t ttl_ms, int64_t conn_ttl_ms, const std::vector<Item>& items,
                           Clock::time_point* sent, std::vector<Outcome>* outcomes,
                           std::vector<Clock::time_point>* until) {
  outcomes->assign(items.size(), Outcome::kError);
  until->assign(items.size(), Clock::time_point{});
  Status s = EnsureConn(conn_ttl_ms);
  if (!s.ok()) return s;
  conn_used_ = Clock::now();
  s = RenewOn(ttl_ms, std::min(ttl_ms, conn_ttl_ms), items, sent, outcomes, until);
  const bool cut = DisarmCut();
  if (cut && !s.ok()) {
    conn_->NoteUnresponsive();
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - armed_at_);
    s = Status(Code::kConnect,
               "no answer from " + conn_->where() + " within " + std::to_string(waited.count()) +
                   " ms (a stalled or hung node?): the renewal was cut, retried on a new connection (" +
                   s.message() + ")",
               s.server_errno());
  }
  // Cut just after its answer came: the answer counts, but the socket is
  // shut; the next tick connects again instead of failing on it.
  if (cut) conn_.reset();
  return s;
}

Status Renewer::RenewOn(int64_t ttl_ms, int64_t cut_ttl_ms, const std::vector<Item>& items,
                        Clock::time_point* sent, std::vector<Outcome>* outcomes,
                        std::vector<Clock::time_point>* until) {
  // Cut as the previous statement's answer came: what it did stands (its
  // chunks renewed), the rest is not sent on the shut socket.
  const auto cut_before = [] {
    return Status(Code::kConnect,
                  "the answer to the previous statement came as it was cut; the rest of the "
                  "renewal was not sent");
  };
  Status s;
  const RenewSql& sql = client_->sql().renew;
  Counters& counters = client_->counters();
  for (size_t start = 0; start < items.size(); start += kMaxBatch) {
    const size_t n = std::min(kMaxBatch, items.size() - start);
    size_t log2 = 0;
    const size_t b = Bucket(n, &log2);
    std::vector<Param> keys_owners;
    keys_owners.reserve(2 * b);
    for (size_t i = 0; i < b; ++i) keys_owners.push_back(Param::Bytes(items[start + std::min(i, n - 1)].key));
    for (size_t i = 0; i < b; ++i) keys_owners.push_back(Param::Bytes(items[start + std::min(i, n - 1)].owner));

    std::vector<Param> params;
    params.reserve(1 + 2 * b);
    params.push_back(Param::Int(ttl_ms * 1000));
    params.insert(params.end(), keys_owners.begin(), keys_owners.end());
    ExecResult r;
    // The first chunk's send time serves them all: later chunks' leases
    // then end by our clock no later than by the server's.
    if (!ArmCut(cut_ttl_ms)) return cut_before();
    if (start == 0) *sent = Clock::now();
    s = conn_->Exec(sql.batch[log2], params, &r);
    counters.renew_statements.fetch_add(1);
    if (!s.ok()) return s;
    counters.renewals.fetch_add(r.affected);
    const Clock::time_point renewed_until = *sent + LeaseSpan(ttl_ms);
    if (r.affected == n) {
      for (size_t i = 0; i < n; ++i) {
        (*outcomes)[start + i] = Outcome::kRenewed;
        (*until)[start + i] = renewed_until;
      }
      continue;
    }
    // Some were not renewed: find out exactly which (a second statement only
    // when a lease was lost). A row that is ours with time left is held, but
    // not necessarily by this statement's extension: another statement of
    // ours may have set its expiry (a renewal the cutter gave up on, run by
    // the server later with its own older NOW()). So its deadline is what
    // the server says is left, counted from this check's send (and never
    // past what this batch's send gives), the 0.1% margin taken off.
    if (!ArmCut(cut_ttl_ms)) return cut_before();
    const Clock::time_point check_sent = Clock::now();
    s = conn_->Exec(sql.check[log2], keys_owners, &r);
    counters.renew_statements.fetch_add(1);
    if (!s.ok()) return s;
    std::unordered_map<std::string, int64_t> left;  // owner -> remaining us
    for (const Row& row : r.rows) {
      if (row[1] && row[2]) left[*row[1]] = std::strtoll(row[2]->c_str(), nullptr, 10);
    }
    for (size_t i = 0; i < n; ++i) {
      auto it = left.find(items[start + i].owner);
      if (it != left.end() && it->second > 0) {
        (*outcomes)[start + i] = Outcome::kRenewed;
        (*until)[start + i] = std::min(
            renewed_until, check_sent + std::chrono::microseconds(it->second - it->second / 1000));
      } else {
        (*outcomes)[start + i] = Outcome::kLost;
      }
    }
  }
  return Status::OK();
}

void Renewer::Scan(Clock::time_point now, Batches* batches, Expired* expired,
                   Clock::time_point* next) {
  *next = now + std::chrono::hours(1);
  bool fire = false;
  for (auto& kv : entries_) {
    Entry& e = kv.second;
    if (now >= e.deadline) {
      expired->emplace_back(kv.first, e.tripped
                                          ? "max hold time reached: the lease was not renewed and ran out"
                                          : "no renewal succeeded before the lease ran out");
      continue;
    }
    if (!e.tripped && e.max_hold_ms > 0 &&
        now - e.acquired_at >= std::chrono::milliseconds(e.max_hold_ms)) {
      e.tripped = true;
      client_->counters().max_hold_trips.fetch_add(1);
      client_->Raise(EventType::kMaxHold, Severity::kCritical, e.key, e.owner, kv.first->Token(),
                     "max hold time of " + std::to_string(e.max_hold_ms) +
                         " ms reached: renewal stopped, the lease will expire (is the job stuck?)");
    }
    if (e.tripped) {
      *next = std::min(*next, e.deadline);
      continue;
    }
    const auto due = std::max(e.last_sent + std::chrono::microseconds(DueUs(e.ttl_ms)), e.retry_at);
    if (due <= now) fire = true;
    *next = std::min({*next, due, e.deadline});
  }
  // A tick fires when some lease is due, and takes along every lease that
  // would fall due within the next ttl/6: leases acquired at different
  // times merge into one statement after a round or two.
  if (!fire) return;
  for (auto& kv : entries_) {
    const Entry& e = kv.second;
    if (e.tripped || now >= e.deadline) continue;
    const auto due = std::max(e.last_sent + std::chrono::microseconds(DueUs(e.ttl_ms)), e.retry_at);
    if (due - std::chrono::microseconds(SlackUs(e.ttl_ms)) <= now)
      (*batches)[e.ttl_ms].push_back(Item{kv.first, e.key, e.owner});
  }
}

void Renewer::Lost(RenewedLease* lock, const std::string& why) {
  Entry& e = entries_[lock];
  // Counted and reported once: by whoever turned the hold LOST (a renew
  // or release that found it lost may have been first).
  if (lock->OnLost(e.owner, why)) {
    client_->counters().lost.fetch_add(1);
    client_->Raise(EventType::kLost, Severity::kCritical, e.key, e.owner, lock->Token(), why);
  }
  entries_.erase(lock);
}

void Renewer::Apply(const std::vector<Item>& items, const Status& s, Clock::time_point sent,
                    const std::vector<Outcome>& outcomes, const std::vector<Clock::time_point>& until) {
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    auto e = entries_.find(it.lock);
    if (e == entries_.end() || e->second.owner != it.owner) continue;  // released meanwhile
    Entry& en = e->second;
    if (outcomes[i] == Outcome::kRenewed) {
      en.last_sent = sent;
      en.deadline = until[i];
      en.failures = 0;
      en.retry_at = {};
      it.lock->OnRenewed(it.owner, en.deadline);
    } else if (outcomes[i] == Outcome::kLost) {
      Lost(it.lock, "the lease had expired by the database clock or another owner took it");
    } else {
      // Transient: retry soon, within what is left of the lease.
      int ms = std::min(1000, 50 << std::min(en.failures, 4));
      en.retry_at = Clock::now() + std::chrono::milliseconds(ms);
      if (en.failures++ == 0) {
        client_->Raise(EventType::kRenewRetry, Severity::kWarning, en.key, en.owner,
                       it.lock->Token(),
                       "renewal failed, retrying until the lease runs out: " + s.message());
      }
    }
  }
}

void Renewer::Run() {
  mysql_thread_init();
  RelockableMutexLock g(mu_);
  while (!stop_) {
    Batches batches;
    Expired expired;
    Clock::time_point next;
    Scan(Clock::now(), &batches, &expired, &next);
    for (auto& x : expired) Lost(x.first, x.second);
    if (batches.empty()) {
      if (!expired.empty()) continue;
      // A lease to renew and no connection yet: connect now, not when the
      // first renewal falls due. A connect is several round trips (TCP,
      // login, session setup, server facts); paid at the tick, it came out
      // of the ttl/3 the renewal has, and on a loaded machine each round
      // trip can wait for a CPU. One try: if it fails, the tick retries.
      if (!entries_.empty() && !conn_ && !preconnect_failed_) {
        const int64_t ttl_ms = MinTtl();
        g.Unlock();
        const Status s = EnsureConn(ttl_ms);
        g.Lock();
        preconnect_failed_ = !s.ok();
        continue;
      }
      // No lease left to renew: the connection closes after pool_idle_ms,
      // as the pool's idle ones do.
      const int64_t idle_ms = client_->options().pool_idle_ms;
      if (conn_ && entries_.empty() && idle_ms > 0) {
        const auto close_at = conn_used_ + std::chrono::milliseconds(idle_ms);
        if (Clock::now() >= close_at) {
          g.Unlock();
          conn_.reset();
          g.Lock();
          continue;
        }
        next = std::min(next, close_at);
      }
      cv_.wait_until(mu_, next);
      continue;
    }
    client_->counters().renew_ticks.fetch_add(1);
    for (auto& kv : batches) {
      std::vector<Outcome> outcomes;
      std::vector<Clock::time_point> until;
      Clock::time_point sent = Clock::now();
      const int64_t conn_ttl_ms = entries_.empty() ? kv.first : MinTtl();
      g.Unlock();  // no lock held during I/O: Remove() and Add() stay quick
      Status s = RenewBatch(kv.first, conn_ttl_ms, kv.second, &sent, &outcomes, &until);
      g.Lock();
      Apply(kv.second, s, sent, outcomes, until);
    }
  }
  g.Unlock();
  conn_.reset();
  mysql_thread_end();
}

}  // namespace dlock
