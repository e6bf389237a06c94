#include <errmsg.h>
#include <mysqld_error.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <thread>

#include "client_impl.h"
#include "dlock/core.hpp"

namespace dlock {

namespace {

// Back-off between polls of a busy lease: starts small so a short hold is
// noticed soon, grows so a long one costs the database little, and never
// sleeps past the moment the database said the lease ends.
constexpr int64_t kPollMinUs = 2000;
constexpr int64_t kPollMaxUs = 200000;

int64_t JitterUs(int64_t us) {
  thread_local std::minstd_rand rng(std::random_device{}());
  std::uniform_int_distribution<int64_t> d(us * 3 / 4, us + us / 4);
  return d(rng);
}

}  // namespace

class LockImpl {
 public:
  LockImpl(std::shared_ptr<Client> client, std::string key, LockOptions opts)
      : client_(std::move(client)), c_(client_->impl()), key_(std::move(key)), opts_(opts),
        pid_(getpid()) {}

  ~LockImpl() {
    if (getpid() != pid_) {
      // Forked child: never touch the parent's lock or its connection.
      row_conn_ = PooledConn();
      return;
    }
    std::lock_guard<std::timed_mutex> g(op_mu_);
    bool held;
    {
      std::lock_guard<std::mutex> s(st_mu_);
      held = state_ == LockState::kHeld;
    }
    if (held) {
      if (opts_.mode == LockMode::kRow) RowEnd("ROLLBACK");
      else LeaseReleaseLocked();
    }
  }

  Status Try(int64_t wait_ms) {
    if (Status s = CheckPid(); !s.ok()) return s;
    if (wait_ms < 0 || wait_ms > kMaxWaitMs)
      return Status::Invalid("wait_ms must be 0.." + std::to_string(kMaxWaitMs) + ", got " +
                             std::to_string(wait_ms));
    const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
    // Another thread's operation on this object may be running (e.g. a long
    // wait): ours is bounded by our own wait.
    std::unique_lock<std::timed_mutex> g(op_mu_, std::defer_lock);
    if (!g.try_lock_until(deadline)) {
      return Status::Busy("another call on this lock object kept it busy for the whole wait");
    }
    if (CurrentState() == LockState::kHeld)
      return Status::StateError("lock " + Name() + " is already held by this lock object");
    if (opts_.mode == LockMode::kRow) return RowTry(deadline);
    return LeaseTry(deadline);
  }

  Status Renew() {
    if (Status s = CheckPid(); !s.ok()) return s;
    std::lock_guard<std::timed_mutex> g(op_mu_);
    LockState st = CurrentState();
    if (st == LockState::kIdle) return Status::StateError("lock " + Name() + " is not held");
    if (st == LockState::kLost) return Status::Lost("lock " + Name() + " was lost: " + LostWhy());
    if (opts_.mode == LockMode::kRow) {
      Status s = row_conn_->Ping();
      if (!s.ok()) {
        row_conn_ = PooledConn();
        SetLost("the lock's connection died (the server rolled back and released the row lock)");
        return Status(Code::kLost, "lock " + Name() + " was lost: " + LostWhy(), s.server_errno());
      }
      return Status::OK();
    }
    bool renewed = false;
    Clock::time_point sent;
    Status s = c_->LeaseRenew(key_, Owner(), opts_.ttl_ms, &renewed, &sent);
    if (!s.ok()) return s;
    if (!renewed) {
      SetLost("the lease had expired by the database clock or another owner took it");
      return Status::Lost("lock " + Name() + " was lost: " + LostWhy());
    }
    std::lock_guard<std::mutex> st_g(st_mu_);
    deadline_ = sent + std::chrono::milliseconds(opts_.ttl_ms);
    return Status::OK();
  }

  Status Release() {
    if (Status s = CheckPid(); !s.ok()) return s;
    std::lock_guard<std::timed_mutex> g(op_mu_);
    if (opts_.mode == LockMode::kRow) return RowRelease("COMMIT");
    return LeaseReleaseLocked();
  }

  Status Rollback() {
    if (Status s = CheckPid(); !s.ok()) return s;
    std::lock_guard<std::timed_mutex> g(op_mu_);
    if (opts_.mode != LockMode::kRow)
      return Status::StateError("rollback is for row locks; a lease has no transaction");
    return RowRelease("ROLLBACK");
  }

  Status Exec(const std::string& sql, const std::vector<const std::string*>& params,
              int64_t* affected) {
    if (Status s = CheckPid(); !s.ok()) return s;
    std::lock_guard<std::timed_mutex> g(op_mu_);
    if (opts_.mode != LockMode::kRow)
      return Status::StateError("exec runs in a row lock's transaction; this is a lease lock");
    LockState st = CurrentState();
    if (st != LockState::kHeld)
      return st == LockState::kLost ? Status::Lost("lock " + Name() + " was lost: " + LostWhy())
                                    : Status::StateError("lock " + Name() + " is not held");
    std::vector<Param> ps;
    ps.reserve(params.size());
    for (const std::string* p : params) ps.push_back(p ? Param::Text(*p) : Param::Null());
    ExecResult r;
    Status s = row_conn_->Exec(sql, ps, &r, /*cache=*/false);
    if (!s.ok()) {
      if (row_conn_->broken()) {
        row_conn_ = PooledConn();
        SetLost("the lock's connection died (the server rolled back and released the row lock)");
        return Status(Code::kLost, "lock " + Name() + " was lost: " + LostWhy() + "; " + s.message(),
                      s.server_errno());
      }
      return s;
    }
    if (affected != nullptr) *affected = static_cast<int64_t>(r.affected);
    return Status::OK();
  }

  LockState CurrentState() const {
    std::lock_guard<std::mutex> g(st_mu_);
    if (state_ == LockState::kHeld && opts_.mode == LockMode::kLease && Clock::now() >= deadline_)
      return LockState::kLost;
    return state_;
  }

  std::string Owner() const {
    std::lock_guard<std::mutex> g(st_mu_);
    return owner_;
  }
  const char* OwnerCstr() const {
    std::lock_guard<std::mutex> g(st_mu_);
    return owner_.c_str();
  }
  uint64_t Token() const {
    std::lock_guard<std::mutex> g(st_mu_);
    return fence_;
  }
  const std::string& key() const { return key_; }
  int64_t RemainingMs() const {
    if (opts_.mode == LockMode::kRow) return -1;
    std::lock_guard<std::mutex> g(st_mu_);
    if (state_ != LockState::kHeld) return 0;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    return left > 0 ? left : 0;
  }

 private:
  std::string Name() const { return "'" + QuoteKey(key_) + "'"; }

  Status CheckPid() const {
    if (getpid() != pid_)
      return Status(Code::kForked, "lock " + Name() + " was created in another process (fork): "
                                   "open a new client and lock in this process");
    return Status::OK();
  }

  std::string LostWhy() const {
    std::lock_guard<std::mutex> g(st_mu_);
    if (state_ == LockState::kHeld) return "its lease ran out before it was renewed";
    return lost_why_;
  }

  void SetLost(std::string why) {
    std::lock_guard<std::mutex> g(st_mu_);
    state_ = LockState::kLost;
    lost_why_ = std::move(why);
  }

  void SetHeld(std::string owner, uint64_t fence, Clock::time_point deadline) {
    std::lock_guard<std::mutex> g(st_mu_);
    state_ = LockState::kHeld;
    owner_ = std::move(owner);
    fence_ = fence;
    deadline_ = deadline;
    lost_why_.clear();
  }

  Status LeaseTry(Clock::time_point deadline) {
    const std::string owner = c_->NewOwner();
    int64_t backoff_us = kPollMinUs;
    for (;;) {
      LeaseAttempt a;
      Status s = c_->LeaseAcquire(key_, owner, opts_.ttl_ms, deadline, &a);
      if (!s.ok()) return s;
      if (a.won) {
        SetHeld(owner, a.fence, a.sent_at + std::chrono::milliseconds(opts_.ttl_ms));
        return Status::OK();
      }
      auto now = Clock::now();
      if (now >= deadline)
        return Status::Busy("lock " + Name() + " is held by someone else");
      int64_t left_us = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
      int64_t sleep_us = std::min({JitterUs(backoff_us), left_us, std::max<int64_t>(a.remaining_us, 500)});
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      backoff_us = std::min(backoff_us * 2, kPollMaxUs);
    }
  }

  Status LeaseReleaseLocked() {
    LockState st = CurrentState();
    if (st == LockState::kIdle) return Status::StateError("lock " + Name() + " is not held");
    bool released = false, ours = false;
    // Even when our clock says the lease ran out, free the row if it is still
    // ours, so that nobody waits for the database to expire it.
    Status s = c_->LeaseRelease(key_, Owner(), &released, &ours);
    if (!s.ok()) return s;
    if (st == LockState::kHeld && released) {
      std::lock_guard<std::mutex> g(st_mu_);
      state_ = LockState::kIdle;
      return Status::OK();
    }
    std::string why = !ours ? "another owner holds it now (its row was left alone)"
                            : st == LockState::kLost && LostWhy().size()
                                  ? LostWhy()
                                  : "the lease had expired before release";
    SetLost(why);
    return Status::Lost("lock " + Name() + " was lost before release: " + why);
  }

  // ---- row locks (scheme 2) ----

  Status RowTry(Clock::time_point deadline) {
    PooledConn conn;
    Status s = c_->GetConn(deadline, &conn);
    if (!s.ok()) return s;
    bool force_check = false;
    for (int round = 0;; ++round) {
      s = c_->EnsureRow(*conn, key_, force_check);
      if (s.ok()) s = conn->Query("START TRANSACTION");
      if (!s.ok()) return s;
      bool missing = false;
      for (;;) {
        int64_t left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        const std::string* sql = &c_->row_sql().nowait;
        if (left_ms > 0) {
          // The largest slice that fits what is left, and stays well inside
          // the read timeout; at least the smallest slice.
          int64_t cap = std::min<int64_t>(left_ms, c_->options().read_timeout_s * 1000LL / 2);
          size_t i = 0;
          while (i + 1 < kRowSliceCount && kRowSlicesMs[i + 1] <= cap) ++i;
          sql = &c_->row_sql().sliced[i];
        }
        ExecResult r;
        s = conn->Exec(*sql, {Param::Bytes(key_)}, &r);
        if (s.ok()) {
          if (r.affected == 1) {
            row_conn_ = std::move(conn);
            SetHeld(c_->NewOwner(), r.insert_id, Clock::time_point::max());
            return Status::OK();
          }
          missing = true;  // the row was deleted behind our back
          break;
        }
        unsigned err = static_cast<unsigned>(s.server_errno());
        if (err == ER_LOCK_WAIT_TIMEOUT || err == ER_STATEMENT_TIMEOUT) {
          if (Clock::now() < deadline) continue;  // next slice
          conn->Query("ROLLBACK");
          return Status::Busy("row lock " + Name() + " is held by someone else");
        }
        if (err == ER_LOCK_DEADLOCK) break;  // rolled back by the server: start again
        if (!conn->broken()) conn->Query("ROLLBACK");
        return s;
      }
      // A missing row (the UPDATE matched nothing, and may have locked a gap)
      // or a deadlock: end the transaction, re-create the row, try again.
      s = conn->Query("ROLLBACK");
      if (!s.ok()) return s;
      if (Clock::now() >= deadline && !missing)
        return Status::Busy("row lock " + Name() + " is held by someone else");
      force_check = missing;
      if (round > 20) return Status(Code::kDb, "row lock " + Name() + ": the lock row keeps disappearing");
    }
  }

  Status RowRelease(const char* how) {
    LockState st = CurrentState();
    if (st == LockState::kIdle) return Status::StateError("lock " + Name() + " is not held");
    if (st == LockState::kLost) return Status::Lost("lock " + Name() + " was lost: " + LostWhy());
    return RowEnd(how);
  }

  // COMMIT or ROLLBACK the lock's transaction and give the connection back.
  Status RowEnd(const char* how) {
    Status s = row_conn_->Query(how);
    bool broken = row_conn_->broken();
    if (!s.ok() && !broken) {
      // The statement failed but the session lives: make sure the lock is gone.
      row_conn_->Query("ROLLBACK");
    }
    row_conn_ = PooledConn();
    if (s.ok()) {
      std::lock_guard<std::mutex> g(st_mu_);
      state_ = LockState::kIdle;
      return s;
    }
    if (broken) {
      bool unknown = IsOutcomeUnknown(static_cast<unsigned>(s.server_errno())) &&
                     std::string(how) == "COMMIT";
      SetLost(unknown ? "the connection dropped during COMMIT: whether the statements run "
                        "on the lock's transaction were committed is unknown"
                      : "the lock's connection died (the server rolled back and released the row lock)");
      return Status(unknown ? Code::kUnknown : Code::kLost, "lock " + Name() + ": " + LostWhy(),
                    s.server_errno());
    }
    SetLost("the transaction failed at " + std::string(how) + ": " + s.message());
    return Status(s.code(), "lock " + Name() + ": " + LostWhy(), s.server_errno());
  }

  std::shared_ptr<Client> client_;
  ClientImpl* c_;
  const std::string key_;
  const LockOptions opts_;
  const pid_t pid_;

  std::timed_mutex op_mu_;  // serialises operations on this object
  mutable std::mutex st_mu_;  // guards the fields below (read by accessors)
  LockState state_ = LockState::kIdle;
  std::string owner_;
  std::string lost_why_;
  uint64_t fence_ = 0;
  Clock::time_point deadline_{};
  PooledConn row_conn_;  // row locks: the connection holding the transaction
};

// ---- facades ----

Client::Client(std::unique_ptr<ClientImpl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Status Client::Open(const std::string& url, const Config& cfg, std::shared_ptr<Client>* out) {
  std::unique_ptr<ClientImpl> impl;
  Status s = ClientImpl::Open(url, cfg, &impl);
  if (!s.ok()) return s;
  out->reset(new Client(std::move(impl)));
  return Status::OK();
}

Lock::Lock(std::unique_ptr<LockImpl> impl) : impl_(std::move(impl)) {}
Lock::~Lock() = default;

Status Lock::Open(std::shared_ptr<Client> client, const std::string& key, const Config& cfg,
                  std::unique_ptr<Lock>* out) {
  if (!client) return Status::Invalid("client is NULL");
  if (getpid() != client->impl()->pid())
    return Status(Code::kForked, "client was created in another process (fork)");
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  LockOptions opts = client->impl()->lock_defaults();
  for (const auto& kv : cfg.values()) {
    if (!IsLockKey(kv.first))
      return Status::Invalid("option '" + kv.first + "' is a client option; set it on the client");
    if (!(s = ApplyLockOption(kv.first, kv.second, &opts)).ok()) return s;
  }
  if (opts.mode == LockMode::kRow && client->impl()->server().galera)
    return Status(Code::kUnsupported,
                  "row locks are refused on Galera: InnoDB row locks do not exclude across "
                  "nodes; use a lease lock");
  out->reset(new Lock(std::unique_ptr<LockImpl>(new LockImpl(std::move(client), key, opts))));
  return Status::OK();
}

Status Lock::Try(int64_t wait_ms) { return impl_->Try(wait_ms); }
Status Lock::Renew() { return impl_->Renew(); }
Status Lock::Release() { return impl_->Release(); }
Status Lock::Rollback() { return impl_->Rollback(); }
Status Lock::Exec(const std::string& sql, const std::vector<const std::string*>& params,
                  int64_t* affected) {
  return impl_->Exec(sql, params, affected);
}
LockState Lock::state() const { return impl_->CurrentState(); }
std::string Lock::owner() const { return impl_->Owner(); }
const char* Lock::owner_cstr() const { return impl_->OwnerCstr(); }
uint64_t Lock::token() const { return impl_->Token(); }
const std::string& Lock::key() const { return impl_->key(); }
int64_t Lock::remaining_ms() const { return impl_->RemainingMs(); }

const char* Version() { return "1.0.0"; }

const char* CodeName(int code) {
  switch (static_cast<Code>(code)) {
    case Code::kOk: return "DLOCK_OK";
    case Code::kBusy: return "DLOCK_BUSY";
    case Code::kInvalid: return "DLOCK_E_INVALID";
    case Code::kConnect: return "DLOCK_E_CONNECT";
    case Code::kLost: return "DLOCK_E_LOST";
    case Code::kReadOnly: return "DLOCK_E_READONLY";
    case Code::kUnsupported: return "DLOCK_E_UNSUPPORTED";
    case Code::kDb: return "DLOCK_E_DB";
    case Code::kState: return "DLOCK_E_STATE";
    case Code::kForked: return "DLOCK_E_FORKED";
    case Code::kPool: return "DLOCK_E_POOL";
    case Code::kUnknown: return "DLOCK_E_UNKNOWN";
    case Code::kInternal: return "DLOCK_E_INTERNAL";
    case Code::kTimeout: return "DLOCK_E_TIMEOUT";
  }
  return "DLOCK_UNKNOWN_CODE";
}

}  // namespace dlock
