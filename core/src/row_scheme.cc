// The row scheme: a lock is a row locked by an open transaction (the
// article's SELECT .. FOR UPDATE). The hold lives exactly as long as the
// transaction: a commit releases it (with whatever the caller ran in it), a
// rollback, a crash or a closed session releases it too. No expiry, no
// renewal, no fencing token (see dlock.h).
#include <mysqld_error.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "client_impl.h"
#include "scheme.h"

namespace dlock {

const int64_t kRowSlicesMs[] = {50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000};
const size_t kRowSliceCount = sizeof(kRowSlicesMs) / sizeof(kRowSlicesMs[0]);

namespace {

// MySQL's NOWAIT refusal (MariaDB answers a NOWAIT with 1205); not in
// MariaDB's mysqld_error.h.
constexpr unsigned kErLockNowait = 3572;

// Without a per-statement bound (RowSql::sliced empty), waits shorter than
// the session's whole second are NOWAIT polls this far apart, growing.
constexpr int64_t kPollMinMs = 5;
constexpr int64_t kPollMaxMs = 100;

class RowScheme final : public Scheme {
 public:
  explicit RowScheme(const SchemeArgs& a)
      : c_(a.client),
        host_(a.host),
        db_key_(a.db_key),
        name_(a.name),
        key_param_{Param::Bytes(db_key_)} {}

  bool expires() const override { return false; }
  bool hold_is_transaction() const override { return true; }
  Status Acquire(Clock::time_point deadline, CancelToken cancel, Grant* out) override;
  void Abandon(const std::string& owner) override;
  Status Renew(const std::string& owner, Clock::time_point acquired_at, uint64_t token,
               Clock::time_point* deadline) override;
  Status Release(const std::string& owner, uint64_t token, bool commit, bool lost,
                 bool* freed) override;
  Status Begin() override { return Status::OK(); }  // always in its transaction
  Status Rollback() override { return End("ROLLBACK"); }
  Status Exec(const std::string& sql, const std::vector<const std::string*>& params,
              int64_t* affected) override;
  Conn* SessionConn() override { return conn_ ? &*conn_ : nullptr; }
  void AbandonAfterFork() override { conn_.Abandon(); }

 private:
  Status Cancelled() const {
    return Status(Code::kCancelled, "waiting for lock " + name_ + " was cancelled");
  }
  Status Busy() const { return Status::Busy("row lock " + name_ + " is held by someone else"); }
  // Makes sure the lock's row exists without ever locking a gap; once per
  // client and row unless force_check (the row went missing).
  Status EnsureRow(Conn& conn, bool force_check);
  // Takes the row lock on a connection in a fresh transaction.
  Status Take(Clock::time_point deadline, CancelToken cancel);
  // The statement that waits for the row at most what is left (sliced).
  // expired: the deadline was seen passed already (no clock read needed).
  const std::string& TakeSql(Clock::time_point deadline, bool expired) const;
  // Where the dialect bounds a wait by the session (RowSql::sliced empty):
  // the next statement, after setting the session's wait when it must
  // change. *poll: a NOWAIT the caller follows with a pause when refused.
  Status SessionTakeSql(Conn& conn, Clock::time_point deadline, bool expired, bool first,
                        int* session_wait_s, const std::string** sql, bool* poll);
  // Gives the session its own lock wait back (a failure leaves it to the
  // pool's reset).
  Status RestoreWait(Conn& conn, int* session_wait_s);
  // The hold's connection died or its transaction ended: the row lock is
  // gone with it.
  Status Lost(const std::string& why, const Status& cause, const std::string& more = "");
  // COMMIT or ROLLBACK the transaction and give the connection back.
  Status End(const char* how);

  ClientImpl* const c_;
  LockHost* const host_;
  const std::string db_key_, name_;
  // Built once, not per statement (an allocation each): the row's key as
  // the take's parameter, and the transaction's start, which the text
  // protocol sends as a string too long to be stored inline.
  const std::vector<Param> key_param_;
  const std::string start_sql_ = "START TRANSACTION";
  PooledConn conn_;     // while held: the transaction that is the lock
  bool dirty_ = false;  // Exec ran statements in it
};

Status RowScheme::Acquire(Clock::time_point deadline, CancelToken cancel, Grant* out) {
  QueuePlace place(c_->waiters(), db_key_);
  if (!place.WaitHead(deadline, [&] { return cancel.cancelled(); }))
    return cancel.cancelled() ? Cancelled() : Busy();
  Status s = Take(deadline, cancel);
  if (!s.ok()) return s;
  out->owner = c_->NewOwner();
  out->fence = 0;  // a row lock is its transaction: no token (see dlock.h)
  // acquired_at left to the lock (its own clock read as Try ends).
  out->deadline = Clock::time_point::max();
  dirty_ = false;
  return s;
}

// What is left of a wait, in ms; with expired (the deadline was seen
// passed: the clock only goes on) without reading the clock.
int64_t LeftMs(Clock::time_point deadline, bool expired) {
  if (expired) return 0;
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
}

const std::string& RowScheme::TakeSql(Clock::time_point deadline, bool expired) const {
  const int64_t left_ms = LeftMs(deadline, expired);
  if (left_ms <= 0) return c_->sql().row.nowait;
  // The largest slice that fits what is left and stays well inside the
  // read timeout; at least the smallest slice.
  const int64_t cap = std::min<int64_t>(left_ms, c_->options().read_timeout_s * 1000LL / 2);
  size_t i = 0;
  while (i + 1 < kRowSliceCount && kRowSlicesMs[i + 1] <= cap) ++i;
  return c_->sql().row.sliced[i];
}

Status RowScheme::SessionTakeSql(Conn& conn, Clock::time_point deadline, bool expired,
                                 bool first, int* session_wait_s, const std::string** sql,
                                 bool* poll) {
  const RowSql& rs = c_->sql().row;
  const int64_t left_ms = LeftMs(deadline, expired);
  // The first attempt never waits (an uncontended take costs one round
  // trip, as with a per-statement bound); less than a second left is
  // polled, since the session's bound is whole seconds.
  *poll = left_ms < 1000;
  if (first || left_ms < 1000) {
    *sql = &rs.nowait;
    return Status::OK();
  }
  const int64_t cap = std::min<int64_t>(left_ms, c_->options().read_timeout_s * 1000LL / 2);
  const int wait_s = static_cast<int>(std::max<int64_t>(1, cap / 1000));
  if (wait_s != *session_wait_s) {
    ExecResult r;
    Status s = conn.Exec(rs.set_wait, {Param::Int(wait_s)}, &r);
    if (!s.ok()) return s;
    *session_wait_s = wait_s;
  }
  *sql = &rs.take;
  return Status::OK();
}

Status RowScheme::RestoreWait(Conn& conn, int* session_wait_s) {
  if (*session_wait_s == 0) return Status::OK();
  *session_wait_s = 0;
  ExecResult r;
  Status s = conn.Exec(c_->sql().row.restore_wait, {}, &r);
  if (!s.ok()) conn.MarkTainted();
  return s;
}

Status RowScheme::Take(Clock::time_point deadline, CancelToken cancel) {
  auto stop = [&] { return cancel.cancelled(); };
  PooledConn conn;
  // One clock read for the connection's wait and for whether this is a
  // single attempt (a zero wait: then no later step reads it either).
  const auto now = Clock::now();
  const bool expired = now >= deadline;
  Status s = c_->GetConn(deadline, &conn, stop, ConnectBy::kWait, now);
  if (s.code() == Code::kCancelled) return Cancelled();
  if (!s.ok()) return s;
  bool force_check = false;
  const auto retry_until = c_->RetryUntil(deadline);
  const bool by_session = c_->sql().row.sliced.empty();
  int session_wait_s = 0;  // what set_wait put on the session (0: its own)
  auto rollback = [&] {
    if (!conn->broken()) {
      (void)RestoreWait(*conn, &session_wait_s);
      (void)conn->Query("ROLLBACK");
    }
  };
  for (int round = 0;; ++round) {
    s = EnsureRow(*conn, force_check);
    if (s.ok()) s = conn->Query(start_sql_);
    if (!s.ok()) {
      // Nothing is held yet: a connection that failed here is replaced.
      if (!conn->broken() || round >= 3 || Clock::now() >= retry_until) return s;
      conn.Reset();
      s = c_->GetConn(deadline, &conn, stop);
      if (s.code() == Code::kCancelled) return Cancelled();
      if (!s.ok()) return s;
      continue;
    }
    bool missing = false;
    int64_t poll_ms = kPollMinMs;
    for (bool first = true;; first = false) {
      const std::string* sql = nullptr;
      bool poll = false;
      if (!by_session) {
        sql = &TakeSql(deadline, expired);
      } else {
        s = SessionTakeSql(*conn, deadline, expired, first, &session_wait_s, &sql, &poll);
        if (!s.ok()) {
          rollback();
          return s;
        }
      }
      ExecResult r;
      if (!host_->EnterServerWait(*conn, cancel)) {
        rollback();
        return Cancelled();
      }
      s = conn->Exec(*sql, key_param_, &r);
      host_->LeaveServerWait();
      if (cancel.cancelled()) {
        rollback();
        return Cancelled();
      }
      if (s.ok()) {
        if (r.rows.size() == 1) {
          // The caller's statements run on this session: with its own wait.
          s = RestoreWait(*conn, &session_wait_s);
          if (!s.ok()) {
            rollback();
            return s;
          }
          conn_ = std::move(conn);
          return s;
        }
        missing = true;  // the row was deleted behind our back
        break;
      }
      const unsigned err = static_cast<unsigned>(s.server_errno());
      if (err == ER_LOCK_WAIT_TIMEOUT || err == ER_STATEMENT_TIMEOUT || err == ER_QUERY_INTERRUPTED ||
          err == kErLockNowait) {
        if (!expired && Clock::now() < deadline) {  // next slice
          if (poll) {
            auto& wq = c_->waiters();
            wq.Sleep(db_key_, wq.Releases(db_key_),
                     std::min(deadline, Clock::now() + std::chrono::milliseconds(poll_ms)), stop);
            poll_ms = std::min(poll_ms * 2, kPollMaxMs);
          }
          continue;
        }
        rollback();
        return Busy();
      }
      if (err == ER_LOCK_DEADLOCK) break;  // rolled back by the server: start again
      rollback();
      return s;
    }
    // A missing row (the locking read matched nothing and may have locked a
    // gap) or a deadlock: end the transaction, re-create the row, again.
    s = RestoreWait(*conn, &session_wait_s);
    if (s.ok()) s = conn->Query("ROLLBACK");
    if (!s.ok()) return s;
    if (Clock::now() >= deadline && !missing) return Busy();
    force_check = missing;
    if (round > 20)
      return Status(Code::kDb, "row lock " + name_ + ": the lock row keeps disappearing");
  }
}

Status RowScheme::EnsureRow(Conn& conn, bool force_check) {
  if (!force_check && c_->RowKnown(db_key_)) return Status::OK();
  ExecResult r;
  // A plain (consistent, non-locking) read first: INSERT IGNORE on an
  // existing row would wait for its holder.
  const RowSql& rs = c_->sql().row;
  Status s = conn.Exec(rs.exists, {Param::Bytes(db_key_)}, &r);
  if (!s.ok()) return s;
  if (r.rows.empty()) {
    if (rs.sliced.empty()) {  // bounded by the session: a second, then its own again
      int wait_s = 1;
      s = conn.Exec(rs.set_wait, {Param::Int(wait_s)}, &r);
      if (!s.ok()) return s;
      s = conn.Exec(rs.create, {Param::Bytes(db_key_)}, &r);
      Status back = RestoreWait(conn, &wait_s);
      if (s.ok() || s.server_errno() == ER_LOCK_WAIT_TIMEOUT) s = back;
    } else {
      s = conn.Exec(rs.create, {Param::Bytes(db_key_)}, &r);
    }
    // 1205: someone created it and holds it already; it exists, which is all
    // we need.
    if (!s.ok() && s.server_errno() != ER_LOCK_WAIT_TIMEOUT) return s;
  }
  c_->NoteRow(db_key_);
  return Status::OK();
}

void RowScheme::Abandon(const std::string& /*owner*/) {
  if (!conn_) return;
  if (!conn_->broken()) (void)conn_->Query("ROLLBACK");
  conn_.Reset();
}

Status RowScheme::Lost(const std::string& why, const Status& cause, const std::string& more) {
  conn_.Reset();
  return Status(Code::kLost, "lock " + name_ + " was lost: " + host_->MarkLost(why) + more,
                cause.server_errno());
}

Status RowScheme::Renew(const std::string&, Clock::time_point, uint64_t,
                        Clock::time_point* deadline) {
  *deadline = Clock::time_point::max();
  Status s = conn_->Ping();
  if (s.ok()) return s;
  return Lost("the lock's connection died (the server rolled back and released the row lock)", s);
}

Status RowScheme::Release(const std::string&, uint64_t, bool commit, bool lost, bool* freed) {
  *freed = false;
  if (lost) {
    // The server ended the session (the lock saw it closed): nothing to end.
    if (conn_) {
      conn_->MarkBroken();
      conn_.Reset();
    }
    return Status::Lost("lock " + name_ + " was lost: " + host_->LostReason());
  }
  Status s = End(commit ? "COMMIT" : "ROLLBACK");
  *freed = s.ok();
  return s;
}

Status RowScheme::End(const char* how) {
  if (!conn_) return Status::Lost("the lock's connection is gone");
  Status s = conn_->Query(how);
  const bool broken = conn_->broken();
  if (!s.ok() && !broken) (void)conn_->Query("ROLLBACK");  // the session lives: make sure it ends
  conn_.Reset();
  if (s.ok()) return s;
  if (broken) {
    // Unknown only matters when the caller ran statements in the transaction.
    const bool unknown = IsOutcomeUnknown(static_cast<unsigned>(s.server_errno())) &&
                         std::string(how) == "COMMIT" && dirty_;
    const std::string why =
        host_->MarkLost(unknown ? "the connection dropped during COMMIT: whether the statements "
                                  "run on the lock's transaction were committed is unknown"
                                : "the lock's connection died (the server rolled back and "
                                  "released the row lock)");
    return Status(unknown ? Code::kUnknown : Code::kLost, "lock " + name_ + ": " + why,
                  s.server_errno());
  }
  const std::string why =
      host_->MarkLost("the transaction failed at " + std::string(how) + ": " + s.message());
  return Status(s.code(), "lock " + name_ + ": " + why, s.server_errno());
}

Status RowScheme::Exec(const std::string& sql, const std::vector<const std::string*>& params,
                       int64_t* affected) {
  bool open = true;
  Status s = ExecInTransaction(*conn_, c_->sql().session, sql, params, affected, &open);
  if (s.ok()) dirty_ = true;
  if (conn_->broken())
    return Lost("the lock's connection died (the server rolled back and released the row lock)",
                s, "; " + s.message());
  if (open) return s;
  return Lost(s.ok() ? "the statement ended the lock's transaction (an implicit commit), which "
                       "released the row lock"
                     : "the server rolled the lock's transaction back (" + s.message() +
                           "), which released the row lock",
              s);
}

}  // namespace

std::unique_ptr<Scheme> MakeRowScheme(const SchemeArgs& a) { return std::make_unique<RowScheme>(a); }

}  // namespace dlock
