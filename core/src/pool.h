// A bounded pool of lock connections (article 6.3: lock traffic never
// competes with the application's own pool).
#ifndef DLOCK_CORE_POOL_H_
#define DLOCK_CORE_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "conn.h"
#include "options.h"
#include "thread_annotations.h"

namespace dlock {

using Clock = std::chrono::steady_clock;

class Pool;

// A connection borrowed from the pool; goes back on destruction.
class PooledConn {
 public:
  PooledConn() = default;
  PooledConn(Pool* pool, std::unique_ptr<Conn> c) : pool_(pool), conn_(std::move(c)) {}
  PooledConn(PooledConn&& o) noexcept
      : pool_(o.pool_), conn_(std::move(o.conn_)), outside_(o.outside_) {
    o.pool_ = nullptr;
    o.outside_ = false;
  }
  PooledConn& operator=(PooledConn&& o) noexcept;
  ~PooledConn() { Reset(); }
  void Reset();
  // Takes this connection out of the pool's budget (Pool::LeaveBudget): its
  // slot is free for other calls while it stays lent. False, and nothing
  // changes, when the pool has no room outside its budget left.
  bool LeaveBudget();
  // Forked child: forget the connection without returning it (the pool's
  // mutex may be held by a thread that does not exist here).
  void Abandon() {
    conn_.release();
    pool_ = nullptr;
  }
  Conn* operator->() const { return conn_.get(); }
  Conn& operator*() const { return *conn_; }
  explicit operator bool() const { return conn_ != nullptr; }

 private:
  Pool* pool_ = nullptr;
  std::unique_ptr<Conn> conn_;
  bool outside_ = false;  // lent outside the pool's budget
};

class Pool {
 public:
  explicit Pool(const ClientOptions& opts) : opts_(opts) {}
  ~Pool();  // stops the closer thread; closes the idle connections
  // Waits until deadline for a free connection (opening one if below the
  // bound). A new connection is checked: writable, and its server facts read.
  // An idle one the server has closed meanwhile is dropped, not handed out.
  // stop (may be empty) is polled while waiting: true ends the wait with
  // kCancelled. connect_by bounds opening one (every node of a multi-host
  // URL tried included, Conn::Connect): the caller's wait, or
  // Clock::time_point::max() for connect_timeout per node.
  Status Get(Clock::time_point deadline, Clock::time_point connect_by, PooledConn* out,
             const std::function<bool()>& stop = nullptr) EXCLUDES(mu_);
  // A broken connection is closed, and so is every idle one: they lead to
  // the same server, which has just failed one of them (restarted, frozen,
  // unreachable), and trying each in turn would cost a timeout apiece.
  // With pool_idle_ms > 0, a connection that stays idle that long is closed
  // by a thread of the pool's (started by the first Put), all of them, so a
  // quiet process holds no connection. A
  // session that needs it is reset first (Conn::NeedsReset). outside_budget:
  // it was lent outside the budget (LeaveBudget); it stays open only if the
  // budget has room for it again.
  void Put(std::unique_ptr<Conn> c, bool outside_budget = false) EXCLUDES(mu_);
  // A lent connection that a lock keeps for a whole hold only for its
  // wake-up name (lease_scheme.cc) leaves the budget, so that held leases
  // never starve the client's other calls; at most `pool` connections are
  // outside it at once (false: none left, nothing changes).
  bool LeaveBudget() EXCLUDES(mu_);
  // Connections open now: in the budget (idle, lent or connecting) and
  // outside it.
  int open_count() const EXCLUDES(mu_);
  // Connections outside the pool (the watchdog's) count here too.
  std::atomic<uint64_t>* sent_counter() { return &sent_; }
  const ClientOptions& options() const { return opts_; }

 private:
  const ClientOptions opts_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;  // waits on mu_: a connection came back or a slot freed
  int cv_waiters_ GUARDED_BY(mu_) = 0;  // threads in cv_'s wait (Get)
  struct Idle {
    std::unique_ptr<Conn> conn;
    Clock::time_point since;  // when it came back
  };
  // Handed out from the back (the most recently used), so the front is the
  // longest idle: the closer closes from there.
  std::vector<Idle> idle_ GUARDED_BY(mu_);
  int open_ GUARDED_BY(mu_) = 0;  // idle, lent out, or being connected
  int outside_ GUARDED_BY(mu_) = 0;  // lent outside the budget (LeaveBudget)
  std::atomic<uint64_t> sent_{0};

  // Closes connections idle for pool_idle_ms, until stop_.
  void CloseIdle() EXCLUDES(mu_);
  std::condition_variable_any closer_cv_;  // waits on mu_: an idle one came back, or stop
  bool stop_ GUARDED_BY(mu_) = false;
  bool closer_parked_ GUARDED_BY(mu_) = false;  // waiting with no deadline: a Put wakes it
  std::thread closer_ GUARDED_BY(mu_);
};

}  // namespace dlock

#endif  // DLOCK_CORE_POOL_H_
