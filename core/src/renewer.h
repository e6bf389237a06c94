// The watchdog (A5, A9, B4): one thread per client extends every auto-renewed
// lease it holds, all of them in one statement per tick.
#ifndef DLOCK_CORE_RENEWER_H_
#define DLOCK_CORE_RENEWER_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conn.h"
#include "pool.h"
#include "thread_annotations.h"

namespace dlock {

class ClientImpl;

// How long the watchdog waits for the answer to one renewal statement
// before the cutter aborts its connection, ttl_ms being the shortest lease
// it renews (whichever lease the statement renews): a renew interval,
// ttl/3, but at least 1 s (renewer.cc says why).
int64_t RenewStatementBudgetUs(int64_t ttl_ms);
// The options of the watchdog's own connection, for leases of ttl_ms (the
// shortest it renews): the connect and its handshake are bounded so that a
// node that accepts and never answers (hung, frozen, a relay with nothing
// behind it) cannot hold the watchdog while the lease runs out. Never
// looser than the client's own connect_timeout and read_timeout.
ClientOptions RenewerConnOptions(const ClientOptions& client, int64_t ttl_ms);

// What the watchdog needs of a lease it renews (a lock implements it), so
// that the renewer never includes the lock's header. Called with the
// watchdog's mutex held.
class RenewedLease {
 public:
  // The current (or last) hold's fencing token, for events.
  virtual uint64_t Token() const = 0;
  // The batch renewed owner's hold until deadline.
  virtual void OnRenewed(const std::string& owner, Clock::time_point deadline) = 0;
  // The lease is lost; false: the hold had ended (or was found lost)
  // already, and it is not the watchdog's to report.
  virtual bool OnLost(const std::string& owner, const std::string& why) = 0;

 protected:
  ~RenewedLease() = default;
};

class Renewer {
 public:
  explicit Renewer(ClientImpl* client) : client_(client) {}
  ~Renewer();  // stops the thread; leases still registered simply stop renewing

  // Starts renewing lock's lease. acquired_at starts the max-hold clock.
  void Add(RenewedLease* lock, const std::string& key, const std::string& owner, int64_t ttl_ms,
           int64_t max_hold_ms, Clock::time_point acquired_at, Clock::time_point deadline)
      EXCLUDES(mu_);
  // After it returns, the renewer never touches lock again.
  void Remove(RenewedLease* lock) EXCLUDES(mu_);
  // A manual renew succeeded (deadline: the lock's new one): the next tick
  // can wait.
  void Renewed(RenewedLease* lock, Clock::time_point deadline) EXCLUDES(mu_);

 private:
  struct Entry {
    std::string key, owner;
    int64_t ttl_ms = 0;
    int64_t max_hold_ms = 0;
    Clock::time_point acquired_at, last_sent, deadline, retry_at;
    bool tripped = false;   // max hold reached: no more renewals
    int failures = 0;       // consecutive transient failures
  };
  struct Item {
    RenewedLease* lock;
    std::string key, owner;
  };
  enum class Outcome { kRenewed, kLost, kError };

  void Run() EXCLUDES(mu_);
  using Batches = std::map<int64_t, std::vector<Item>>;  // by ttl
  using Expired = std::vector<std::pair<RenewedLease*, std::string>>;
  // One look at every lease: those that ran out, max-hold trips (raised
  // here), and, when one is due, the batches to renew now; *next: when to
  // look again.
  void Scan(Clock::time_point now, Batches* batches, Expired* expired, Clock::time_point* next)
      REQUIRES(mu_);
  // A lease is lost: counted, reported, the lock told, forgotten.
  void Lost(RenewedLease* lock, const std::string& why) REQUIRES(mu_);
  // What a batch's statement said, applied to the entries still there.
  // until[i]: the deadline of a renewed lease (its hold ends there by our
  // clock, never after the server's expiry).
  void Apply(const std::vector<Item>& items, const Status& s, Clock::time_point sent,
             const std::vector<Outcome>& outcomes, const std::vector<Clock::time_point>& until)
      REQUIRES(mu_);
  // Renews items (all with the same ttl) in as few statements as possible.
  // Fills outcomes[i]; returns the status of the failure, if any. Runs on
  // the renewer's thread without mu_: I/O never blocks Add() and Remove().
  // until[i]: a renewed lease's new deadline. conn_ttl_ms: the shortest
  // ttl renewed, for a new connection's timeouts and the cut: the attempt
  // is given up (the cutter aborts the connection; see Cutter) when a
  // statement of it has no answer RenewStatementBudgetUs(min(ttl_ms,
  // conn_ttl_ms)) after it was sent.
  Status RenewBatch(int64_t ttl_ms, int64_t conn_ttl_ms, const std::vector<Item>& items,
                    Clock::time_point* sent, std::vector<Outcome>* outcomes,
                    std::vector<Clock::time_point>* until) EXCLUDES(mu_);
  // The cutter's thread: aborts the connection of a renewal statement that
  // runs past its cut_at_. A stalled or hung node would otherwise hold the
  // renewer for the whole read timeout (30 s by default), longer than a
  // lease's ttl, while the other nodes of a multi-host URL could renew it.
  void Cutter() EXCLUDES(mu_);
  // Before each statement of an attempt on conn_: the cutter watches it,
  // with the whole budget of cut_ttl_ms from now (a batch of several
  // statements on a loaded server is not cut for their sum). False: the
  // attempt was cut already (just as the last statement's answer came);
  // the next statement is not to be sent.
  [[nodiscard]] bool ArmCut(int64_t cut_ttl_ms) EXCLUDES(mu_);
  // After the attempt: the cutter stands down; whether it cut conn_.
  bool DisarmCut() EXCLUDES(mu_);
  // RenewBatch's statements on conn_; each is cut at the budget of
  // cut_ttl_ms (the SQL and the deadlines use ttl_ms).
  Status RenewOn(int64_t ttl_ms, int64_t cut_ttl_ms, const std::vector<Item>& items,
                 Clock::time_point* sent, std::vector<Outcome>* outcomes,
                 std::vector<Clock::time_point>* until) EXCLUDES(mu_);
  // A connection for leases whose shortest ttl is ttl_ms (RenewerConnOptions).
  Status EnsureConn(int64_t ttl_ms) EXCLUDES(mu_);
  // The shortest ttl of the leases registered (0 when none).
  int64_t MinTtl() const REQUIRES(mu_);

  ClientImpl* const client_;
  Mutex mu_;
  std::condition_variable_any cv_;  // waits on mu_: entries changed, or stop
  std::map<RenewedLease*, Entry> entries_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_ GUARDED_BY(mu_);  // started by the first Add()
  std::thread cutter_ GUARDED_BY(mu_);  // started with thread_
  std::condition_variable_any cut_cv_;  // waits on mu_: an attempt started, or stop
  // The connection of the attempt in flight (null between attempts) and
  // when to cut it (its current statement's send + budget); cut_: it was
  // cut. Set and cleared by the renewer's thread; the connection is never
  // closed while it is set here.
  Conn* inflight_ GUARDED_BY(mu_) = nullptr;
  Clock::time_point cut_at_ GUARDED_BY(mu_);
  bool cut_ GUARDED_BY(mu_) = false;
  // Connecting ahead of the first tick failed (Run); Add() tries again.
  bool preconnect_failed_ GUARDED_BY(mu_) = false;
  // The renewer's own connection, never starved by the pool. Touched only by
  // the renewer's thread (Run and what it calls), so no mutex.
  std::unique_ptr<Conn> conn_;
  Clock::time_point conn_used_;  // its last statement (or its connect)
  Clock::time_point armed_at_;   // the last ArmCut that armed: its statement's send
};

}  // namespace dlock

#endif  // DLOCK_CORE_RENEWER_H_
