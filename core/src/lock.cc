#include <errmsg.h>
#include <mysqld_error.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <cstring>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "client_impl.h"
#include "dlock/core.hpp"
#include "lock_impl.h"
#include "txn_enders.h"

namespace dlock {

namespace {

// Back-off between polls of a busy lease: starts small so a short hold is
// noticed soon, grows so a long one costs the database little, and never
// sleeps past the moment the database said the lease ends.
constexpr int64_t kPollMinUs = 2000;
constexpr int64_t kPollMaxUs = 200000;
// Waits on our own condition variables are sliced so Cancel() and expiry by
// our clock are noticed without anyone notifying.
constexpr auto kSlice = std::chrono::milliseconds(50);

int64_t JitterUs(int64_t us) {
  thread_local std::minstd_rand rng(std::random_device{}());
  std::uniform_int_distribution<int64_t> d(us * 3 / 4, us + us / 4);
  return d(rng);
}

// FNV-1a: stable across platforms and languages, so every binding maps a
// key onto the same shard.
uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string DbKey(const LockOptions& o, const std::string& key) {
  if (o.shards <= 0) return key;
  return o.shard_group + ":" + std::to_string(Fnv1a(key) % static_cast<uint64_t>(o.shards) + 1);
}

std::string WakeName(const std::string& table, const std::string& db_key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Fnv1a(db_key)));
  return "dlock:" + table + ":" + hex;
}

Status CancelledStatus(const std::string& name) {
  return Status(Code::kCancelled, "waiting for lock " + name + " was cancelled");
}

}  // namespace

LockImpl::LockImpl(std::shared_ptr<Client> client, std::string key, LockOptions opts,
                   std::string identity)
    : client_(std::move(client)),
      c_(client_->impl()),
      key_(std::move(key)),
      db_key_(DbKey(opts, key_)),
      wake_name_(WakeName(c_->options().table, db_key_)),
      opts_(opts),
      pid_(getpid()),
      identity_(std::move(identity)) {}

LockImpl::~LockImpl() {
  if (getpid() != pid_) {
    // Forked child: never touch the parent's lock or its connections.
    row_conn_.Abandon();
    own_conn_.Abandon();
    return;
  }
  // Every lock object sharing this lock has closed (Close: no call runs).
  if (!identity_.empty()) c_->ForgetLock(identity_, this);
  c_->renewer().Remove(this);
  std::lock_guard<std::mutex> op(op_mu_);
  DropHold();
  DropWakeName();
}

void LockImpl::DropHold() {
  bool held;
  {
    MutexLock g(st_mu_);
    held = !acquiring_ &&
           (state_ == LockState::kHeld || (state_ == LockState::kLost && !released_));
  }
  if (!held) return;
  c_->renewer().Remove(this);
  if (opts_.mode == LockMode::kRow) {
    (void)RowEnd("ROLLBACK");  // unfinished business is not committed
  } else {
    if (txn_open_) (void)CommitOrRollbackTxn("ROLLBACK");
    Status ignored;
    bool freed;
    (void)LeaseReleaseDb(&ignored, &freed);
  }
  {
    MutexLock g(st_mu_);
    if (state_ == LockState::kHeld) state_ = LockState::kIdle;
    count_ = 0;
    released_ = true;
    row_watch_ = nullptr;
    cv_.notify_all();
  }
  c_->waiters().Notify(db_key_);
}

void LockImpl::Close(LockCaller& me) {
  // Close may come while other threads are inside calls through this object
  // (a binding's finalizer, a shutdown path): refuse new calls, cancel the
  // waiting ones and wait until every call has left.
  {
    MutexLock g(me.mu);
    me.closing = true;
  }
  for (;;) {
    Cancel(me);
    MutexLock g(me.mu);
    if (me.calls == 0) break;
    me.cv.wait_for(me.mu, kSlice);
  }
  const int n = me.holds.exchange(0);
  if (n > 0) ReleaseShares(me.hold_gen.load(), n);
}

uint64_t LockImpl::HoldGen() const {
  MutexLock g(st_mu_);
  return gen_;
}

void LockImpl::ReleaseShares(uint64_t gen, int n) {
  std::lock_guard<std::mutex> op(op_mu_);
  {
    MutexLock g(st_mu_);
    if (gen != gen_ || acquiring_) return;  // that hold has ended already
    if (state_ == LockState::kHeld && count_ > n) {
      count_ -= n;  // other objects (or this thread through them) still hold it
      return;
    }
  }
  DropHold();
}

std::string LockImpl::Name() const {
  std::string n = "'" + QuoteKey(key_) + "'";
  if (db_key_ != key_) n += " (shard '" + QuoteKey(db_key_) + "')";
  return n;
}

Status LockImpl::CheckPid() const {
  if (getpid() != pid_)
    return Status(Code::kForked, "lock " + Name() +
                                     " was created in another process (fork): open a new client "
                                     "and lock in this process");
  return Status::OK();
}

class LockImpl::CallScope {
 public:
  CallScope(LockImpl* l, LockCaller& me) : me_(me) {
    MutexLock g(me_.mu);
    if (me_.closing) {
      refused_ = Status(Code::kCancelled, "lock " + l->Name() + " is being closed");
    } else {
      ++me_.calls;
    }
  }
  ~CallScope() {
    if (!refused_.ok()) return;
    MutexLock g(me_.mu);
    if (--me_.calls == 0) me_.cv.notify_all();
  }
  const Status& refused() const { return refused_; }

 private:
  LockCaller& me_;
  Status refused_;
};

class LockImpl::RowUse {
 public:
  explicit RowUse(LockImpl* l) : l_(l) {
    MutexLock g(l_->st_mu_);
    l_->row_busy_ = true;
  }
  ~RowUse() {
    MutexLock g(l_->st_mu_);
    l_->row_busy_ = false;
    l_->row_watch_ = l_->row_conn_ && l_->state_ == LockState::kHeld ? &*l_->row_conn_ : nullptr;
  }

 private:
  LockImpl* l_;
};

Status LockImpl::RefuseWhileAcquiringLocked(const char* what) const {
  if (!acquiring_) return Status::OK();
  if (state_ == LockState::kHeld || (state_ == LockState::kLost && !released_))
    return Status::Lost("lock " + Name() + " was lost: " + LostWhyLocked() +
                        "; another thread is acquiring it again, and frees what the lost hold "
                        "left (no " + what + " needed)");
  return Status::StateError("lock " + Name() + " is not held: another thread is acquiring it (" +
                            what + " refused)");
}

bool LockImpl::EnterServerWait(Conn& conn, CancelToken cancel_seen) {
  MutexLock g(wait_mu_);
  if (Cancelled(cancel_seen)) return false;
  wait_conn_ = &conn;
  wait_caller_ = cancel_seen.seq;
  return true;
}

void LockImpl::LeaveServerWait() {
  MutexLock g(wait_mu_);
  wait_conn_ = nullptr;
  wait_caller_ = nullptr;
}

void LockImpl::WatchRowLocked() const {
  if (opts_.mode != LockMode::kRow || state_ != LockState::kHeld || row_busy_ ||
      row_watch_ == nullptr || !row_watch_->LooksClosed())
    return;
  row_watch_ = nullptr;
  state_ = LockState::kLost;
  lost_why_ = "the server closed the lock's connection (KILL, wait_timeout or a restart): it "
              "rolled back the transaction and released the row lock";
  c_->counters().lost.fetch_add(1);
  c_->Raise(EventType::kLost, Severity::kCritical, key_, owner_, fence_,
            "row lock lost: " + lost_why_);
  cv_.notify_all();
}

bool LockImpl::IsHolderLocked() const {
  return opts_.holder == Holder::kLock || holder_ == HolderId::Current();
}

LockState LockImpl::StateLocked() const {
  WatchRowLocked();
  if (state_ == LockState::kHeld && opts_.mode == LockMode::kLease && Clock::now() >= deadline_)
    return LockState::kLost;
  return state_;
}

std::string LockImpl::LostWhyLocked() const {
  if (state_ == LockState::kHeld) return "its lease ran out before it was renewed";
  return lost_why_;
}

void LockImpl::SetLostLocked(std::string why) {
  if (state_ == LockState::kHeld && Clock::now() >= deadline_ && opts_.mode == LockMode::kLease)
    why = "its lease ran out before it was renewed";
  state_ = LockState::kLost;
  lost_why_ = std::move(why);
  cv_.notify_all();
}

LockState LockImpl::CurrentState() const {
  MutexLock g(st_mu_);
  return StateLocked();
}

std::string LockImpl::Owner() const {
  MutexLock g(st_mu_);
  return owner_;
}

const char* LockImpl::OwnerCstr() const {
  MutexLock g(st_mu_);
  return owner_.c_str();
}

size_t LockImpl::CopyOwner(char* buf, size_t cap) const {
  MutexLock g(st_mu_);
  if (buf != nullptr && cap > 0) {
    size_t n = std::min(owner_.size(), cap - 1);
    std::memcpy(buf, owner_.data(), n);
    buf[n] = '\0';
  }
  return owner_.size();
}

uint64_t LockImpl::Token() const {
  MutexLock g(st_mu_);
  return fence_;
}

int64_t LockImpl::RemainingMs() const {
  if (opts_.mode == LockMode::kRow) return -1;
  MutexLock g(st_mu_);
  if (state_ != LockState::kHeld) return 0;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
  return left > 0 ? left : 0;
}

int LockImpl::HoldCount() const {
  MutexLock g(st_mu_);
  return StateLocked() == LockState::kHeld ? count_ : 0;
}

int LockImpl::HoldCountOfCaller() const {
  MutexLock g(st_mu_);
  return StateLocked() == LockState::kHeld && IsHolderLocked() ? count_ : 0;
}

uint64_t LockImpl::CancelMark(const LockCaller& me) const { return me.cancel_seq.load(); }

void LockImpl::OnRenewed(const std::string& owner, Clock::time_point deadline) {
  MutexLock g(st_mu_);
  if (state_ == LockState::kHeld && owner_ == owner) deadline_ = deadline;
}

void LockImpl::OnLost(const std::string& owner, const std::string& why) {
  MutexLock g(st_mu_);
  if (state_ == LockState::kHeld && owner_ == owner) SetLostLocked(why);
}

void LockImpl::Cancel(LockCaller& me) {
  me.cancel_seq.fetch_add(1);
  {
    MutexLock g(st_mu_);
    cv_.notify_all();
  }
  c_->waiters().Notify(db_key_);
  // A statement blocked on the server (GET_LOCK, a row-lock slice) is ended
  // by shutting its socket: immediate even when the server does not answer.
  // Under wait_mu_, so the waiter cannot have moved on to another statement
  // or given the connection back; and a waiter that had not started its
  // statement yet sees the cancel when it enters (EnterServerWait).
  // Only this object's own wait: another object sharing the lock may be
  // the one acquiring.
  MutexLock g(wait_mu_);
  if (wait_conn_ != nullptr && wait_caller_ == &me.cancel_seq) wait_conn_->Abort();
}

// ---- Try -----------------------------------------------------------------

Status LockImpl::Try(LockCaller& me, int64_t wait_ms, const uint64_t* cancel_mark) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  if (wait_ms < 0 || wait_ms > kMaxWaitMs)
    return Status::Invalid("wait_ms must be 0.." + std::to_string(kMaxWaitMs) + ", got " +
                           std::to_string(wait_ms));
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(wait_ms);
  // Cancels after the caller's mark count, even one that came before this
  // call began (bindings take the mark before they arm their cancel).
  const CancelToken cancel_seen{&me.cancel_seq, cancel_mark ? *cancel_mark : me.cancel_seq.load()};
  Counters& k = c_->counters();
  {
    MutexLock g(st_mu_);
    for (;;) {
      if (Cancelled(cancel_seen)) return CancelledStatus(Name());
      LockState st = StateLocked();
      if (st == LockState::kHeld) {
        if (IsHolderLocked()) {
          if (!opts_.reentrant)
            return Status::StateError("lock " + Name() + " is already held by this holder (reentrant=0)");
          ++count_;
          k.reentries.fetch_add(1);
          return Status::OK();
        }
      } else if (!acquiring_) {
        break;
      }
      // Another thread holds it (or is acquiring it) through this object.
      auto now = Clock::now();
      if (now >= deadline) {
        k.busy.fetch_add(1);
        return Status::Busy("lock " + Name() + " is held by another thread through this lock object");
      }
      cv_.wait_until(st_mu_, std::min(deadline, now + kSlice));
    }
    acquiring_ = true;
  }
  {
    // Wait for an operation already running on the lock's connections (a
    // release, a renew); from now on every other call refuses to touch them
    // (RefuseWhileAcquiringLocked) until this acquisition is over.
    std::lock_guard<std::mutex> op(op_mu_);
    DropLostHold();
  }

  Status s;
  uint64_t fence = 0;
  std::string owner;
  Clock::time_point lease_deadline = Clock::time_point::max();
  if (opts_.mode == LockMode::kRow) {
    s = RowAcquire(deadline, cancel_seen, &fence);
    owner = c_->NewOwner();
  } else {
    s = LeaseAcquire(deadline, cancel_seen, &fence, &owner, &lease_deadline);
  }
  if (Cancelled(cancel_seen)) {
    // Cancelled, whatever else happened: a lock won in the race with the
    // cancel is given back at once, so no binding has to undo it.
    if (s.ok()) UndoAcquisition(owner);
    s = CancelledStatus(Name());
  }
  const auto now = Clock::now();
  k.wait_ms.fetch_add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count()));
  {
    MutexLock g(st_mu_);
    acquiring_ = false;
    if (s.ok()) {
      state_ = LockState::kHeld;
      owner_ = owner;
      fence_ = fence;
      deadline_ = lease_deadline;
      acquired_at_ = opts_.mode == LockMode::kLease
                         ? lease_deadline - std::chrono::milliseconds(opts_.ttl_ms)
                         : now;
      holder_ = HolderId::Current();
      count_ = 1;
      ++gen_;
      released_ = false;
      lost_why_.clear();
      row_watch_ = row_conn_ ? &*row_conn_ : nullptr;
    } else if (state_ == LockState::kLost) {
      state_ = LockState::kIdle;  // the old loss was reported; this is a new attempt
    }
    cv_.notify_all();
  }
  if (s.ok() && opts_.transaction && opts_.mode == LockMode::kLease) {
    // Acquire + begin as one step: the caller never holds a lease whose
    // transaction failed to open.
    Status b = Begin(me);
    if (!b.ok()) {
      (void)Release(me);
      return b;
    }
  }
  if (s.ok()) {
    k.acquisitions.fetch_add(1);
    if (opts_.mode == LockMode::kLease && opts_.auto_renew)
      c_->renewer().Add(this, db_key_, owner, opts_.ttl_ms, opts_.max_hold_ms,
                        lease_deadline - std::chrono::milliseconds(opts_.ttl_ms), lease_deadline);
  } else if (s.code() == Code::kBusy) {
    k.busy.fetch_add(1);
  }
  return s;
}

void LockImpl::DropLostHold() {
  std::string owner;
  {
    MutexLock g(st_mu_);
    // HELD here means a lease that ran out by our clock (Try only acquires
    // when the state is not HELD by the state machine's word).
    if (!(state_ == LockState::kHeld || (state_ == LockState::kLost && !released_))) return;
    owner = owner_;
  }
  c_->renewer().Remove(this);
  if (opts_.mode == LockMode::kRow) {
    RowUse use(this);
    if (row_conn_) {
      if (!row_conn_->broken()) (void)row_conn_->Query("ROLLBACK");
      row_conn_.Reset();
    }
  } else {
    if (txn_open_) (void)CommitOrRollbackTxn("ROLLBACK");
    // Frees the row if it is still ours by the database clock; leaves it
    // alone otherwise. Quietly: the loss was (or will be) reported already.
    bool released = false, ours = false;
    (void)c_->LeaseRelease(db_key_, owner, own_conn_ ? &*own_conn_ : nullptr, &released, &ours);
    DropWakeName();
  }
  MutexLock g(st_mu_);
  if (state_ == LockState::kHeld) SetLostLocked("its lease ran out before it was renewed");
  released_ = true;
  row_watch_ = nullptr;
}

void LockImpl::UndoAcquisition(const std::string& owner) {
  if (opts_.mode == LockMode::kRow) {
    if (row_conn_) {
      if (!row_conn_->broken()) (void)row_conn_->Query("ROLLBACK");
      row_conn_.Reset();
    }
  } else {
    bool released = false, ours = false;
    (void)c_->LeaseRelease(db_key_, owner, own_conn_ ? &*own_conn_ : nullptr, &released, &ours);
    DropWakeName();
  }
  c_->waiters().Notify(db_key_);
}

Status LockImpl::GetWakeName(Conn& conn, Clock::time_point until, CancelToken cancel_seen, bool* got) {
  *got = false;
  const int64_t cap_us = c_->options().read_timeout_s * 1000000LL / 2;
  for (;;) {
    int64_t left_us = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now()).count();
    if (left_us < 0) left_us = 0;
    int64_t slice = std::min(left_us, cap_us);
    ExecResult r;
    if (!EnterServerWait(conn, cancel_seen)) return CancelledStatus(Name());
    Status s = conn.Exec(c_->lease_sql().get_name, {Param::Bytes(wake_name_), Param::Int(slice)}, &r);
    LeaveServerWait();
    if (Cancelled(cancel_seen)) return CancelledStatus(Name());
    if (!s.ok()) {
      if (s.server_errno() == ER_QUERY_INTERRUPTED) continue;  // a stale cancel
      return s;
    }
    if (!r.rows.empty() && r.rows[0][0] && *r.rows[0][0] == "1") {
      *got = true;
      return Status::OK();
    }
    if (slice >= left_us) return Status::OK();  // timed out (0) or refused (NULL)
  }
}

void LockImpl::DropWakeName() {
  if (has_wake_name_ && own_conn_ && !own_conn_->broken()) {
    ExecResult r;
    (void)own_conn_->Exec(c_->lease_sql().release_name, {Param::Bytes(wake_name_)}, &r);
  }
  has_wake_name_ = false;
  if (!txn_open_) own_conn_.Reset();
}

Status LockImpl::LeaseAcquire(Clock::time_point deadline, CancelToken cancel_seen, uint64_t* fence,
                              std::string* owner, Clock::time_point* lease_deadline) {
  *owner = c_->NewOwner();
  busy_remaining_us_.store(-1);
  auto stop = [&] { return Cancelled(cancel_seen); };
  WaitQueues& wq = c_->waiters();
  const bool wake = opts_.wakeup == Wakeup::kAuto && c_->wakeup_supported();
  LeaseAttempt a;
  auto won = [&] {
    *fence = a.fence;
    *lease_deadline = a.sent_at + std::chrono::milliseconds(opts_.ttl_ms);
    return Status::OK();
  };
  auto busy = [&] { return Status::Busy("lock " + Name() + " is held by someone else"); };

  // Uncontended: one statement. When this process saw the key busy a moment
  // ago (or has threads queued on it), go straight to the queue instead.
  if (!wq.GetHint(db_key_).contended) {
    Status s = c_->LeaseAcquire(db_key_, *owner, opts_.ttl_ms, deadline, nullptr, &a, stop);
    if (s.code() == Code::kCancelled) return CancelledStatus(Name());
    if (!s.ok()) return s;
    if (a.won) return won();
    wq.NoteBusy(db_key_, a.remaining_us);
    busy_remaining_us_.store(a.remaining_us);
    if (Clock::now() >= deadline) return busy();
  }

  // Threads of this process wait in line; only the head talks to the
  // database. The head waits for the holder's wake-up name (GET_LOCK) on the
  // server, which the holder gives up right after its release, so a handoff
  // costs no polling; a holder that does not take part (or is gone) is
  // outlived by capping that wait at the lease's end, then polling.
  const uint64_t ticket = wq.Join(db_key_);
  struct Leave {
    WaitQueues& wq;
    const std::string& key;
    uint64_t ticket;
    ~Leave() { wq.Leave(key, ticket); }
  } leave{wq, db_key_, ticket};
  int64_t backoff_us = kPollMinUs;
  bool polled = false;
  uint64_t releases_seen = 0;
  for (;;) {
    if (!wq.WaitHead(db_key_, ticket, deadline, stop))
      return Cancelled(cancel_seen) ? CancelledStatus(Name()) : busy();
    if (!polled) releases_seen = wq.Releases(db_key_);
    const auto now = Clock::now();
    const auto expiry = wq.GetHint(db_key_).expiry_estimate;
    if (wake && !has_wake_name_) {
      if (!own_conn_) {
        Status s = c_->GetConn(deadline, &own_conn_, stop);
        if (s.code() == Code::kCancelled) return CancelledStatus(Name());
        if (!s.ok() && s.code() != Code::kPool) return s;  // no connection free: poll instead
      }
      if (own_conn_) {
        // Wait for the name until the holder's lease ends by the server's
        // word (a paused holder keeps the name but not the lease); when we
        // have no such word, wait a second at most, then ask the server.
        auto until = expiry == Clock::time_point{}
                         ? now + std::chrono::seconds(1)
                         : std::max(expiry + std::chrono::milliseconds(50), now + std::chrono::milliseconds(20));
        until = std::min(until, deadline);
        Status s = GetWakeName(*own_conn_, until, cancel_seen, &has_wake_name_);
        if (!s.ok()) {
          if (s.code() == Code::kCancelled || !own_conn_->broken()) {
            DropWakeName();
            return s;
          }
          own_conn_.Reset();  // dropped: retry on a fresh connection
          has_wake_name_ = false;
        }
      }
    } else if (polled) {
      auto until = std::min({now + std::chrono::microseconds(JitterUs(backoff_us)), deadline,
                             std::max(expiry, now + std::chrono::microseconds(500))});
      wq.Sleep(db_key_, releases_seen, until, stop);
      backoff_us = std::min(backoff_us * 2, kPollMaxUs);
    }
    polled = true;
    if (Cancelled(cancel_seen)) {
      DropWakeName();
      return CancelledStatus(Name());
    }
    releases_seen = wq.Releases(db_key_);  // a release after this wakes the next sleep
    Status s = c_->LeaseAcquire(db_key_, *owner, opts_.ttl_ms, deadline,
                                own_conn_ ? &*own_conn_ : nullptr, &a, stop);
    if (!s.ok()) {
      DropWakeName();
      return s;
    }
    if (a.won) {
      // Keep the name (if we have it) for the whole hold: our release will
      // wake the next waiter. And remember the key is contended, so this
      // process's next attempt queues rather than racing the woken waiter.
      wq.NoteContended(db_key_);
      if (!has_wake_name_) own_conn_.Reset();
      return won();
    }
    wq.NoteBusy(db_key_, a.remaining_us);
    busy_remaining_us_.store(a.remaining_us);
    if (Clock::now() >= deadline) {
      DropWakeName();
      return busy();
    }
  }
}

Status LockImpl::RowAcquire(Clock::time_point deadline, CancelToken cancel_seen, uint64_t* fence) {
  WaitQueues& wq = c_->waiters();
  const uint64_t ticket = wq.Join(db_key_);
  struct Leave {
    WaitQueues& wq;
    const std::string& key;
    uint64_t ticket;
    ~Leave() { wq.Leave(key, ticket); }
  } leave{wq, db_key_, ticket};
  auto busy = [&] { return Status::Busy("row lock " + Name() + " is held by someone else"); };
  if (!wq.WaitHead(db_key_, ticket, deadline, [&] { return Cancelled(cancel_seen); }))
    return Cancelled(cancel_seen) ? CancelledStatus(Name()) : busy();

  PooledConn conn;
  Status s = c_->GetConn(deadline, &conn, [&] { return Cancelled(cancel_seen); });
  if (s.code() == Code::kCancelled) return CancelledStatus(Name());
  if (!s.ok()) return s;
  bool force_check = false;
  const auto retry_until = c_->RetryUntil(deadline);
  for (int round = 0;; ++round) {
    s = c_->EnsureRow(*conn, db_key_, force_check);
    if (s.ok()) s = conn->Query("START TRANSACTION");
    if (!s.ok()) {
      // Nothing is held yet: a connection that failed here is replaced.
      if (!conn->broken() || round >= 3 || Clock::now() >= retry_until) return s;
      conn.Reset();
      s = c_->GetConn(deadline, &conn, [&] { return Cancelled(cancel_seen); });
      if (s.code() == Code::kCancelled) return CancelledStatus(Name());
      if (!s.ok()) return s;
      continue;
    }
    bool missing = false;
    for (;;) {
      int64_t left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      const std::string* sql = &c_->row_sql().nowait;
      if (left_ms > 0) {
        // The largest slice that fits what is left and stays well inside the
        // read timeout; at least the smallest slice.
        int64_t cap = std::min<int64_t>(left_ms, c_->options().read_timeout_s * 1000LL / 2);
        size_t i = 0;
        while (i + 1 < kRowSliceCount && kRowSlicesMs[i + 1] <= cap) ++i;
        sql = &c_->row_sql().sliced[i];
      }
      ExecResult r;
      if (!EnterServerWait(*conn, cancel_seen)) {
        (void)conn->Query("ROLLBACK");
        return CancelledStatus(Name());
      }
      s = conn->Exec(*sql, {Param::Bytes(db_key_)}, &r);
      LeaveServerWait();
      if (s.ok()) {
        if (r.rows.size() == 1) {
          if (Cancelled(cancel_seen)) {
            (void)conn->Query("ROLLBACK");
            return CancelledStatus(Name());
          }
          *fence = 0;  // a row lock is its transaction: no token (see dlock.h)
          row_dirty_ = false;
          row_conn_ = std::move(conn);
          return Status::OK();
        }
        missing = true;  // the row was deleted behind our back
        break;
      }
      unsigned err = static_cast<unsigned>(s.server_errno());
      if (Cancelled(cancel_seen)) {
        if (!conn->broken()) (void)conn->Query("ROLLBACK");
        return CancelledStatus(Name());
      }
      if (err == ER_LOCK_WAIT_TIMEOUT || err == ER_STATEMENT_TIMEOUT || err == ER_QUERY_INTERRUPTED) {
        if (Clock::now() < deadline) continue;  // next slice
        (void)conn->Query("ROLLBACK");
        return busy();
      }
      if (err == ER_LOCK_DEADLOCK) break;  // rolled back by the server: start again
      if (!conn->broken()) (void)conn->Query("ROLLBACK");
      return s;
    }
    // A missing row (the UPDATE matched nothing and may have locked a gap) or
    // a deadlock: end the transaction, re-create the row, try again.
    s = conn->Query("ROLLBACK");
    if (!s.ok()) return s;
    if (Clock::now() >= deadline && !missing) return busy();
    force_check = missing;
    if (round > 20) return Status(Code::kDb, "row lock " + Name() + ": the lock row keeps disappearing");
  }
}

// ---- Renew / Release / transactions ------------------------------------------

Status LockImpl::Renew(LockCaller& me) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  std::lock_guard<std::mutex> op(op_mu_);
  std::string owner;
  Clock::time_point acquired_at;
  {
    MutexLock g(st_mu_);
    if (Status s = RefuseWhileAcquiringLocked("renew"); !s.ok()) return s;
    LockState st = StateLocked();
    if (st == LockState::kIdle) return Status::StateError("lock " + Name() + " is not held");
    if (st == LockState::kLost) return Status::Lost("lock " + Name() + " was lost: " + LostWhyLocked());
    owner = owner_;
    acquired_at = acquired_at_;
  }
  if (opts_.mode == LockMode::kRow) {
    RowUse use(this);
    Status s = row_conn_->Ping();
    if (!s.ok()) {
      row_conn_.Reset();
      MutexLock g(st_mu_);
      SetLostLocked("the lock's connection died (the server rolled back and released the row lock)");
      c_->counters().lost.fetch_add(1);
      return Status(Code::kLost, "lock " + Name() + " was lost: " + lost_why_, s.server_errno());
    }
    return Status::OK();
  }
  if (opts_.max_hold_ms > 0 && Clock::now() - acquired_at >= std::chrono::milliseconds(opts_.max_hold_ms)) {
    c_->counters().max_hold_trips.fetch_add(1);
    c_->Raise(EventType::kMaxHold, Severity::kCritical, key_, owner, Token(),
              "renew refused: max hold time of " + std::to_string(opts_.max_hold_ms) +
                  " ms reached");
    return Status(Code::kMaxHold, "lock " + Name() + ": max hold time of " +
                                      std::to_string(opts_.max_hold_ms) +
                                      " ms reached; renewal refused, the lease will expire");
  }
  bool renewed = false;
  Clock::time_point sent;
  Status s = c_->LeaseRenew(db_key_, owner, opts_.ttl_ms, &renewed, &sent);
  if (!s.ok()) return s;
  if (!renewed) {
    c_->renewer().Remove(this);
    const std::string why = "the lease had expired by the database clock or another owner took it";
    c_->Raise(EventType::kLost, Severity::kCritical, key_, owner, Token(),
              "renew found the lease lost: " + why);
    MutexLock g(st_mu_);
    SetLostLocked(why);
    c_->counters().lost.fetch_add(1);
    return Status::Lost("lock " + Name() + " was lost: " + lost_why_);
  }
  c_->counters().renewals.fetch_add(1);
  const auto deadline = sent + std::chrono::milliseconds(opts_.ttl_ms);
  {
    MutexLock g(st_mu_);
    if (owner_ == owner && state_ == LockState::kHeld) deadline_ = deadline;
  }
  if (opts_.auto_renew) c_->renewer().Renewed(this, sent, deadline);
  return Status::OK();
}

Status LockImpl::CommitOrRollbackTxn(const char* how) {
  txn_open_ = false;
  Status s = own_conn_ ? own_conn_->Query(how) : Status(Code::kConnect, "no connection");
  if (!has_wake_name_) own_conn_.Reset();
  return s;
}

Status LockImpl::LeaseReleaseDb(Status* business, bool* freed) {
  *business = Status::OK();
  *freed = false;
  std::string owner = Owner();
  bool released = false, ours = false;
  Status s;
  if (txn_open_) {
    // A7: the release joins the caller's transaction; both commit or neither.
    ExecResult r;
    s = own_conn_->Exec(c_->lease_sql().release, {Param::Bytes(db_key_), Param::Bytes(owner)}, &r);
    if (s.ok()) {
      ours = r.affected == 1;
      released = ours && r.insert_id == 1;
      const char* how = released ? "COMMIT" : "ROLLBACK";
      *business = CommitOrRollbackTxn(how);
      if (business->ok() && !released)
        *business = Status(Code::kLost, "the lease was lost, so the transaction was rolled back");
      else if (!business->ok() && IsOutcomeUnknown(static_cast<unsigned>(business->server_errno())))
        *business = Status(Code::kUnknown, "the connection dropped during COMMIT: whether the "
                                           "transaction (and the release) committed is unknown",
                           business->server_errno());
    } else {
      *business = s;
      (void)CommitOrRollbackTxn("ROLLBACK");
      if (!business->ok() && business->code() != Code::kUnknown)
        *business = Status(business->code(), "the transaction was rolled back: " + s.message(),
                           s.server_errno());
      // Still release the lease itself, outside the transaction.
      s = c_->LeaseRelease(db_key_, owner, nullptr, &released, &ours);
    }
  } else if (has_wake_name_ && own_conn_ && !own_conn_->broken()) {
    ExecResult r;
    s = own_conn_->Exec(c_->lease_sql().release_and_wake,
                        {Param::Bytes(wake_name_), Param::Bytes(db_key_), Param::Bytes(owner)}, &r);
    if (s.ok()) {
      ours = r.affected == 1;
      released = ours && r.insert_id == 1;
      if (ours) has_wake_name_ = false;  // given up inside the statement
    } else {  // dropped: the retrying path re-checks on a fresh connection
      s = c_->LeaseRelease(db_key_, owner, nullptr, &released, &ours);
    }
  } else {
    s = c_->LeaseRelease(db_key_, owner, own_conn_ ? &*own_conn_ : nullptr, &released, &ours);
  }
  DropWakeName();
  if (!s.ok()) return s;
  *freed = released;
  if (!ours) {
    c_->Raise(EventType::kReleaseGone, Severity::kWarning, key_, owner, Token(),
              "release found the lease taken by another owner (its row was left alone)");
    return Status::Lost("another owner holds it now (its row was left alone)");
  }
  if (!released) return Status::Lost("the lease had expired before release");
  return Status::OK();
}

Status LockImpl::Release(LockCaller& me) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  std::lock_guard<std::mutex> op(op_mu_);
  LockState st;
  {
    MutexLock g(st_mu_);
    if (Status s = RefuseWhileAcquiringLocked("release"); !s.ok()) return s;
    st = StateLocked();
    if (state_ == LockState::kIdle) return Status::StateError("lock " + Name() + " is not held");
    if (state_ == LockState::kLost && released_)
      return Status::Lost("lock " + Name() + " was lost: " + lost_why_);
    if (!IsHolderLocked())
      return Status::StateError("lock " + Name() +
                                " is held by another thread; with holder=thread only the thread "
                                "that acquired it may release it");
    if (st == LockState::kHeld && count_ > 1) {
      --count_;  // an inner, reentrant hold
      return Status::OK();
    }
  }
  c_->renewer().Remove(this);
  Status s;
  if (opts_.mode == LockMode::kRow) {
    if (st == LockState::kLost) {
      RowUse use(this);
      if (row_conn_) {  // the server ended its session: nothing to end here
        row_conn_->MarkBroken();
        row_conn_.Reset();
      }
      MutexLock g(st_mu_);
      s = Status::Lost("lock " + Name() + " was lost: " + lost_why_);
    } else {
      s = RowEnd("COMMIT");
    }
    MutexLock g(st_mu_);
    if (s.ok()) state_ = LockState::kIdle;
    count_ = 0;
    released_ = true;
    cv_.notify_all();
  } else {
    Status business;
    bool freed = false;
    s = LeaseReleaseDb(&business, &freed);
    if (s.ok() && st == LockState::kLost)  // freed, but too late: our clock had run out
      s = Status::Lost("its lease ran out before it was renewed");
    if (s.ok() && !business.ok()) s = business;
    if (s.code() == Code::kLost) {
      c_->counters().lost.fetch_add(1);
      s = Status(Code::kLost, "lock " + Name() + " was lost before release: " + s.message());
    }
    MutexLock g(st_mu_);
    // Never HELD after a release: the state says what is known.
    if (s.ok() || (freed && s.code() != Code::kLost && s.code() != Code::kUnknown)) {
      state_ = LockState::kIdle;  // the lease is free (the business part may have failed)
    } else if (s.code() == Code::kLost || s.code() == Code::kUnknown) {
      SetLostLocked(s.message());
    } else {
      SetLostLocked("the release failed (" + s.message() +
                    "); the lease may still be held by this owner until it expires");
      s = Status(s.code(), "lock " + Name() + ": release failed, state is LOST (the lease may "
                           "stay taken until it expires): " + s.message(), s.server_errno());
    }
    count_ = 0;
    released_ = true;
    cv_.notify_all();
  }
  if (s.ok()) c_->counters().releases.fetch_add(1);
  c_->waiters().Notify(db_key_);
  return s;
}

Status LockImpl::Rollback(LockCaller& me) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  std::lock_guard<std::mutex> op(op_mu_);
  {
    MutexLock g(st_mu_);
    if (Status s = RefuseWhileAcquiringLocked("rollback"); !s.ok()) return s;
  }
  if (opts_.mode == LockMode::kLease) {
    if (!txn_open_) return Status::StateError("lock " + Name() + " has no open transaction (call begin first)");
    return CommitOrRollbackTxn("ROLLBACK");  // the lease stays held
  }
  {
    MutexLock g(st_mu_);
    LockState st = StateLocked();
    if (st == LockState::kIdle) return Status::StateError("lock " + Name() + " is not held");
    if (st == LockState::kLost) return Status::Lost("lock " + Name() + " was lost: " + lost_why_);
    if (!IsHolderLocked()) return Status::StateError("lock " + Name() + " is held by another thread");
  }
  // A rollback ends the transaction, so it ends every reentrant hold too.
  Status s = RowEnd("ROLLBACK");
  {
    MutexLock g(st_mu_);
    count_ = 0;
    if (s.ok()) state_ = LockState::kIdle;
    cv_.notify_all();
  }
  c_->waiters().Notify(db_key_);
  return s;
}

Status LockImpl::Begin(LockCaller& me) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  std::lock_guard<std::mutex> op(op_mu_);
  {
    MutexLock g(st_mu_);
    if (Status s = RefuseWhileAcquiringLocked("begin"); !s.ok()) return s;
    LockState st = StateLocked();
    if (st != LockState::kHeld)
      return st == LockState::kLost ? Status::Lost("lock " + Name() + " was lost: " + lost_why_)
                                    : Status::StateError("lock " + Name() + " is not held");
  }
  if (opts_.mode == LockMode::kRow) return Status::OK();  // always in its transaction
  if (txn_open_) return Status::StateError("lock " + Name() + " already has an open transaction");
  if (!own_conn_) {
    Status s = c_->GetConn(Clock::now(), &own_conn_);
    if (!s.ok()) return s;
  }
  Status s = own_conn_->Query("START TRANSACTION");
  if (!s.ok()) {
    if (!has_wake_name_) own_conn_.Reset();
    return s;
  }
  txn_open_ = true;
  return Status::OK();
}

Status LockImpl::Exec(LockCaller& me, const std::string& sql, const std::vector<const std::string*>& params,
                      int64_t* affected) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  if (const char* kw = TxnEndingStatement(sql))
    return Status::Invalid("exec refuses " + std::string(kw) +
                           ": it would end the lock's transaction (release commits it, rollback "
                           "discards it)");
  std::lock_guard<std::mutex> op(op_mu_);
  {
    MutexLock g(st_mu_);
    if (Status s = RefuseWhileAcquiringLocked("exec"); !s.ok()) return s;
    LockState st = StateLocked();
    if (st != LockState::kHeld)
      return st == LockState::kLost ? Status::Lost("lock " + Name() + " was lost: " + LostWhyLocked())
                                    : Status::StateError("lock " + Name() + " is not held");
  }
  if (opts_.mode == LockMode::kLease && !txn_open_)
    return Status::StateError("exec on a lease lock needs begin() first (A7: the release then "
                              "commits with the transaction)");
  const bool row = opts_.mode == LockMode::kRow;
  std::optional<RowUse> use;
  if (row) use.emplace(this);
  Conn& conn = row ? *row_conn_ : *own_conn_;
  std::vector<Param> ps;
  ps.reserve(params.size());
  for (const std::string* p : params) ps.push_back(p ? Param::Text(*p) : Param::Null());
  ExecResult r;
  Status s = conn.Exec(sql, ps, &r, /*cache=*/false);
  if (row && s.ok()) row_dirty_ = true;
  if (conn.broken()) {
    if (!row) return s;  // release finds out, and rolls the transaction back
    row_conn_.Reset();
    MutexLock g(st_mu_);
    SetLostLocked("the lock's connection died (the server rolled back and released the row lock)");
    c_->counters().lost.fetch_add(1);
    return Status(Code::kLost, "lock " + Name() + " was lost: " + lost_why_ + "; " + s.message(),
                  s.server_errno());
  }
  // Did the statement end the transaction anyway (an implicit commit the
  // keyword check missed, a deadlock the server answered with a rollback)?
  // An OK reply says so in its status flags; an error reply does not, so ask.
  bool in_txn = conn.InTransaction();
  if (!s.ok()) {
    ExecResult q;
    Status t = conn.Exec("SELECT @@in_transaction", {}, &q);
    in_txn = !t.ok() || q.rows.empty() || !q.rows[0][0] || *q.rows[0][0] != "0";
  }
  if (!in_txn) {
    const std::string why = s.ok() ? "the statement ended the lock's transaction (an implicit commit)"
                                   : "the server rolled the lock's transaction back (" + s.message() + ")";
    if (!row) {
      txn_open_ = false;
      if (!has_wake_name_) own_conn_.Reset();
      return Status(s.ok() ? Code::kState : s.code(),
                    "lock " + Name() + ": " + why + "; the lease is still held, but what ran before "
                    "is no longer tied to its release (begin again)", s.server_errno());
    }
    row_conn_.Reset();
    MutexLock g(st_mu_);
    SetLostLocked(why + ", which released the row lock");
    c_->counters().lost.fetch_add(1);
    return Status(Code::kLost, "lock " + Name() + " was lost: " + lost_why_, s.server_errno());
  }
  if (!s.ok()) return s;
  if (affected != nullptr) *affected = static_cast<int64_t>(r.affected);
  return Status::OK();
}

Status LockImpl::WaitLost(LockCaller& me, int64_t timeout_ms) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();

  if (timeout_ms < 0 || timeout_ms > kMaxWaitMs)
    return Status::Invalid("timeout_ms must be 0.." + std::to_string(kMaxWaitMs));
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const CancelToken cancel_seen{&me.cancel_seq, me.cancel_seq.load()};
  MutexLock g(st_mu_);
  for (;;) {
    LockState st = StateLocked();
    if (st == LockState::kLost) return Status::Lost("lock " + Name() + " was lost: " + LostWhyLocked());
    if (st == LockState::kIdle && !acquiring_) return Status::OK();
    if (Cancelled(cancel_seen)) return Status(Code::kCancelled, "wait_lost on " + Name() + " was cancelled");
    auto now = Clock::now();
    if (now >= deadline)
      return Status(Code::kTimeout, "lock " + Name() + " is still held after " +
                                        std::to_string(timeout_ms) + " ms");
    auto until = std::min(deadline, now + kSlice);
    if (st == LockState::kHeld && opts_.mode == LockMode::kLease) until = std::min(until, deadline_);
    cv_.wait_until(st_mu_, until);
  }
}

// COMMIT or ROLLBACK the row lock's transaction and give the connection back.
Status LockImpl::RowEnd(const char* how) {
  RowUse use(this);
  if (!row_conn_) return Status::Lost("the lock's connection is gone");
  Status s = row_conn_->Query(how);
  const bool broken = row_conn_->broken();
  if (!s.ok() && !broken) (void)row_conn_->Query("ROLLBACK");  // the session lives: make sure it ends
  row_conn_.Reset();
  if (s.ok()) return s;
  MutexLock g(st_mu_);
  c_->counters().lost.fetch_add(1);
  if (broken) {
    // Unknown only matters when the caller ran statements in the transaction.
    const bool unknown = IsOutcomeUnknown(static_cast<unsigned>(s.server_errno())) &&
                         std::string(how) == "COMMIT" && row_dirty_;
    SetLostLocked(unknown ? "the connection dropped during COMMIT: whether the statements run "
                            "on the lock's transaction were committed is unknown"
                          : "the lock's connection died (the server rolled back and released "
                            "the row lock)");
    return Status(unknown ? Code::kUnknown : Code::kLost, "lock " + Name() + ": " + lost_why_,
                  s.server_errno());
  }
  SetLostLocked("the transaction failed at " + std::string(how) + ": " + s.message());
  return Status(s.code(), "lock " + Name() + ": " + lost_why_, s.server_errno());
}

}  // namespace dlock
