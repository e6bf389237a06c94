// A locking scheme: how one lock is taken, kept and given back in the
// database. Two exist, each in its own file, each owning its statements and
// decoding their results:
//   lease_scheme.cc: a row with an owner and an expiry (A1-A5, fencing);
//   row_scheme.cc:   a row locked by an open transaction (SELECT .. FOR UPDATE).
// The lock object (lock.cc) keeps the state machine, reentrancy, the calls
// and cancellation; it calls a scheme for the database part only, with the
// lock's operation mutex held (or while it alone is acquiring), so a scheme
// is used by one thread at a time and needs no mutex of its own.
#ifndef DLOCK_CORE_SCHEME_H_
#define DLOCK_CORE_SCHEME_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dialect.h"
#include "dlock/core.hpp"
#include "options.h"
#include "waiters.h"

namespace dlock {

class ClientImpl;
class Conn;

// What a waiting call checks to see whether it was cancelled.
struct CancelToken {
  const std::atomic<uint64_t>* seq;
  uint64_t seen;
  bool cancelled() const { return seq->load() != seen; }
};

// FNV-1a: stable across platforms and languages, so every binding maps a
// key onto the same shard and the same wake-up name.
inline uint64_t KeyHash(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// A place in this process's line of waiters for a key (only the head talks
// to the database); left when it goes out of scope.
class QueuePlace {
 public:
  QueuePlace(WaitQueues& wq, const std::string& key)
      : wq_(wq), key_(key), ticket_(wq.Join(key, &head_)) {}
  ~QueuePlace() { wq_.Leave(key_, ticket_); }
  QueuePlace(const QueuePlace&) = delete;
  QueuePlace& operator=(const QueuePlace&) = delete;
  // Waits until this place heads the line (true), or until deadline or
  // stop() (false). A head stays the head until it leaves (Join only adds
  // behind it), so that is asked once.
  bool WaitHead(Clock::time_point deadline, const std::function<bool()>& stop) {
    if (!head_) head_ = wq_.WaitHead(key_, ticket_, deadline, stop);
    return head_;
  }

 private:
  WaitQueues& wq_;
  const std::string& key_;
  bool head_ = false;
  const uint64_t ticket_;
};

// What a scheme may ask of the lock it serves.
class LockHost {
 public:
  // The hold is gone (the server rolled the transaction back, the lease ran
  // out or was taken): the state becomes LOST, counted and reported. Returns
  // the reason the state now gives.
  virtual std::string MarkLost(const std::string& why) = 0;
  // Why the hold was lost, as the state gives it now.
  virtual std::string LostReason() const = 0;
  // A statement that may block on the server runs between these two, so
  // that a cancel can abort it. Enter returns false when the call was
  // cancelled already (then the statement must not start).
  virtual bool EnterServerWait(Conn& conn, CancelToken cancel) = 0;
  virtual void LeaveServerWait() = 0;

 protected:
  ~LockHost() = default;
};

// What an acquisition won.
struct Grant {
  std::string owner;        // host:pid:uuid, new for every acquisition (A4)
  uint64_t fence = 0;       // fencing token (0: the scheme has none)
  // When the hold began (a lease: when its statement was sent); a scheme
  // that leaves it unset gets the moment Try saw the acquisition end.
  Clock::time_point acquired_at{};
  Clock::time_point deadline = Clock::time_point::max();  // by our clock; max = no expiry
};

class Scheme {
 public:
  virtual ~Scheme() = default;

  // Whether a hold runs out by itself (and so can be renewed, lost to
  // time, and capped by max_hold).
  virtual bool expires() const = 0;
  // Whether the hold is a transaction (a rollback ends it, and with it
  // every reentrant hold).
  virtual bool hold_is_transaction() const = 0;

  // The database part of an acquisition: OK (won), BUSY, CANCELLED or an
  // error. Waits at most until deadline, in line with this process's other
  // waiters for the key.
  virtual Status Acquire(Clock::time_point deadline, CancelToken cancel, Grant* out) = 0;
  // Gives back, quietly, what a hold pins: one won in a race with a cancel,
  // or one that was lost but still holds a row, a transaction or a
  // connection. The loss, if any, was reported already.
  virtual void Abandon(const std::string& owner) = 0;
  // Keeps the hold: OK with *deadline (when it expires), or LOST (the
  // scheme called MarkLost), or an error that says nothing about the hold.
  virtual Status Renew(const std::string& owner, Clock::time_point acquired_at,
                       uint64_t token, Clock::time_point* deadline) = 0;
  // Ends the hold. commit: the release (the hold's transaction, if any,
  // commits with it); otherwise a close (it rolls back). lost: the lock
  // knows the hold is lost already. *freed: the database side is known to
  // be free now, whatever the returned status says about the rest.
  virtual Status Release(const std::string& owner, uint64_t token, bool commit, bool lost,
                         bool* freed) = 0;
  // Whether Release could pass the hold on, in its statement, to the next
  // thread of this process that waits for the lock (HandOver).
  virtual bool CanHandOver() const { return false; }
  // The release (commit) of a hold that a thread of this process waits to
  // take next: when nobody outside this process waits for the key, the
  // hold passes to next_owner in the release's own statement (one durable
  // commit instead of a release and an acquisition): *handed, *next its
  // grant. Otherwise a plain release (*freed and the status as Release's).
  virtual Status HandOver(const std::string& owner, uint64_t token, const std::string& /*next_owner*/,
                          Grant* /*next*/, bool* handed, bool* freed) {
    *handed = false;
    return Release(owner, token, /*commit=*/true, /*lost=*/false, freed);
  }
  // Opens the hold's transaction (a no-op where the hold is a transaction).
  virtual Status Begin() = 0;
  // Rolls back the hold's transaction; where the hold is a transaction,
  // that ends the hold.
  virtual Status Rollback() = 0;
  // Runs a caller's statement in the hold's transaction.
  virtual Status Exec(const std::string& sql, const std::vector<const std::string*>& params,
                      int64_t* affected) = 0;
  // The connection whose session is the hold, while held (watched for a
  // server that closed it); nullptr when the hold does not live in one.
  virtual Conn* SessionConn() = 0;
  // After a busy attempt: the holder's lease left by the server's clock, in
  // microseconds; -1 when unknown. Any thread.
  virtual int64_t BusyRemainingUs() const { return -1; }
  // A forked child: forget the connections without a word on them.
  virtual void AbandonAfterFork() = 0;
};

// What a scheme is made for: one lock's key, its row and its options.
struct SchemeArgs {
  ClientImpl* client;
  LockHost* host;
  std::string key;       // the user's key
  std::string db_key;    // the row it maps to (differs with shards=N)
  std::string name;      // the key as messages show it
  LockOptions opts;
};

std::unique_ptr<Scheme> MakeLeaseScheme(const SchemeArgs& a);
std::unique_ptr<Scheme> MakeRowScheme(const SchemeArgs& a);

// Runs a caller's statement in a transaction the lock holds open, and says
// whether the transaction is still open afterwards (an implicit commit the
// keyword check missed, a deadlock the server answered with a rollback);
// after an error reply, the dialect's probe asks.
Status ExecInTransaction(Conn& conn, const SessionSql& probe, const std::string& sql,
                         const std::vector<const std::string*>& params, int64_t* affected,
                         bool* still_open);

}  // namespace dlock

#endif  // DLOCK_CORE_SCHEME_H_
