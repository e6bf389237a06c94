// The client behind dlock::Client: options, the connection pool, the
// statements of its dialect (built once from validated table names) and the
// schema.
#ifndef DLOCK_CORE_CLIENT_IMPL_H_
#define DLOCK_CORE_CLIENT_IMPL_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dlock/core.hpp"
#include "events.h"
#include "options.h"
#include "pool.h"
#include "renewer.h"
#include "retry.h"
#include "shared_locks.h"
#include "thread_annotations.h"
#include "waiters.h"

namespace dlock {

// The lock tables (their statements: dialect.h's TableSql).
// OK when table has the columns want (type prefixes); kState when it does
// not exist; kDb naming the column that is missing or of another type.
Status CheckTableColumns(Conn& conn, const TableSql& sql, const std::string& table,
                         const std::vector<std::pair<std::string, std::string>>& want);
// Whether the connection's user holds the privileges dlock needs on an
// existing table (its statements prepared, never run): kDb naming the
// privilege and the table otherwise.
Status CheckTablePrivileges(Conn& conn, const ClientOptions& opts, const SchemaTable& table);
// Creates the missing lock tables, checks the columns of all of them and the
// user's privileges on them, and seeds the fencing floor: a client's open,
// and `dlock init`. A table missing without the CREATE privilege is kDb
// saying to run `dlock init`.
Status EnsureTables(Conn& conn, const TableSql& sql, const ClientOptions& opts);

// On Galera any node's death stalls every write for ~6 s (research: 5.6-6.4 s
// after a SIGKILL, evs.suspect_timeout 5 s + the view change): below these,
// a TOPOLOGY warning (client open, first lock with such a ttl) and doctor.
constexpr int64_t kGaleraMinTtlMs = 15000;
constexpr int kGaleraMinReadTimeoutS = 10;

// How long opening a new connection may take (every node of a multi-host
// URL tried included).
enum class ConnectBy {
  kWait,     // the caller's wait (at least kPoolGrace): a try, a lock's wait
  kPerNode,  // connect_timeout per node: what has no wait of its own (a
             // release, a renewal, a transaction's start, the cleanup),
             // where giving up early would cost more than the wait
};

class ClientImpl {
 public:
  // opts: one server's, parsed, with cfg's client options applied
  // (ParseServers); cfg's lock options become the locks' defaults.
  // events: the queue to fill (a client over several servers shares one
  // among them); nullptr = a queue of its own, of the events option's size.
  static Status Open(ClientOptions opts, const Config& cfg, std::unique_ptr<ClientImpl>* out,
                     std::shared_ptr<Events> events = nullptr);
  ~ClientImpl();

  const ClientOptions& options() const { return opts_; }
  const LockOptions& lock_defaults() const { return lock_defaults_; }
  const ServerInfo& server() const { return server_; }
  Pool& pool() { return pool_; }
  pid_t pid() const { return pid_; }
  // Every statement it sends, in the server's dialect (built at Open,
  // once the first connection said which server this is).
  const Statements& sql() const { return sql_; }

  // host:pid:uuid, new for every acquisition (A4).
  std::string NewOwner();

  // Borrow a connection for one statement; waits at most until deadline, but
  // at least kPoolGrace so that a zero wait still gets a connection. With
  // ConnectBy::kWait opening one ends by then too.
  Status GetConn(Clock::time_point deadline, PooledConn* out,
                 const std::function<bool()>& stop = nullptr, ConnectBy by = ConnectBy::kWait);
  // The same, with the caller's reading of the clock for "now" (one read
  // per operation on the uncontended path).
  Status GetConn(Clock::time_point deadline, PooledConn* out, const std::function<bool()>& stop,
                 ConnectBy by, Clock::time_point now);
  // Until when a statement dropped with its connection is re-run on a fresh
  // one: the call's deadline, or connect_timeout from now if that is later.
  Clock::time_point RetryUntil(Clock::time_point deadline) const;

  // Creates the lock tables that are missing and checks the columns of
  // those that exist (Open does it too; this is for an open client, e.g.
  // after the tables were dropped). Forgets which lock rows it saw.
  Status EnsureSchema() EXCLUDES(rows_mu_);

  // Row locks: the rows this client knows exist (so that an acquisition
  // does not check again).
  bool RowKnown(const std::string& name) EXCLUDES(rows_mu_);
  void NoteRow(const std::string& name) EXCLUDES(rows_mu_);

  // A8: deletes leases expired for longer than the grace, in batches, while
  // holding the cleanup lock (skipped, *ran = false, when another client
  // holds it). Keeps the fencing floor above every deleted token.
  Status Cleanup(uint64_t* deleted, bool* ran);

  Counters& counters() { return counters_; }
  void PushEvent(Event e) { events_->Push(std::move(e), &counters_.events_dropped); }
  void Raise(EventType type, Severity severity, const std::string& key, const std::string& owner,
             uint64_t token, std::string message) {
    Event e;
    e.type = type;
    e.severity = severity;
    e.key = key;
    e.owner = owner;
    e.token = token;
    e.message = std::move(message);
    PushEvent(std::move(e));
  }
  bool PopEvent(Clock::time_point deadline, Event* out) { return events_->Pop(deadline, out); }
  Renewer& renewer() { return renewer_; }
  // The lock objects of this client that share a hold (holder=thread,
  // reentrant), by identity (mode and key): shared_locks.h.
  SharedLocks& shared_locks() { return shared_locks_; }
  WaitQueues& waiters() { return waiters_; }
  // Wake-up names (GET_LOCK) are used unless the server is a Galera node.
  bool wakeup_supported() const { return !server_.galera; }
  // On Galera, a TOPOLOGY warning (once per client) for a lease ttl that
  // cannot ride out the ~6 s write stall of a node's death (under 15 s).
  void CheckTtlForTopology(const LockOptions& lock, const std::string& key);

 private:
  ClientImpl(ClientOptions opts, LockOptions lock_defaults, std::shared_ptr<Events> events);
  Status InitSchema(Conn& conn);

  ClientOptions opts_;
  LockOptions lock_defaults_;
  Pool pool_;
  ServerInfo server_;
  std::atomic<bool> warned_short_ttl_{false};
  pid_t pid_;
  std::string host_;
  const std::string owner_prefix_;  // "host:pid:", every owner id's start
  Statements sql_;
  SharedLocks shared_locks_;
  Mutex rows_mu_;
  std::unordered_set<std::string> known_rows_ GUARDED_BY(rows_mu_);
  Counters counters_;
  std::shared_ptr<Events> events_;
  WaitQueues waiters_;
  // Periodic cleanup (cleanup_interval_ms > 0).
  Mutex janitor_mu_;
  std::condition_variable_any janitor_cv_;  // waits on janitor_mu_
  bool janitor_stop_ GUARDED_BY(janitor_mu_) = false;
  std::thread janitor_;  // started by StartJanitor after Open, joined by the destructor
  void JanitorLoop() EXCLUDES(janitor_mu_);
  // The claim order's unclaimer (Galera, fair=1): deletes won claims off
  // the winners' path; started by the first UnclaimSoon, joined by the
  // destructor once what is queued is done (a claim queued longer ago than
  // its window is dead already and skipped; the first failure at close
  // leaves the rest to their windows).
  Mutex unclaim_mu_;
  std::condition_variable_any unclaim_cv_;  // waits on unclaim_mu_
  bool unclaim_stop_ GUARDED_BY(unclaim_mu_) = false;
  struct Unclaim {
    std::string key, owner;
    Clock::time_point queued;
  };
  std::vector<Unclaim> unclaims_ GUARDED_BY(unclaim_mu_);
  std::thread unclaimer_ GUARDED_BY(unclaim_mu_);
  void UnclaimLoop() EXCLUDES(unclaim_mu_);
  // Declared last: destroyed first, while everything it uses still exists.
  Renewer renewer_;

 public:
  void StartJanitor();
  // Deletes owner's claim on key (LeaseUnclaim) soon, on another thread.
  void UnclaimSoon(const std::string& key, const std::string& owner) EXCLUDES(unclaim_mu_);
};

// Fresh connections for RunIdempotent (retry.h) from a client's pool,
// through GetConn (so a zero wait still gets one): one at a time, the
// previous one given back first (a broken one is closed there).
class PoolConns : public ConnSource {
 public:
  PoolConns(ClientImpl* client, Clock::time_point deadline,
            std::function<bool()> stop = nullptr, ConnectBy by = ConnectBy::kWait)
      : client_(client), deadline_(deadline), stop_(std::move(stop)), by_(by) {}
  Status Fresh(SqlConn** out) override;
  // The connection Fresh handed out last (nullptr before the first).
  Conn* current() { return held_ ? &*held_ : nullptr; }

 private:
  ClientImpl* client_;
  Clock::time_point deadline_;
  std::function<bool()> stop_;
  ConnectBy by_;
  PooledConn held_;
};

}  // namespace dlock

#endif  // DLOCK_CORE_CLIENT_IMPL_H_
