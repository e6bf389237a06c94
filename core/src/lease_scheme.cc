// The lease scheme: a lock is a row with an owner and an expiry by the
// database's clock (the article's scheme 1, with fencing tokens). Acquire,
// renew and release are one statement each (lease_ops.cc runs them with the
// retry rules); this file decides when to run them, waits for a busy lease
// (in line with this process's other waiters, woken by the holder's
// wake-up name), and keeps the lock's own connection for a transaction
// that commits with the release (A7).
#include <mysqld_error.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "client_impl.h"
#include "lease_ops.h"
#include "retry.h"
#include "scheme.h"

namespace dlock {

namespace {

// Back-off between polls of a busy lease: starts small so a short hold is
// noticed soon, grows so a long one costs the database little, and never
// sleeps past the moment the database said the lease ends.
constexpr int64_t kPollMinUs = 2000;
constexpr int64_t kPollMaxUs = 200000;

// The claim order (Galera, fair=1). A wake-up name is node-local there, so
// a release could wake only its own node's waiters, which would then take
// every handoff (measured: 435 / 0 / 0 acquisitions per node). Instead the
// head of each process's line claims a place (since when it waits) in the
// claim table, and a free lease goes to the oldest live claim. The acquire
// statement tells a head whether it is first in line: the first polls
// kClaimPollFirstUs apart for kClaimFastFor after it became first, so the
// handoff of a short hold costs about half that plus the replicated
// statements; then, and the others always, at most kClaimPollMaxUs apart
// (one fast poller per key however many wait, and for a long hold some 200
// fast polls, not one every ms of it). A claim is kept alive
// every kClaimKeep and dies kClaimWindowUs after its last keep-alive: what
// a waiter that died costs the others, never a ttl. The winner's claim is
// deleted by the client's unclaimer thread, off the winner's path (a
// replicated commit less between a handoff and the work).
constexpr int64_t kClaimPollFirstUs = 1000;
constexpr auto kClaimFastFor = std::chrono::milliseconds(200);
constexpr int64_t kClaimPollMaxUs = 5000;
constexpr auto kClaimKeep = std::chrono::milliseconds(150);

int64_t JitterUs(int64_t us) {
  thread_local std::minstd_rand rng(std::random_device{}());
  std::uniform_int_distribution<int64_t> d(us * 3 / 4, us + us / 4);
  return d(rng);
}

// The wake-up name of a lease row (GET_LOCK): a hint for waiters, never
// exclusion.
std::string WakeName(const std::string& table, const std::string& db_key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(KeyHash(db_key)));
  return "dlock:" + table + ":" + hex;
}

class LeaseScheme final : public Scheme {
 public:
  explicit LeaseScheme(const SchemeArgs& a)
      : c_(a.client),
        host_(a.host),
        key_(a.key),
        db_key_(a.db_key),
        name_(a.name),
        wake_name_(WakeName(a.client->options().table, a.db_key)),
        opts_(a.opts),
        pid_(getpid()) {}
  ~LeaseScheme() override {
    if (getpid() == pid_) DropWakeName();
  }

  bool expires() const override { return true; }
  bool hold_is_transaction() const override { return false; }
  Status Acquire(Clock::time_point deadline, CancelToken cancel, Grant* out) override;
  void Abandon(const std::string& owner) override;
  Status Renew(const std::string& owner, Clock::time_point acquired_at, uint64_t token,
               Clock::time_point* deadline) override;
  Status Release(const std::string& owner, uint64_t token, bool commit, bool lost,
                 bool* freed) override;
  bool CanHandOver() const override;
  Status HandOver(const std::string& owner, uint64_t token, const std::string& next_owner, Grant* next,
                  bool* handed, bool* freed) override;
  Status Begin() override;
  Status Rollback() override;
  Status Exec(const std::string& sql, const std::vector<const std::string*>& params,
              int64_t* affected) override;
  Conn* SessionConn() override { return nullptr; }  // a lease outlives its connections
  int64_t BusyRemainingUs() const override { return busy_remaining_us_.load(); }
  void AbandonAfterFork() override { own_conn_.Abandon(); }

 private:
  Status Cancelled() const {
    return Status(Code::kCancelled, "waiting for lock " + name_ + " was cancelled");
  }
  Status Busy() const { return Status::Busy("lock " + name_ + " is held by someone else"); }
  // One acquire statement (on the lock's own connection if it has one).
  // OK with *won false: busy (the holder's time left is noted).
  Status Attempt(Clock::time_point deadline, CancelToken cancel, Grant* out, bool* won,
                 bool ordered);
  // How the head of the line waits between attempts.
  struct Pause {
    bool first = true;  // the first wait polls at once
    bool ordered = false;  // the claim order: polls at most kClaimPollMaxUs apart
    int64_t backoff_us = kPollMinUs;
    uint64_t releases_seen = 0;
    Clock::time_point first_since{};  // since when first in the claim order ({}: not first)
  };
  // This acquisition's claim (the claim order), kept alive while it waits.
  struct Claim {
    bool held = false;
    Clock::time_point kept{};
  };
  // Never fails the acquisition: a claim that could not be kept only costs
  // this waiter its place (it polls on and claims again).
  void KeepClaim(const std::string& owner, Clock::time_point deadline, CancelToken cancel, Claim* c);
  void DropClaim(const std::string& owner, Claim* c);
  // Waits until the holder is likely gone: its wake-up name, a local
  // release, or the back-off.
  Status AwaitHolder(Clock::time_point deadline, CancelToken cancel, Pause* p);
  // Waits for the wake-up name on conn (GET_LOCK), at most until `until`;
  // *got: we have it.
  Status GetWakeName(Conn& conn, Clock::time_point until, CancelToken cancel, bool* got);
  void DropWakeName();
  Status EndTxn(const char* how);
  // The transaction on own_conn_ ended: the connection goes back to the
  // pool unless it keeps the wake-up name for the rest of the hold.
  void TxnOver();
  // The release statement(s): *business is what the caller's transaction
  // came to (A7); *freed: our live lease is free now; *ours: the row was
  // still ours (false: someone else's now; left alone).
  Status ReleaseDb(const std::string& owner, Status* business, bool* freed, bool* ours);
  // What a release's outcome means for the caller (Release, HandOver).
  Status Conclude(Status s, const Status& business, const std::string& owner, uint64_t token,
                  bool lost, bool ours, bool* freed);

  ClientImpl* const c_;
  LockHost* const host_;
  const std::string key_, db_key_, name_, wake_name_;
  const LockOptions opts_;
  const pid_t pid_;
  std::atomic<int64_t> busy_remaining_us_{-1};
  PooledConn own_conn_;         // the lock's own connection, when it needs one
  bool has_wake_name_ = false;  // own_conn_ holds the wake-up name
  bool txn_open_ = false;       // Begin() opened a transaction on own_conn_
  // The owner of an acquire statement that a cancel cut off in flight
  // (empty: none since this object last won). The server may still run that
  // statement after the cancelled call returned, even after the holder's
  // release, and take the lease for that owner; the next acquisitions of
  // this object go on as that owner, so that such a lease is theirs to take
  // (a repeat of their own attempt) rather than nobody's until its ttl.
  // Touched by the acquiring thread only (one at a time per lock).
  std::string cut_owner_;
  // The last busy reply of the claim order said this head is first in
  // line (it polls kClaimPollFirstUs apart). Touched by the acquiring
  // thread only.
  bool first_claim_ = false;
};

Status LeaseScheme::Acquire(Clock::time_point deadline, CancelToken cancel, Grant* out) {
  out->owner = cut_owner_.empty() ? c_->NewOwner() : cut_owner_;
  busy_remaining_us_.store(-1);
  WaitQueues& wq = c_->waiters();
  bool won = false;
  // Uncontended: one statement. When this process saw the key busy a moment
  // ago (or has threads queued on it), go straight to the line instead.
  const bool ordered = opts_.fair && c_->server().galera;
  if (!wq.GetHint(db_key_).contended) {
    Status s = Attempt(deadline, cancel, out, &won, ordered);
    if (!s.ok() || won) return s;
    if (Clock::now() >= deadline) return Busy();
  }
  // Threads of this process wait in line; only the head talks to the
  // database, and between attempts it waits for the holder to go. On
  // Galera with fair=1 the head also keeps a claim (the claim order).
  QueuePlace place(wq, db_key_);
  Pause pause;
  pause.ordered = ordered;
  Claim claim;
  for (;;) {
    if (!place.WaitHead(deadline, [&] { return cancel.cancelled(); })) {
      DropClaim(out->owner, &claim);
      return cancel.cancelled() ? Cancelled() : Busy();
    }
    Status s = AwaitHolder(deadline, cancel, &pause);
    if (s.ok()) s = Attempt(deadline, cancel, out, &won, ordered);
    if (s.ok() && !won && ordered && Clock::now() < deadline)
      KeepClaim(out->owner, deadline, cancel, &claim);
    if (s.ok() && won) {
      // Out of line: our claim would keep the lease for us after we
      // release. The client's unclaimer deletes it, meanwhile we work.
      DropClaim(out->owner, &claim);
      // Keep the name (if we have it) for the whole hold: our release will
      // wake the next waiter. Its connection leaves the pool's budget, so a
      // held lease costs the client no pool slot; when `pool` such
      // connections are out already, the name goes back (our waiters then
      // poll). And remember the key is contended, so this process's next
      // attempt queues rather than racing the woken waiter.
      wq.NoteContended(db_key_);
      if (!has_wake_name_ || !own_conn_.LeaveBudget()) DropWakeName();
      return s;
    }
    if (s.ok() && Clock::now() >= deadline) s = Busy();
    if (!s.ok()) {
      DropClaim(out->owner, &claim);
      DropWakeName();
      return s;
    }
  }
}

void LeaseScheme::KeepClaim(const std::string& owner, Clock::time_point deadline, CancelToken cancel,
                            Claim* c) {
  const auto now = Clock::now();
  if (c->held && now - c->kept < kClaimKeep) return;
  c->held = true;  // before it is sent: a claim whose reply was lost is dropped too
  Status s = LeaseClaim(*c_, db_key_, owner, kClaimWindowUs, deadline, own_conn_ ? &*own_conn_ : nullptr,
                        [&] { return cancel.cancelled(); });
  if (s.ok()) c->kept = now;
}

void LeaseScheme::DropClaim(const std::string& owner, Claim* c) {
  if (!c->held) return;
  c->held = false;
  // On the client's unclaimer thread: neither a winner's work nor a cancel
  // (which must not wait on a server that may not answer) waits for it. A
  // claim it could not delete dies by its window. (An owner reused after a
  // cut-off attempt may claim again before that delete lands; it then only
  // loses its place in line until its next keep-alive.)
  c_->UnclaimSoon(db_key_, owner);
}

Status LeaseScheme::Attempt(Clock::time_point deadline, CancelToken cancel, Grant* out, bool* won,
                            bool ordered) {
  LeaseAttempt a;
  // A cancel shuts the socket of the statement in flight, as for a row
  // wait: immediate also when the server does not answer.
  bool sent = false;  // a statement went out before the cancel
  const ServerWait wait{[&](Conn& conn) {
                          if (!host_->EnterServerWait(conn, cancel)) return false;
                          sent = true;
                          return true;
                        },
                        [&] { host_->LeaveServerWait(); }};
  Status s = LeaseAcquire(*c_, db_key_, out->owner, opts_.ttl_ms, deadline,
                              own_conn_ ? &*own_conn_ : nullptr, &a,
                              [&] { return cancel.cancelled(); }, &wait, ordered);
  // Cancelled, also when that cut the statement off in flight (its outcome
  // unknown): a server that did not answer cannot be asked to give back
  // what it may have taken without holding the cancel up for its
  // timeouts, so that lease, if taken, is this object's next acquisition's
  // to take (cut_owner_), or runs out by its ttl (dlock.h).
  if (s.code() == Code::kCancelled || (!s.ok() && cancel.cancelled())) {
    if (sent) cut_owner_ = out->owner;
    return Cancelled();
  }
  if (s.code() == Code::kUnknown) cut_owner_ = out->owner;  // dropped in flight: the same
  // Deadlocks (1213) outlasted the wait: not acquired within the time.
  if (s.code() == Code::kBusy) return Status(Code::kBusy, "lock " + name_ + ": " + s.message(), s.server_errno());
  if (!s.ok()) return s;
  *won = a.won;
  if (a.won) {
    // Whatever a cut statement of this owner did, this win took it over.
    cut_owner_.clear();
    out->fence = a.fence;
    out->acquired_at = a.sent_at;
    out->deadline = a.sent_at + LeaseSpan(opts_.ttl_ms);
  } else {
    first_claim_ = a.first_claim;
    c_->waiters().NoteBusy(db_key_, a.remaining_us);
    busy_remaining_us_.store(a.remaining_us);
  }
  return Status::OK();
}

Status LeaseScheme::AwaitHolder(Clock::time_point deadline, CancelToken cancel, Pause* p) {
  auto stop = [&] { return cancel.cancelled(); };
  WaitQueues& wq = c_->waiters();
  if (p->first) p->releases_seen = wq.Releases(db_key_);
  const auto now = Clock::now();
  const auto expiry = wq.GetHint(db_key_).expiry_estimate;
  // The holder's wake-up name (GET_LOCK) is given up right after its
  // release, so a handoff costs no polling. A holder that does not take
  // part (or is gone) is outlived by capping that wait at the lease's end;
  // then, and without the name, poll with a growing back-off.
  if (opts_.wakeup == Wakeup::kAuto && c_->wakeup_supported() && !has_wake_name_) {
    if (!own_conn_) {
      Status s = c_->GetConn(deadline, &own_conn_, stop);
      if (s.code() == Code::kCancelled) return Cancelled();
      if (!s.ok() && s.code() != Code::kPool) return s;  // no connection free: poll instead
    }
    if (own_conn_) {
      // Until the holder's lease ends by the server's word (a paused holder
      // keeps the name but not the lease); without that word, a second at
      // most, then ask the server.
      auto until = expiry == Clock::time_point{}
                       ? now + std::chrono::seconds(1)
                       : std::max(expiry + std::chrono::milliseconds(50),
                                  now + std::chrono::milliseconds(20));
      Status s = GetWakeName(*own_conn_, std::min(until, deadline), cancel, &has_wake_name_);
      if (!s.ok() && (s.code() == Code::kCancelled || !own_conn_->broken())) return s;
      if (!s.ok()) {
        own_conn_.Reset();  // dropped: the next round takes a fresh connection
        has_wake_name_ = false;
      }
    }
  } else if (!p->first) {
    // In the claim order a lease can be free and still not ours (kept for
    // an older claim, reported as 0 us left): the back-off alone decides.
    if (!p->ordered || !first_claim_) p->first_since = {};
    else if (p->first_since == Clock::time_point{}) p->first_since = now;
    const bool fast = p->first_since != Clock::time_point{} && now - p->first_since < kClaimFastFor;
    const int64_t us = fast ? kClaimPollFirstUs : p->backoff_us;
    auto until = std::min(now + std::chrono::microseconds(JitterUs(us)), deadline);
    if (!p->ordered) until = std::min(until, std::max(expiry, now + std::chrono::microseconds(500)));
    wq.Sleep(db_key_, p->releases_seen, until, stop);
    p->backoff_us = std::min(p->backoff_us * 2, p->ordered ? kClaimPollMaxUs : kPollMaxUs);
  }
  p->first = false;
  if (cancel.cancelled()) return Cancelled();
  p->releases_seen = wq.Releases(db_key_);  // a release after this wakes the next sleep
  return Status::OK();
}

Status LeaseScheme::GetWakeName(Conn& conn, Clock::time_point until, CancelToken cancel,
                                bool* got) {
  *got = false;
  const int64_t cap_us = c_->options().read_timeout_s * 1000000LL / 2;
  for (;;) {
    int64_t left_us =
        std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now()).count();
    if (left_us < 0) left_us = 0;
    int64_t slice = std::min(left_us, cap_us);
    ExecResult r;
    if (!host_->EnterServerWait(conn, cancel)) return Cancelled();
    Status s = conn.Exec(c_->sql().lease.get_name, {Param::Bytes(wake_name_), Param::Int(slice)}, &r);
    host_->LeaveServerWait();
    // Noted before the cancel is: a name we got is given back (DropWakeName).
    *got = s.ok() && !r.rows.empty() && r.rows[0][0] && *r.rows[0][0] == "1";
    if (cancel.cancelled()) return Cancelled();
    if (!s.ok()) {
      if (s.server_errno() == ER_QUERY_INTERRUPTED) continue;  // a stale cancel
      return s;
    }
    if (*got) return Status::OK();
    if (slice >= left_us) return Status::OK();  // timed out (0) or refused (NULL)
  }
}

void LeaseScheme::DropWakeName() {
  if (has_wake_name_ && own_conn_ && !own_conn_->broken()) {
    ExecResult r;
    Status s = own_conn_->Exec(c_->sql().lease.release_name, {Param::Bytes(wake_name_)}, &r);
    if (!s.ok()) own_conn_->MarkTainted();  // the pool's reset frees the name
  }
  has_wake_name_ = false;
  if (!txn_open_) own_conn_.Reset();
}

Status LeaseScheme::EndTxn(const char* how) {
  txn_open_ = false;
  Status s = own_conn_ ? own_conn_->Query(how) : Status(Code::kConnect, "no connection");
  TxnOver();
  return s;
}

void LeaseScheme::TxnOver() {
  // A session the caller's statements ran on is not kept even for the
  // name: the hold's own statements (its release) must not run in what the
  // caller left there (a SET timestamp would misjudge the lease's expiry).
  // Its waiters then poll.
  if (!has_wake_name_ || !own_conn_ || own_conn_->NeedsReset()) DropWakeName();
}

void LeaseScheme::Abandon(const std::string& owner) {
  if (txn_open_) (void)EndTxn("ROLLBACK");
  // Frees the row if it is still ours by the database clock; leaves it
  // alone otherwise.
  bool released = false, ours = false;
  (void)LeaseRelease(*c_, db_key_, owner, own_conn_ ? &*own_conn_ : nullptr, &released, &ours);
  DropWakeName();
}

Status LeaseScheme::Renew(const std::string& owner, Clock::time_point acquired_at, uint64_t token,
                          Clock::time_point* deadline) {
  if (opts_.max_hold_ms > 0 &&
      Clock::now() - acquired_at >= std::chrono::milliseconds(opts_.max_hold_ms)) {
    c_->counters().max_hold_trips.fetch_add(1);
    c_->Raise(EventType::kMaxHold, Severity::kCritical, key_, owner, token,
              "renew refused: max hold time of " + std::to_string(opts_.max_hold_ms) +
                  " ms reached");
    return Status(Code::kMaxHold, "lock " + name_ + ": max hold time of " +
                                      std::to_string(opts_.max_hold_ms) +
                                      " ms reached; renewal refused, the lease will expire");
  }
  bool renewed = false;
  Clock::time_point sent;
  Status s = LeaseRenew(*c_, db_key_, owner, opts_.ttl_ms, &renewed, &sent);
  if (!s.ok()) return s;
  if (!renewed) {
    const std::string why = host_->MarkLost(
        "the lease had expired by the database clock or another owner took it");
    return Status::Lost("lock " + name_ + " was lost: " + why);
  }
  c_->counters().renewals.fetch_add(1);
  *deadline = sent + LeaseSpan(opts_.ttl_ms);
  return Status::OK();
}

Status LeaseScheme::ReleaseDb(const std::string& owner, Status* business, bool* freed, bool* ours) {
  *business = Status::OK();
  *freed = *ours = false;
  Status s;
  if (txn_open_) {
    // A7: the release joins the caller's transaction; both commit or neither.
    ExecResult r;
    s = own_conn_->Exec(c_->sql().lease.release, {Param::Bytes(db_key_), Param::Bytes(owner)}, &r);
    if (s.ok()) {
      ReadRelease(r, freed, ours);
      *business = EndTxn(*freed ? "COMMIT" : "ROLLBACK");
      if (business->ok() && !*freed)
        *business = Status(Code::kLost, "the lease was lost, so the transaction was rolled back");
      else if (!business->ok() && IsOutcomeUnknown(static_cast<unsigned>(business->server_errno())))
        *business = Status(Code::kUnknown, "the connection dropped during COMMIT: whether the "
                                           "transaction (and the release) committed is unknown",
                           business->server_errno());
    } else {
      (void)EndTxn("ROLLBACK");
      *business = s.code() == Code::kUnknown
                      ? s
                      : Status(s.code(), "the transaction was rolled back: " + s.message(),
                               s.server_errno());
      // Still release the lease itself, outside the transaction.
      s = LeaseRelease(*c_, db_key_, owner, nullptr, freed, ours);
    }
  } else if (has_wake_name_ && own_conn_ && !own_conn_->broken()) {
    ExecResult r;
    s = own_conn_->Exec(c_->sql().lease.release_and_wake,
                        {Param::Bytes(wake_name_), Param::Bytes(db_key_), Param::Bytes(owner)}, &r);
    if (s.ok()) {
      ReadRelease(r, freed, ours);
      if (*ours) has_wake_name_ = false;  // given up inside the statement
    } else {  // dropped: the retrying path re-checks on a fresh connection
      s = LeaseRelease(*c_, db_key_, owner, nullptr, freed, ours);
    }
  } else {
    s = LeaseRelease(*c_, db_key_, owner, own_conn_ ? &*own_conn_ : nullptr, freed, ours);
  }
  DropWakeName();
  if (!s.ok()) *freed = false;
  return s;
}

Status LeaseScheme::Release(const std::string& owner, uint64_t token, bool commit, bool lost,
                            bool* freed) {
  if (!commit && txn_open_) (void)EndTxn("ROLLBACK");  // a close does not commit
  Status business;
  bool ours = false;
  Status s = ReleaseDb(owner, &business, freed, &ours);
  return Conclude(s, business, owner, token, lost, ours, freed);
}

bool LeaseScheme::CanHandOver() const {
  // The hold keeps the wake-up name (so waiters elsewhere block on it and
  // the statement can tell whether any does), its release commits
  // nothing of the caller's, and replicas replay it by its rows (conn.h).
  return opts_.fair && has_wake_name_ && own_conn_ && !own_conn_->broken() && !own_conn_->NeedsReset() &&
         !txn_open_ && !own_conn_->server().statement_binlog;
}

Status LeaseScheme::HandOver(const std::string& owner, uint64_t token, const std::string& next_owner,
                             Grant* next, bool* handed, bool* freed) {
  *handed = *freed = false;
  bool ours = false;
  ExecResult r;
  const auto sent = Clock::now();
  const Param name = Param::Bytes(wake_name_), to = Param::Bytes(next_owner);
  Status s = own_conn_->Exec(c_->sql().lease.hand_over,
                             {name, name, name, to, to, to, to, Param::Int(opts_.ttl_ms * 1000),
                              Param::Bytes(db_key_), Param::Bytes(owner)},
                             &r);
  if (s.ok()) {
    ours = r.affected == 1;
    if (ours && r.insert_id >= 2) {
      // Passed on: the name stays with this connection, for the next hold.
      *handed = *freed = true;
      busy_remaining_us_.store(-1);  // the next hold's attempt was not busy
      next->owner = next_owner;
      next->fence = r.insert_id;
      next->acquired_at = sent;
      next->deadline = sent + LeaseSpan(opts_.ttl_ms);
      return Status::OK();
    }
    *freed = ours && r.insert_id == 1;
    if (ours) has_wake_name_ = false;  // given up inside the statement
  } else {
    // Dropped: the statement may have released the lease, passed it on, or
    // done nothing. The retrying path finds out on a fresh connection; a
    // lease that was passed on (to an owner nobody else has) is given back.
    s = LeaseRelease(*c_, db_key_, owner, nullptr, freed, &ours);
    if (s.ok() && !ours) {
      bool next_freed = false, next_ours = false;
      if (LeaseRelease(*c_, db_key_, next_owner, nullptr, &next_freed, &next_ours).ok() && next_ours)
        ours = *freed = true;
    }
  }
  DropWakeName();
  if (!s.ok()) *freed = false;
  return Conclude(s, Status::OK(), owner, token, /*lost=*/false, ours, freed);
}

Status LeaseScheme::Conclude(Status s, const Status& business, const std::string& owner, uint64_t token,
                             bool lost, bool ours, bool* freed) {
  if (s.ok() && !ours) {
    c_->Raise(EventType::kReleaseGone, Severity::kWarning, key_, owner, token,
              "release found the lease taken by another owner (its row was left alone)");
    s = Status::Lost("another owner holds it now (its row was left alone)");
  } else if (s.ok() && !*freed) {
    s = Status::Lost("the lease had expired before release");
  } else if (s.ok() && lost) {  // freed, but too late: our clock had run out
    s = Status::Lost("its lease ran out before it was renewed");
  }
  if (s.ok() && !business.ok()) s = business;
  if (s.ok()) return s;
  if (s.code() == Code::kLost) {
    return Status(Code::kLost,
                  "lock " + name_ + " was lost before release: " + host_->MarkLost(s.message()));
  }
  if (s.code() == Code::kUnknown || !*freed) {
    const std::string why =
        s.code() == Code::kUnknown
            ? s.message()
            : "the release failed (" + s.message() +
                  "); the lease may still be held by this owner until it expires";
    (void)host_->MarkLost(why);
    if (s.code() == Code::kUnknown) return s;
    return Status(s.code(), "lock " + name_ + ": release failed, state is LOST (the lease may "
                                "stay taken until it expires): " + s.message(),
                  s.server_errno());
  }
  return s;  // the lease is free; the business part failed
}

Status LeaseScheme::Begin() {
  if (txn_open_) return Status::StateError("lock " + name_ + " already has an open transaction");
  if (!own_conn_) {
    Status s = c_->GetConn(Clock::now(), &own_conn_, nullptr, ConnectBy::kPerNode);
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

Status LeaseScheme::Rollback() {
  if (!txn_open_)
    return Status::StateError("lock " + name_ + " has no open transaction (call begin first)");
  return EndTxn("ROLLBACK");  // the lease stays held
}

Status LeaseScheme::Exec(const std::string& sql, const std::vector<const std::string*>& params,
                         int64_t* affected) {
  if (!txn_open_)
    return Status::StateError("exec on a lease lock needs begin() first (A7: the release then "
                              "commits with the transaction)");
  bool open = true;
  Status s = ExecInTransaction(*own_conn_, c_->sql().session, sql, params, affected, &open);
  if (own_conn_->broken()) return s;  // release finds out, and rolls the transaction back
  if (open) return s;
  txn_open_ = false;
  TxnOver();
  const std::string why = s.ok() ? "the statement ended the lock's transaction (an implicit commit)"
                                 : "the server rolled the lock's transaction back (" + s.message() + ")";
  return Status(s.ok() ? Code::kState : s.code(),
                "lock " + name_ + ": " + why + "; the lease is still held, but what ran before "
                "is no longer tied to its release (begin again)",
                s.server_errno());
}

}  // namespace

std::unique_ptr<Scheme> MakeLeaseScheme(const SchemeArgs& a) {
  return std::make_unique<LeaseScheme>(a);
}

}  // namespace dlock
