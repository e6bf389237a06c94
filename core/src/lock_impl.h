// One lock object: the state machine shared by both schemes, reentrancy,
// local waiting, and the hooks the watchdog calls.
#ifndef DLOCK_CORE_LOCK_IMPL_H_
#define DLOCK_CORE_LOCK_IMPL_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client_impl.h"
#include "scheme.h"
#include "thread_annotations.h"
#include "dlock/core.hpp"

namespace dlock {

// Who holds a lock for reentrancy (holder=thread): the calling OS thread, or
// an id a binding passes for the call (TryAs/ReleaseAs: a Java thread, which
// may run on any carrier thread).
struct HolderId {
  bool explicit_id = false;
  uint64_t id = 0;
  bool operator==(const HolderId& o) const { return explicit_id == o.explicit_id && id == o.id; }
  bool operator!=(const HolderId& o) const { return !(*this == o); }
  bool operator<(const HolderId& o) const {
    return explicit_id != o.explicit_id ? explicit_id < o.explicit_id : id < o.id;
  }
  // The holder of the call running on this thread.
  static HolderId Current();
  // A lock object's own id as a holder (holder=lock): never an OS thread's
  // or a binding's, never reused.
  static uint64_t NewObjectId();
};

// Sets the explicit holder for the calls this thread makes while it lives;
// id 0 is the calling OS thread (as a call without an id).
class HolderScope {
 public:
  explicit HolderScope(uint64_t id);
  ~HolderScope();

 private:
  bool had_;
  uint64_t prev_;
};

// One lock object's own part of a LockImpl, which several lock objects may
// share: objects of one client for the same key and options with
// holder=thread (the article's 6.4: a thread that holds a key enters again
// through any object for it), or with holder=lock (each object is a holder
// of its own, and they wait for each other in this process: a release
// hands the lease to the next object in line). The hold and its count are
// shared; calls, cancellation and close are the object's own, and so are
// the holds it took (the LockImpl keeps those, by object: Taken).
struct LockCaller {
  // The object as a holder (holder=lock).
  const uint64_t object_id = HolderId::NewObjectId();
  std::atomic<uint64_t> cancel_seq{0};
  // Calls in progress and the close: atomics, so that a call costs no
  // mutex; a call counts itself, then looks at closing, and Close sets
  // closing, then looks at calls (sequentially consistent: one of the two
  // sees the other). mu and cv for Close's wait: a call that ends while
  // closing counts itself out under mu (CallScope).
  std::atomic<int> calls{0};
  std::atomic<bool> closing{false};
  // The last busy attempt's word on the holder's lease (BusyRemainingUs).
  std::atomic<int64_t> busy_us{-1};
  Mutex mu;
  std::condition_variable_any cv;  // calls reached 0 while closing; waits on mu
};

// One lock: the state machine (IDLE, HELD, LOST), reentrancy, the calls and
// their cancellation, and waiting in this process. The database part is the
// scheme's (scheme.h).
class LockImpl final : private LockHost, public RenewedLease {
 public:
  // identity: the key of this lock in the client's registry of shared
  // locks (its mode and key), or "" when it is not shared.
  LockImpl(std::shared_ptr<Client> client, std::string key, LockOptions opts,
           std::string identity);
  ~LockImpl();

  // cancel_mark: count cancels after this mark (nullptr: after the call began).
  Status Try(LockCaller& me, int64_t wait_ms, const uint64_t* cancel_mark = nullptr);
  uint64_t CancelMark(const LockCaller& me) const;
  Status Renew(LockCaller& me);
  Status Release(LockCaller& me);
  // Ends the hold without committing, whatever its count: the hold's
  // transaction (a row lock's, a lease's begun one) rolls back, the lease
  // is given back.
  Status Abort(LockCaller& me);
  Status Rollback(LockCaller& me);
  Status Begin(LockCaller& me);
  Status Exec(LockCaller& me, const std::string& sql,
              const std::vector<const std::string*>& params, int64_t* affected);
  // cancel_mark: as Try's.
  Status WaitLost(LockCaller& me, int64_t timeout_ms, const uint64_t* cancel_mark = nullptr);
  void Cancel(LockCaller& me);
  // A lock object closes: cancels its calls, waits for them, and gives back
  // the holds it took (the last one releases the lock).
  void Close(LockCaller& me);

  // The accessors answer for the caller's hold, as seen through object me
  // (ViewLocked): the calling holder's, else the one me took.
  LockState CurrentState(const LockCaller& me) const;
  std::string Owner(const LockCaller& me) const;
  const char* OwnerCstr(const LockCaller& me) const;
  // Copies the owner id into buf (NUL-terminated, cut at cap - 1); returns
  // its full length.
  size_t CopyOwner(const LockCaller& me, char* buf, size_t cap) const;
  uint64_t Token(const LockCaller& me) const;
  uint64_t Token() const override;  // the current (or last) hold's, for the watchdog
  const std::string& key() const { return key_; }
  const LockOptions& options() const { return opts_; }
  int64_t RemainingMs(const LockCaller& me) const;
  int HoldCount(const LockCaller& me) const;
  int HoldCountOfCaller(const LockCaller& me) const;  // 0 unless the calling holder holds it
  // After a busy attempt through me: the holder's lease left, in
  // microseconds (by the server's clock when the database answered busy;
  // by ours when a sibling object of this process held it); -1 when
  // unknown (row locks, or not busy).
  int64_t BusyRemainingUs(const LockCaller& me) const { return me.busy_us.load(); }
  bool forked() const { return getpid() != pid_; }

  // Watchdog hooks; called with the watchdog's mutex held, never with ours.
  void OnRenewed(const std::string& owner, Clock::time_point deadline) override;
  // false: the hold had ended (or was found lost) already: not the
  // watchdog's to report.
  bool OnLost(const std::string& owner, const std::string& why) override;

 private:
  std::string Name() const { return name_; }
  Status CheckPid() const;
  // Who the caller is as a holder: the object me (holder=lock), else the
  // calling thread or the binding's id for the call.
  HolderId WhoIs(const LockCaller& me) const;
  bool IsHolderLocked(const LockCaller& me) const REQUIRES(st_mu_);
  LockState StateLocked() const REQUIRES(st_mu_);
  std::string LostWhyLocked() const REQUIRES(st_mu_);
  void SetLostLocked(std::string why) REQUIRES(st_mu_);
  // A hold that is HELD or LOST but not yet given back in the database.
  bool PinnedLocked() const REQUIRES(st_mu_) {
    return state_ == LockState::kHeld || (state_ == LockState::kLost && !released_);
  }

  // LockHost: what the scheme asks of us.
  std::string MarkLost(const std::string& why) override;
  std::string LostReason() const override;
  // Cancel() may abort the statement waiting on conn until LeaveServerWait.
  bool EnterServerWait(Conn& conn, CancelToken cancel) override;
  void LeaveServerWait() override;

  // Every public call runs inside a CallScope: the destructor (dlock_close)
  // cancels the calls in progress and waits for them; calls that start while
  // it closes are refused.
  class CallScope;
  // A call into the scheme on a held lock marks the hold's session busy, so
  // the watch below never reads a reply in flight as "closed by the server".
  class SchemeUse;
  // Refuses an operation on the lock's connections while another thread is
  // acquiring it (that thread alone uses them then). st_mu_ held.
  Status RefuseWhileAcquiringLocked(const LockCaller& me, const char* what) const REQUIRES(st_mu_);
  // Why a claim that ran out of time found the lock busy here (" is held
  // by ..."), for its message.
  std::string BusyWhyLocked(const LockCaller& me) const REQUIRES(st_mu_);
  // Who acts on the lock, as every busy or refused message names it: another
  // thread (holder=thread), or with holder=lock this very object in another
  // thread (own) or a sibling object.
  const char* ByWhomLocked(bool own) const REQUIRES(st_mu_);
  // The state checks of renew/begin/exec: OK when held.
  Status CheckHeldLocked(const LockCaller& me, const char* what) const REQUIRES(st_mu_);
  // Try's first step: re-enters a hold of the calling holder
  // (*reentered), or claims the acquisition (acquiring_) once no other
  // thread holds or acquires the lock through this object and no release
  // of its hold is in flight (releasing_). fair=1: in arrival order
  // (claim_line_); *waited: it had to queue. *handed: the hold the last
  // holder passed on to the line (handed_) is now the caller's, with that
  // grant (no acquisition to run).
  Status Claim(LockCaller& me, Clock::time_point deadline, CancelToken cancel, bool* reentered,
               bool* waited, std::optional<Grant>* handed);
  // Wakes whoever waits for a state change: cv_'s waiters, and the first
  // of the claim line (fair=1), which alone may claim next.
  void NotifyLocked() const REQUIRES(st_mu_);
  struct ClaimWaiter;
  // Takes w out of the claim line; wakes the next first of the line.
  void LeaveClaimLineLocked(ClaimWaiter* w) REQUIRES(st_mu_);
  // Try's last step: the state after the scheme's acquisition.
  void Settle(LockCaller& me, const Status& s, const Grant& grant);

  // Whose hold a caller sees through object me, in this order: the
  // current hold if the calling holder (WhoIs) holds it (with holder=thread
  // through any object: shared holds); the calling holder's own hold if it
  // was lost and another holder's followed (lost_); the last hold taken
  // through me (a thread that holds nothing of its own there: a loss
  // watcher, a binding whose holder is an id); else none. With holder=lock
  // the holder is the object, so an object sees its own holds only, never
  // a sibling object's.
  struct View {
    bool current = false;             // the lock's current hold: read the live fields
    LockState state = LockState::kIdle;  // when !current
    const std::string* owner = nullptr;  // when !current; nullptr: ""
    uint64_t token = 0;               // when !current
    const std::string* why = nullptr;    // when !current and LOST
  };
  View ViewLocked(const LockCaller& me) const REQUIRES(st_mu_);
  // Which hold a call that acts on it (renew, begin, exec, a lease's
  // rollback; release and a row lock's rollback with strict=true) may act
  // on: OK for the lock's current hold, kLost for the caller's own lost
  // hold, kState for none. Not strict: a caller that holds nothing of its
  // own may act on the hold an explicit holder id took through me (calls
  // that take no id from a binding whose holders are ids).
  Status ActsOnCurrentLocked(const LockCaller& me, const char* what, bool strict) const
      REQUIRES(st_mu_);
  // ActsOnCurrentLocked's refusal when another holder holds the lock or is
  // acquiring it: only that holder may act on it.
  Status OthersHoldLocked(const char* what) const REQUIRES(st_mu_);
  // The hold ended by its release (or a row lock's rollback, or close): no
  // object keeps a share of it any more.
  void HoldEndedLocked() REQUIRES(st_mu_);
  // Before a new hold replaces a lost one of another holder: that holder
  // keeps seeing its hold as LOST (lost_).
  void RememberLostLocked(const HolderId& next) REQUIRES(st_mu_);
  // Try, after it claimed the acquisition: frees what a hold that was lost
  // but not released still pins (its lease row if still ours, its
  // transaction, its connections).
  void DropLostHold() REQUIRES(op_mu_);
  // Release (commit) and Abort (!commit): one level, or the whole hold.
  Status EndHold(LockCaller& me, bool commit);
  // Gives back n holds of generation gen (Close); the last one releases.
  void ReleaseShares(uint64_t gen, int n);
  // Test access (tests/core): sets the reentrant count of a held lock.
  friend class LockImplTestPeer;
  // Releases a hold that is still taken, as close does (a row lock rolls
  // back). op_mu_ held. With back (a closing object's n holds of generation
  // gen): only if that hold is still on and those are its last holds; else
  // the count goes down by n.
  struct SharesBack {
    uint64_t gen;
    int n;
  };
  void DropHold(const SharesBack* back = nullptr) REQUIRES(op_mu_);
  // A hold whose session lives on an idle connection (a row lock): has the
  // server closed it? Then the hold is gone (the server rolled back): state
  // becomes LOST. st_mu_ held.
  void WatchSessionLocked() const REQUIRES(st_mu_);

  std::shared_ptr<Client> client_;
  ClientImpl* c_;
  const std::string key_;      // the user's key
  const std::string db_key_;   // the row it maps to (differs with shards=N)
  const std::string name_;     // the key as messages show it
  const LockOptions opts_;
  const pid_t pid_;
  const std::string identity_;
  // The database part (lease or row). Used under op_mu_, or by the thread
  // that claimed the acquisition (acquiring_).
  std::unique_ptr<Scheme> scheme_;

  Mutex op_mu_;  // serialises Renew/Release/Rollback/Begin/Exec
  mutable Mutex st_mu_;
  // State changes: acquired, released, lost, calls; waits on st_mu_.
  mutable std::condition_variable_any cv_;
  int cv_waiters_ GUARDED_BY(st_mu_) = 0;  // threads in cv_.wait_until
  // fair=1: the threads waiting in Claim, in arrival order. Only the first
  // may claim the acquisition; a call that finds the line non-empty joins
  // its end (a holder that releases and at once asks again queues behind
  // the threads that waited), so a woken waiter never loses to a newcomer.
  // Each waits on its own condition variable: a release wakes one thread,
  // not the whole line.
  struct ClaimWaiter {
    std::condition_variable_any cv;  // waits on st_mu_
  };
  mutable std::deque<ClaimWaiter*> claim_line_ GUARDED_BY(st_mu_);
  // fair=1: a hold the last holder's release passed on to the first of the
  // claim line in its statement (Scheme::HandOver), until that thread takes
  // it. Set only while the line is not empty; the first of the line takes
  // it even when it is leaving (cancelled: it then gives the lease back; at
  // its deadline: it won), so it is never left without a taker.
  std::optional<Grant> handed_ GUARDED_BY(st_mu_);
  // Hand-overs in a row since the last plain release (EndHold).
  static constexpr int kMaxHandOverRun = 8;
  int handover_run_ GUARDED_BY(st_mu_) = 0;
  // Mutable: the session watch turns HELD into LOST from an accessor.
  mutable LockState state_ GUARDED_BY(st_mu_) = LockState::kIdle;
  bool acquiring_ GUARDED_BY(st_mu_) = false;
  const LockCaller* acquirer_ GUARDED_BY(st_mu_) = nullptr;  // whose object acquires (acquiring_)
  bool scheme_busy_ GUARDED_BY(st_mu_) = false;  // an op is using the hold's session
  mutable Conn* session_watch_ GUARDED_BY(st_mu_) = nullptr;  // the held, idle session
  HolderId holder_ GUARDED_BY(st_mu_);
  int count_ GUARDED_BY(st_mu_) = 0;
  // A release of the hold is in flight (between its decision and its end,
  // st_mu_ dropped for the round trip): the hold is neither re-entered nor
  // claimed until it ends (Claim waits).
  bool releasing_ GUARDED_BY(st_mu_) = false;
  uint64_t gen_ GUARDED_BY(st_mu_) = 0;
  bool released_ GUARDED_BY(st_mu_) = false;  // the database side of the last hold was released
  std::string owner_ GUARDED_BY(st_mu_);
  mutable std::string lost_why_ GUARDED_BY(st_mu_);
  uint64_t fence_ GUARDED_BY(st_mu_) = 0;
  Clock::time_point acquired_at_ GUARDED_BY(st_mu_){};
  Clock::time_point deadline_ GUARDED_BY(st_mu_){};
  // Per lock object: the last hold taken through it (generation, holder,
  // owner, token) and how many of its holds the object took and did not
  // give back (close gives back those). Erased when the object closes.
  struct Taken {
    uint64_t gen = 0;
    HolderId holder;
    int holds = 0;
    std::string owner;
    uint64_t token = 0;
  };
  std::map<const LockCaller*, Taken> taken_ GUARDED_BY(st_mu_);
  // Holds that were lost and then followed by another holder's hold, by
  // holder: that holder still sees its hold LOST until its next attempt.
  // At most kMaxLostHolds (the oldest is forgotten: that holder then sees
  // nothing held, never another's hold).
  struct LostHold {
    uint64_t gen = 0;
    std::string owner;
    uint64_t token = 0;
    std::string why;
  };
  std::map<HolderId, LostHold> lost_ GUARDED_BY(st_mu_);
  Mutex wait_mu_;
  Conn* wait_conn_ GUARDED_BY(wait_mu_) = nullptr;  // blocked in a server wait
  const std::atomic<uint64_t>* wait_caller_ GUARDED_BY(wait_mu_) = nullptr;  // whose wait
};

}  // namespace dlock

#endif  // DLOCK_CORE_LOCK_IMPL_H_
