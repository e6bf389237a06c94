#include <errmsg.h>
#include <mysqld_error.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <cstring>
#include <cstdio>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include "client_impl.h"
#include "dlock/core.hpp"
#include "lock_impl.h"
#include "txn_enders.h"

namespace dlock {

namespace {

// Waits on our own condition variables are sliced so Cancel() and expiry by
// our clock are noticed without anyone notifying.
constexpr auto kSlice = std::chrono::milliseconds(50);

// Lost holds remembered for holders that have not tried again (LockImpl::lost_).
constexpr size_t kMaxLostHolds = 1024;

std::string DbKey(const LockOptions& o, const std::string& key) {
  if (o.shards <= 0) return key;
  return o.shard_group + ":" + std::to_string(KeyHash(key) % static_cast<uint64_t>(o.shards) + 1);
}

std::string NameOf(const std::string& key, const std::string& db_key) {
  std::string n = "'" + QuoteKey(key) + "'";
  if (db_key != key) n += " (shard '" + QuoteKey(db_key) + "')";
  return n;
}

Status CancelledStatus(const std::string& name) {
  return Status(Code::kCancelled, "waiting for lock " + name + " was cancelled");
}

}  // namespace

class LockImpl::SchemeUse {
 public:
  explicit SchemeUse(LockImpl* l) : l_(l) {
    MutexLock g(l_->st_mu_);
    l_->scheme_busy_ = true;
  }
  ~SchemeUse() {
    MutexLock g(l_->st_mu_);
    l_->scheme_busy_ = false;
    l_->session_watch_ = l_->state_ == LockState::kHeld ? l_->scheme_->SessionConn() : nullptr;
  }

 private:
  LockImpl* l_;
};

LockImpl::LockImpl(std::shared_ptr<Client> client, std::string key, LockOptions opts,
                   std::string identity)
    : client_(std::move(client)),
      c_(client_->impl()),
      key_(std::move(key)),
      db_key_(DbKey(opts, key_)),
      name_(NameOf(key_, db_key_)),
      opts_(opts),
      pid_(getpid()),
      identity_(std::move(identity)) {
  SchemeArgs a{c_, this, key_, db_key_, name_, opts_};
  scheme_ = opts_.mode == LockMode::kRow ? MakeRowScheme(a) : MakeLeaseScheme(a);
}

LockImpl::~LockImpl() {
  if (getpid() != pid_) {
    // Forked child: never touch the parent's lock or its connections.
    scheme_->AbandonAfterFork();
    return;
  }
  // Every lock object sharing this lock has closed (Close: no call runs).
  if (!identity_.empty()) c_->shared_locks().Forget(identity_);
  c_->renewer().Remove(this);
  MutexLock op(op_mu_);
  DropHold();
}

void LockImpl::DropHold(const SharesBack* back) {
  bool held, lost;
  std::string owner;
  uint64_t token;
  {
    MutexLock g(st_mu_);
    // Close's check and the mark that the hold is being released are one
    // step: a re-entry through another object in between would be wiped.
    if (back != nullptr) {
      if (back->gen != gen_ || acquiring_) return;  // that hold has ended already
      if (state_ == LockState::kHeld && count_ > back->n) {
        count_ -= back->n;  // other objects (or this thread through them) still hold it
        return;
      }
    }
    held = !acquiring_ && PinnedLocked();
    owner = owner_;
    token = fence_;
    lost = state_ == LockState::kLost;
    if (held) releasing_ = true;
  }
  if (!held) return;
  c_->renewer().Remove(this);
  bool freed = false;
  {
    SchemeUse use(this);
    // Unfinished business is not committed: a close rolls back.
    (void)scheme_->Release(owner, token, /*commit=*/false, lost, &freed);
  }
  {
    MutexLock g(st_mu_);
    if (state_ == LockState::kHeld) state_ = LockState::kIdle;
    count_ = 0;
    released_ = true;
    releasing_ = false;
    HoldEndedLocked();
    session_watch_ = nullptr;
    NotifyLocked();
  }
  c_->waiters().Notify(db_key_);
}

void LockImpl::Close(LockCaller& me) {
  // Close may come while other threads are inside calls through this object
  // (a binding's finalizer, a shutdown path): refuse new calls, cancel the
  // waiting ones and wait until every call has left.
  me.closing.store(true);
  for (;;) {
    Cancel(me);
    MutexLock g(me.mu);
    if (me.calls.load() == 0) break;
    me.cv.wait_for(me.mu, kSlice);
  }
  int n = 0;
  uint64_t gen = 0;
  {
    MutexLock g(st_mu_);
    auto it = taken_.find(&me);
    if (it != taken_.end()) {
      if (it->second.gen == gen_) {
        n = it->second.holds;
        gen = gen_;
      }
      taken_.erase(it);
    }
    // An object's lost hold is its own to see; the object is gone.
    if (opts_.holder == Holder::kLock) lost_.erase(WhoIs(me));
  }
  if (n > 0) ReleaseShares(gen, n);
}

void LockImpl::HoldEndedLocked() {
  for (auto& kv : taken_)
    if (kv.second.gen == gen_) kv.second.holds = 0;
}

void LockImpl::RememberLostLocked(const HolderId& next) {
  if (gen_ == 0 || holder_ == next || state_ != LockState::kLost)
    return;
  lost_[holder_] = LostHold{gen_, owner_, fence_, LostWhyLocked()};
  if (lost_.size() > kMaxLostHolds) {
    auto oldest = lost_.begin();
    for (auto it = lost_.begin(); it != lost_.end(); ++it)
      if (it->second.gen < oldest->second.gen) oldest = it;
    lost_.erase(oldest);
  }
}

LockImpl::View LockImpl::ViewLocked(const LockCaller& me) const {
  View v;
  v.current = true;
  const HolderId who = WhoIs(me);
  if (gen_ != 0 && holder_ == who) return v;
  v.current = false;
  auto lost = lost_.find(who);
  if (lost == lost_.end()) {
    auto t = taken_.find(&me);
    if (t == taken_.end()) return v;  // nothing of its own here: IDLE
    if (t->second.gen == gen_) {
      v.current = true;
      return v;
    }
    lost = lost_.find(t->second.holder);
    if (lost == lost_.end() || lost->second.gen != t->second.gen) {
      v.owner = &t->second.owner;  // that hold was released
      v.token = t->second.token;
      return v;
    }
  }
  v.state = LockState::kLost;
  v.owner = &lost->second.owner;
  v.token = lost->second.token;
  v.why = &lost->second.why;
  return v;
}

Status LockImpl::ActsOnCurrentLocked(const LockCaller& me, const char* what, bool strict) const {
  const HolderId who = WhoIs(me);
  if (gen_ != 0 && holder_ == who) return Status::OK();
  auto lost = lost_.find(who);
  if (lost != lost_.end())
    return Status::Lost("lock " + Name() + " was lost: " + lost->second.why +
                        "; another holder has taken it since");
  if (opts_.holder == Holder::kLock) {
    // This object's own acquisition in another thread: RefuseWhileAcquiring
    // says so. A sibling object's hold (held, being acquired, or lost and
    // not given back yet) is not this one's; nor is one that has ended.
    if (acquiring_ && acquirer_ == &me) return Status::OK();
    if (acquiring_ || PinnedLocked()) return OthersHoldLocked(what);
    return Status::StateError("lock " + Name() + " is not held");
  }
  if (!strict && !who.explicit_id) {
    // A binding whose holders are ids (dlock_try_as) calls this without one.
    auto t = taken_.find(&me);
    if (t != taken_.end() && t->second.holder.explicit_id) {
      if (t->second.gen == gen_) return Status::OK();
      lost = lost_.find(t->second.holder);
      if (lost != lost_.end() && lost->second.gen == t->second.gen)
        return Status::Lost("lock " + Name() + " was lost: " + lost->second.why +
                            "; another holder has taken it since");
    }
  }
  if (state_ == LockState::kHeld || acquiring_) return OthersHoldLocked(what);
  return Status::StateError("lock " + Name() + " is not held by this thread (" + what +
                            " refused)");
}

Status LockImpl::OthersHoldLocked(const char* what) const {
  const bool by_object = opts_.holder == Holder::kLock;
  return Status::StateError("lock " + Name() + (acquiring_ ? " is being acquired by " : " is held by ") +
                            ByWhomLocked(false) + "; with holder=" +
                            (by_object ? "lock only the object" : "thread only the thread") +
                            " that acquired it may " + what + " it");
}

void LockImpl::ReleaseShares(uint64_t gen, int n) {
  MutexLock op(op_mu_);
  const SharesBack back{gen, n};
  DropHold(&back);
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
    me_.calls.fetch_add(1);
    if (me_.closing.load()) {
      Leave();
      refused_ = Status(Code::kCancelled, "lock " + l->Name() + " is being closed");
    }
  }
  ~CallScope() {
    if (refused_.ok()) Leave();
  }
  const Status& refused() const { return refused_; }

 private:
  // Only Close waits for the calls to end; once it sees none it may free
  // me_, so the count's last change is the last touch of me_. While not
  // closing: the decrement alone (a Close that begins right between the
  // look and the decrement sees the call still counted and finds it gone
  // at its next sliced look). While closing: under mu, which Close holds
  // while it looks and until it waits, so it cannot see the end and free
  // me_ before the notify is done, nor miss it.
  void Leave() {
    if (!me_.closing.load()) {
      me_.calls.fetch_sub(1);
      return;
    }
    MutexLock g(me_.mu);
    if (me_.calls.fetch_sub(1) == 1) me_.cv.notify_all();
  }

  LockCaller& me_;
  Status refused_;
};


Status LockImpl::RefuseWhileAcquiringLocked(const LockCaller& me, const char* what) const {
  if (!acquiring_) return Status::OK();
  const bool by_object = opts_.holder == Holder::kLock;
  const char* acquirer = ByWhomLocked(acquirer_ == &me);
  // With holder=lock the hold before this acquisition may be a sibling
  // object's: its loss is that object's to report, never this one's.
  // Its own lost hold is reported as lost also once the acquirer has freed
  // what it left (released_), as it is with no acquisition under way.
  const bool own_hold = !by_object || holder_ == WhoIs(me);
  if (own_hold && (state_ == LockState::kHeld || state_ == LockState::kLost)) {
    std::string why = "lock " + Name() + " was lost: " + LostWhyLocked() + "; " + acquirer +
                      " is acquiring it again";
    if (state_ == LockState::kHeld || !released_)
      why += std::string(", and frees what the lost hold left (no ") + what + " needed)";
    return Status::Lost(why);
  }
  return Status::StateError("lock " + Name() + " is not held: " + acquirer + " is acquiring it (" +
                            what + " refused)");
}

bool LockImpl::EnterServerWait(Conn& conn, CancelToken cancel) {
  MutexLock g(wait_mu_);
  if (cancel.cancelled()) return false;
  wait_conn_ = &conn;
  wait_caller_ = cancel.seq;
  return true;
}

void LockImpl::LeaveServerWait() {
  MutexLock g(wait_mu_);
  wait_conn_ = nullptr;
  wait_caller_ = nullptr;
}

void LockImpl::WatchSessionLocked() const {
  if (state_ != LockState::kHeld || scheme_busy_ || session_watch_ == nullptr ||
      !session_watch_->LooksClosed())
    return;
  session_watch_ = nullptr;
  state_ = LockState::kLost;
  lost_why_ = "the server closed the lock's connection (KILL, wait_timeout or a restart): it "
              "rolled back the transaction and released the row lock";
  c_->counters().lost.fetch_add(1);
  c_->Raise(EventType::kLost, Severity::kCritical, key_, owner_, fence_,
            "row lock lost: " + lost_why_);
  NotifyLocked();
}

HolderId LockImpl::WhoIs(const LockCaller& me) const {
  if (opts_.holder != Holder::kLock) return HolderId::Current();
  HolderId h;
  h.explicit_id = true;  // never compared with a thread's or a binding's: one lock has one kind
  h.id = me.object_id;
  return h;
}

bool LockImpl::IsHolderLocked(const LockCaller& me) const { return holder_ == WhoIs(me); }

LockState LockImpl::StateLocked() const {
  WatchSessionLocked();
  // A hold without expiry (a row lock: deadline_ is max) needs no clock.
  if (state_ == LockState::kHeld && deadline_ != Clock::time_point::max() &&
      Clock::now() >= deadline_)
    return LockState::kLost;
  return state_;
}

std::string LockImpl::LostWhyLocked() const {
  if (state_ == LockState::kHeld) return "its lease ran out before it was renewed";
  return lost_why_;
}

void LockImpl::SetLostLocked(std::string why) {
  if (state_ == LockState::kHeld && Clock::now() >= deadline_)
    why = "its lease ran out before it was renewed";
  state_ = LockState::kLost;
  lost_why_ = std::move(why);
  NotifyLocked();
}

std::string LockImpl::MarkLost(const std::string& why) {
  std::string owner;
  uint64_t token;
  std::string now_why;
  bool was_held;
  {
    MutexLock g(st_mu_);
    was_held = state_ == LockState::kHeld;
    SetLostLocked(why);
    session_watch_ = nullptr;
    owner = owner_;
    token = fence_;
    now_why = lost_why_;
  }
  c_->renewer().Remove(this);
  if (was_held) {  // counted and reported once per hold
    c_->counters().lost.fetch_add(1);
    c_->Raise(EventType::kLost, Severity::kCritical, key_, owner, token, "lock lost: " + now_why);
  }
  return now_why;
}

std::string LockImpl::LostReason() const {
  MutexLock g(st_mu_);
  return LostWhyLocked();
}

LockState LockImpl::CurrentState(const LockCaller& me) const {
  MutexLock g(st_mu_);
  const View v = ViewLocked(me);
  return v.current ? StateLocked() : v.state;
}

namespace {
const std::string kNoOwner;
}  // namespace

std::string LockImpl::Owner(const LockCaller& me) const {
  MutexLock g(st_mu_);
  const View v = ViewLocked(me);
  return v.current ? owner_ : v.owner != nullptr ? *v.owner : kNoOwner;
}

const char* LockImpl::OwnerCstr(const LockCaller& me) const {
  MutexLock g(st_mu_);
  const View v = ViewLocked(me);
  // owner_ changes with the next acquisition, a record's owner when it is
  // forgotten (the holder's next attempt) or replaced (me's next hold).
  return v.current ? owner_.c_str() : v.owner != nullptr ? v.owner->c_str() : "";
}

size_t LockImpl::CopyOwner(const LockCaller& me, char* buf, size_t cap) const {
  MutexLock g(st_mu_);
  const View v = ViewLocked(me);
  const std::string& owner = v.current ? owner_ : v.owner != nullptr ? *v.owner : kNoOwner;
  if (buf != nullptr && cap > 0) {
    size_t n = std::min(owner.size(), cap - 1);
    std::memcpy(buf, owner.data(), n);
    buf[n] = '\0';
  }
  return owner.size();
}

uint64_t LockImpl::Token(const LockCaller& me) const {
  MutexLock g(st_mu_);
  const View v = ViewLocked(me);
  return v.current ? fence_ : v.token;
}

uint64_t LockImpl::Token() const {
  MutexLock g(st_mu_);
  return fence_;
}

int64_t LockImpl::RemainingMs(const LockCaller& me) const {
  if (!scheme_->expires()) return -1;
  MutexLock g(st_mu_);
  if (!ViewLocked(me).current || state_ != LockState::kHeld) return 0;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
  return left > 0 ? left : 0;
}

int LockImpl::HoldCount(const LockCaller& me) const {
  MutexLock g(st_mu_);
  return ViewLocked(me).current && StateLocked() == LockState::kHeld ? count_ : 0;
}

int LockImpl::HoldCountOfCaller(const LockCaller& me) const {
  MutexLock g(st_mu_);
  return StateLocked() == LockState::kHeld && IsHolderLocked(me) ? count_ : 0;
}

uint64_t LockImpl::CancelMark(const LockCaller& me) const { return me.cancel_seq.load(); }

void LockImpl::OnRenewed(const std::string& owner, Clock::time_point deadline) {
  MutexLock g(st_mu_);
  if (state_ == LockState::kHeld && owner_ == owner) deadline_ = deadline;
}

bool LockImpl::OnLost(const std::string& owner, const std::string& why) {
  MutexLock g(st_mu_);
  if (state_ != LockState::kHeld || owner_ != owner) return false;
  SetLostLocked(why);
  return true;
}

void LockImpl::Cancel(LockCaller& me) {
  me.cancel_seq.fetch_add(1);
  {
    MutexLock g(st_mu_);
    cv_.notify_all();
    // Any thread of the claim line may be the cancelled one.
    for (ClaimWaiter* w : claim_line_) w->cv.notify_all();
  }
  c_->waiters().WakeAll(db_key_);
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
  const auto start = Clock::now();
  const auto deadline = WaitDeadline(wait_ms, start);  // wait_ms < 0: no limit
  // Cancels after the caller's mark count, even one that came before this
  // call began (bindings take the mark before they arm their cancel).
  const CancelToken cancel{&me.cancel_seq, cancel_mark ? *cancel_mark : me.cancel_seq.load()};
  Counters& k = c_->counters();
  bool reentered = false;
  bool waited = false;
  std::optional<Grant> handed;
  if (Status s = Claim(me, deadline, cancel, &reentered, &waited, &handed); !s.ok() || reentered)
    return s;
  // We waited in the claim line for another thread of this process: the
  // key is contended, so the scheme goes through its wake-up path (a lease
  // takes the wake-up name and keeps it for the hold, so that waiters in
  // other processes are woken by our release instead of polling).
  if (waited) c_->waiters().NoteContended(db_key_);
  {
    // Wait for an operation already running on the lock's connections (a
    // release, a renew); from now on every other call refuses to touch them
    // (RefuseWhileAcquiringLocked) until this acquisition is over.
    MutexLock op(op_mu_);
    DropLostHold();
  }

  Grant grant;
  Status s;
  if (handed) grant = std::move(*handed);  // passed on by the last holder's release
  else s = scheme_->Acquire(deadline, cancel, &grant);
  // Read before Settle: no other acquisition runs on the scheme till then.
  me.busy_us.store(s.code() == Code::kBusy ? scheme_->BusyRemainingUs() : -1);
  if (cancel.cancelled()) {
    // Cancelled, whatever else happened: a lock won in the race with the
    // cancel is given back at once, so no binding has to undo it.
    // So is one whose last attempt was cut off in flight (it may have won).
    if (s.ok() || s.code() == Code::kUnknown) {
      scheme_->Abandon(grant.owner);
      c_->waiters().Notify(db_key_);
    }
    s = CancelledStatus(Name());
  }
  const auto done = Clock::now();
  k.wait_ms.fetch_add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(done - start).count()));
  if (s.ok() && grant.acquired_at == Clock::time_point{}) grant.acquired_at = done;
  Settle(me, s, grant);
  if (s.ok() && opts_.transaction && !scheme_->hold_is_transaction()) {
    // Acquire + begin as one step: the caller never holds a lock whose
    // transaction failed to open.
    Status b = Begin(me);
    if (!b.ok()) {
      (void)Release(me);
      return b;
    }
  }
  if (s.ok()) {
    k.acquisitions.fetch_add(1);
    if (scheme_->expires() && opts_.auto_renew)
      c_->renewer().Add(this, db_key_, grant.owner, opts_.ttl_ms, opts_.max_hold_ms,
                        grant.acquired_at, grant.deadline);
  } else if (s.code() == Code::kBusy) {
    k.busy.fetch_add(1);
  }
  return s;
}

void LockImpl::NotifyLocked() const {
  // Waiters wait with st_mu_ held until the wait releases it, so none is
  // missed; none waiting (the uncontended cycle) spares the condition
  // variable's own mutex.
  if (cv_waiters_ > 0) cv_.notify_all();
  if (!claim_line_.empty()) claim_line_.front()->cv.notify_one();
}

void LockImpl::LeaveClaimLineLocked(ClaimWaiter* w) {
  const bool was_first = claim_line_.front() == w;
  claim_line_.erase(std::find(claim_line_.begin(), claim_line_.end(), w));
  if (was_first && !claim_line_.empty()) claim_line_.front()->cv.notify_one();
}

const char* LockImpl::ByWhomLocked(bool own) const {
  if (opts_.holder != Holder::kLock) return "another thread of this client";
  return own ? "this lock object (in another thread)" : "another lock object of this client";
}

std::string LockImpl::BusyWhyLocked(const LockCaller& me) const {
  if (releasing_)
    return std::string(" is being released by ") + ByWhomLocked(holder_ == WhoIs(me)) +
           ", still at the end of the wait";
  if (acquiring_) return std::string(" is being acquired by ") + ByWhomLocked(acquirer_ == &me);
  // state_, not StateLocked(): a lease that runs out by our clock right now
  // is still what the claim found.
  if (state_ == LockState::kHeld) return std::string(" is held by ") + ByWhomLocked(false);
  return " is promised to callers of this client that came first (fair=1)";
}

Status LockImpl::Claim(LockCaller& me, Clock::time_point deadline, CancelToken cancel,
                       bool* reentered, bool* waited, std::optional<Grant>* handed) {
  Counters& k = c_->counters();
  MutexLock g(st_mu_);
  // A new attempt: the caller's older lost hold was reported (it sees its
  // own hold, or nothing, from now on).
  lost_.erase(WhoIs(me));
  // fair=1: our place in the claim line, once we had to wait (made only
  // then: its condition variable allocates).
  std::optional<ClaimWaiter> place;
  for (;;) {
    const bool queued = place.has_value();
    // A hold passed on to the first of the line is taken first, also by a
    // caller that was cancelled or ran out of time meanwhile (Try gives it
    // back after a cancel): nobody else would.
    if (handed_ && queued && claim_line_.front() == &*place) {
      LeaveClaimLineLocked(&*place);
      *waited = true;
      *handed = std::move(handed_);
      handed_.reset();
      acquiring_ = true;
      acquirer_ = &me;
      k.handovers.fetch_add(1);
      return Status::OK();
    }
    if (cancel.cancelled()) {
      if (queued) LeaveClaimLineLocked(&*place);
      return CancelledStatus(Name());
    }
    // A hold whose release is in flight is neither re-entered (the release
    // would then end the hold this call reports as held) nor claimed: wait
    // for the release to end, then acquire afresh.
    if (!releasing_) {
      LockState st = StateLocked();
      if (st == LockState::kHeld) {
        if (IsHolderLocked(me)) {
          if (queued) LeaveClaimLineLocked(&*place);
          if (!opts_.reentrant)
            return Status::StateError("lock " + Name() +
                                      " is already held by this holder (reentrant=0)");
          if (count_ == std::numeric_limits<int>::max())
            return Status::StateError("lock " + Name() + " is already held " +
                                      std::to_string(count_) +
                                      " times by this holder: no further re-entry");
          ++count_;
          Taken& t = taken_[&me];
          if (t.gen != gen_) t = Taken{gen_, holder_, 0, owner_, fence_};
          ++t.holds;
          k.reentries.fetch_add(1);
          *reentered = true;
          return Status::OK();
        }
      } else if (!acquiring_ && (!opts_.fair || claim_line_.empty() ||
                                 (queued && claim_line_.front() == &*place))) {
        *waited = queued;
        if (queued) LeaveClaimLineLocked(&*place);
        acquiring_ = true;
        acquirer_ = &me;
        return Status::OK();
      }
    }
    // Another thread holds it (or is acquiring or releasing it) through
    // this object, or (fair=1) threads that came first wait for it.
    auto now = Clock::now();
    if (now >= deadline) {
      if (queued) LeaveClaimLineLocked(&*place);
      k.busy.fetch_add(1);
      // What is known here of the holder's lease: its end by our clock.
      me.busy_us.store(state_ == LockState::kHeld && scheme_->expires() && deadline_ > now
                           ? std::chrono::duration_cast<std::chrono::microseconds>(deadline_ - now).count()
                           : -1);
      return Status::Busy("lock " + Name() + BusyWhyLocked(me));
    }
    if (opts_.fair && !place) {
      place.emplace();
      claim_line_.push_back(&*place);
    }
    if (place) {
      place->cv.wait_until(st_mu_, std::min(deadline, now + kSlice));
    } else {
      ++cv_waiters_;
      cv_.wait_until(st_mu_, std::min(deadline, now + kSlice));
      --cv_waiters_;
    }
  }
}

void LockImpl::Settle(LockCaller& me, const Status& s, const Grant& grant) {
  MutexLock g(st_mu_);
  acquiring_ = false;
  const HolderId who = WhoIs(me);
  if (s.ok()) {
    RememberLostLocked(who);
    state_ = LockState::kHeld;
    owner_ = grant.owner;
    fence_ = grant.fence;
    deadline_ = grant.deadline;
    acquired_at_ = grant.acquired_at;
    holder_ = who;
    count_ = 1;
    ++gen_;
    released_ = false;
    lost_why_.clear();
    session_watch_ = scheme_->SessionConn();
    // Field by field: the owner reuses the string the object's last hold
    // left there (no allocation per acquisition).
    Taken& t = taken_[&me];
    t.gen = gen_;
    t.holder = who;
    t.holds = 1;
    t.owner = owner_;
    t.token = fence_;
  } else if (state_ == LockState::kLost && IsHolderLocked(me)) {
    // The holder's own new attempt: its old loss was reported. (Another
    // holder's failed attempt leaves the holder's hold LOST.)
    state_ = LockState::kIdle;
  }
  NotifyLocked();
}

void LockImpl::DropLostHold() {
  std::string owner;
  {
    MutexLock g(st_mu_);
    // HELD here means a lease that ran out by our clock (Try only acquires
    // when the state is not HELD by the state machine's word).
    if (!PinnedLocked()) return;
    owner = owner_;
  }
  c_->renewer().Remove(this);
  {
    // Quietly: the loss was (or will be) reported already.
    SchemeUse use(this);
    scheme_->Abandon(owner);
  }
  MutexLock g(st_mu_);
  if (state_ == LockState::kHeld) SetLostLocked("its lease ran out before it was renewed");
  released_ = true;
  session_watch_ = nullptr;
}

// ---- Renew / Release / transactions ------------------------------------------

Status LockImpl::CheckHeldLocked(const LockCaller& me, const char* what) const {
  if (Status s = RefuseWhileAcquiringLocked(me, what); !s.ok()) return s;
  LockState st = StateLocked();
  if (st == LockState::kIdle) return Status::StateError("lock " + Name() + " is not held");
  if (st == LockState::kLost) return Status::Lost("lock " + Name() + " was lost: " + LostWhyLocked());
  return Status::OK();
}

Status LockImpl::Renew(LockCaller& me) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  MutexLock op(op_mu_);
  std::string owner;
  Clock::time_point acquired_at;
  uint64_t token;
  {
    MutexLock g(st_mu_);
    if (Status s = ActsOnCurrentLocked(me, "renew", /*strict=*/false); !s.ok()) return s;
    if (Status s = CheckHeldLocked(me, "renew"); !s.ok()) return s;
    owner = owner_;
    acquired_at = acquired_at_;
    token = fence_;
  }
  Clock::time_point deadline;
  Status s;
  {
    SchemeUse use(this);
    s = scheme_->Renew(owner, acquired_at, token, &deadline);
  }
  if (!s.ok() || !scheme_->expires()) return s;
  {
    MutexLock g(st_mu_);
    if (owner_ == owner && state_ == LockState::kHeld) deadline_ = deadline;
  }
  if (opts_.auto_renew)
    c_->renewer().Renewed(this, deadline);
  return Status::OK();
}

Status LockImpl::Release(LockCaller& me) { return EndHold(me, /*commit=*/true); }

Status LockImpl::Abort(LockCaller& me) { return EndHold(me, /*commit=*/false); }

Status LockImpl::EndHold(LockCaller& me, bool commit) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  MutexLock op(op_mu_);
  LockState st;
  std::string owner;
  uint64_t token;
  bool line_waits = false;  // a thread of this process waits to take the lock next
  {
    MutexLock g(st_mu_);
    const char* what = commit ? "release" : "abort";
    if (Status s = ActsOnCurrentLocked(me, what, /*strict=*/true); !s.ok()) return s;
    if (Status s = RefuseWhileAcquiringLocked(me, what); !s.ok()) return s;
    st = StateLocked();
    if (state_ == LockState::kIdle) return Status::StateError("lock " + Name() + " is not held");
    if (state_ == LockState::kLost && released_)
      return Status::Lost("lock " + Name() + " was lost: " + lost_why_);
    // An abort ends every reentrant hold: the work of all of them is one
    // transaction, and it is rolled back.
    if (commit && st == LockState::kHeld && count_ > 1) {
      --count_;  // an inner, reentrant hold
      auto t = taken_.find(&me);
      if (t != taken_.end() && t->second.gen == gen_ && t->second.holds > 0) --t->second.holds;
      return Status::OK();
    }
    owner = owner_;
    token = fence_;
    releasing_ = true;
    // At most kMaxHandOverRun hand-overs in a row: then one plain release,
    // which gives a waiter of another process that polls (rather than
    // blocking on the wake-up name, which a hand-over always serves first)
    // the chance it has after any release.
    line_waits = opts_.fair && !claim_line_.empty() && handover_run_ < kMaxHandOverRun;
    // SchemeUse's mark, set and cleared with the release's own steps
    // (two lock rounds fewer per release).
    scheme_busy_ = true;
  }
  // Only an expiring hold was given to the renewer (Try).
  if (scheme_->expires()) c_->renewer().Remove(this);
  bool freed = false;
  Status s;
  // fair=1 with this process's next waiter in line: the release may pass
  // the lease straight on to it (one statement, one durable commit),
  // unless someone outside this process waits for it.
  std::optional<Grant> next;
  if (commit && st == LockState::kHeld && line_waits && scheme_->CanHandOver()) {
    bool handed = false;
    next.emplace();
    s = scheme_->HandOver(owner, token, c_->NewOwner(), &*next, &handed, &freed);
    if (!handed) next.reset();
  } else {
    s = scheme_->Release(owner, token, commit, st == LockState::kLost, &freed);
  }
  for (;;) {
    {
      MutexLock g(st_mu_);
      // A lease passed on needs a taker: the first of the claim line takes
      // handed_ whatever happens to its call, so a line that is not empty
      // now takes it. One that emptied while the statement ran (its threads
      // gave up) does not: that lease is given back below, still as this
      // release (releasing_: nobody else uses the scheme meanwhile).
      if (!next || !claim_line_.empty()) {
        scheme_busy_ = false;
        // Never HELD after a release: the state says what is known. A scheme
        // that lost the hold said so (MarkLost); a freed one is IDLE even when
        // the business part failed.
        if (state_ == LockState::kHeld) {
          if (s.ok() || freed) state_ = LockState::kIdle;
          else SetLostLocked(s.message());
        }
        count_ = 0;
        released_ = true;
        releasing_ = false;
        HoldEndedLocked();
        session_watch_ = nullptr;
        handover_run_ = next ? handover_run_ + 1 : 0;
        if (next) handed_ = std::move(next);
        NotifyLocked();
        break;
      }
    }
    // Given back quietly: the release itself succeeded, and this lease was
    // never anybody's hold (Abandon frees the row only while next->owner
    // still has it; should that fail, the lease expires unrenewed).
    scheme_->Abandon(next->owner);
    next.reset();
  }
  if (s.ok()) c_->counters().releases.fetch_add(1);
  c_->waiters().Notify(db_key_);
  return s;
}

Status LockImpl::Rollback(LockCaller& me) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  MutexLock op(op_mu_);
  const bool ends_hold = scheme_->hold_is_transaction();
  {
    MutexLock g(st_mu_);
    // A row lock's rollback ends the hold: only its holder, as release.
    if (Status s = ActsOnCurrentLocked(me, "rollback", /*strict=*/ends_hold); !s.ok()) return s;
    if (Status s = RefuseWhileAcquiringLocked(me, "rollback"); !s.ok()) return s;
    if (ends_hold) {
      if (Status s = CheckHeldLocked(me, "rollback"); !s.ok()) return s;
      releasing_ = true;
    }
  }
  Status s;
  {
    SchemeUse use(this);
    s = scheme_->Rollback();
  }
  if (!ends_hold) return s;  // the work is undone; the lock stays held
  // A rollback ends the transaction, so it ends every reentrant hold too.
  {
    MutexLock g(st_mu_);
    count_ = 0;
    if (s.ok()) state_ = LockState::kIdle;
    released_ = true;
    releasing_ = false;
    HoldEndedLocked();
    session_watch_ = nullptr;
    NotifyLocked();
  }
  c_->waiters().Notify(db_key_);
  return s;
}

Status LockImpl::Begin(LockCaller& me) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();
  MutexLock op(op_mu_);
  {
    MutexLock g(st_mu_);
    if (Status s = ActsOnCurrentLocked(me, "begin", /*strict=*/false); !s.ok()) return s;
    if (Status s = CheckHeldLocked(me, "begin"); !s.ok()) return s;
  }
  SchemeUse use(this);
  return scheme_->Begin();
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
  MutexLock op(op_mu_);
  {
    MutexLock g(st_mu_);
    if (Status s = ActsOnCurrentLocked(me, "exec", /*strict=*/false); !s.ok()) return s;
    if (Status s = CheckHeldLocked(me, "exec"); !s.ok()) return s;
  }
  SchemeUse use(this);
  return scheme_->Exec(sql, params, affected);
}

Status LockImpl::WaitLost(LockCaller& me, int64_t timeout_ms, const uint64_t* cancel_mark) {
  if (Status s = CheckPid(); !s.ok()) return s;
  CallScope call(this, me);
  if (!call.refused().ok()) return call.refused();

  const auto deadline = WaitDeadline(timeout_ms);  // timeout_ms < 0: no limit
  const CancelToken cancel{&me.cancel_seq, cancel_mark ? *cancel_mark : me.cancel_seq.load()};
  MutexLock g(st_mu_);
  for (;;) {
    // The caller's hold (ViewLocked); it may change while we wait: a new
    // holder's acquisition leaves a lost hold's holder with its record.
    const View v = ViewLocked(me);
    if (!v.current) {
      if (v.state == LockState::kLost) return Status::Lost("lock " + Name() + " was lost: " + *v.why);
      return Status::OK();
    }
    LockState st = StateLocked();
    if (st == LockState::kLost) return Status::Lost("lock " + Name() + " was lost: " + LostWhyLocked());
    // An acquisition under way may end in this holder's hold again; a
    // sibling object's (holder=lock) cannot.
    if (st == LockState::kIdle && !(acquiring_ && (opts_.holder != Holder::kLock || acquirer_ == &me)))
      return Status::OK();
    if (cancel.cancelled()) return Status(Code::kCancelled, "wait_lost on " + Name() + " was cancelled");
    auto now = Clock::now();
    if (now >= deadline)
      return Status(Code::kTimeout, "lock " + Name() + " is still held after " +
                                        std::to_string(timeout_ms) + " ms");
    auto until = std::min(deadline, now + kSlice);
    if (st == LockState::kHeld) until = std::min(until, deadline_);  // a lease runs out
    ++cv_waiters_;
    cv_.wait_until(st_mu_, until);
    --cv_waiters_;
  }
}

}  // namespace dlock
