// The client behind dlock::Client: options, the connection pool, the SQL of
// both lock schemes (built once from validated table names) and the schema.
#ifndef DLOCK_CORE_CLIENT_IMPL_H_
#define DLOCK_CORE_CLIENT_IMPL_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dlock/core.hpp"
#include "events.h"
#include "options.h"
#include "pool.h"
#include "renewer.h"
#include "retry.h"
#include "waiters.h"

namespace dlock {

// Lease-lock statements (scheme 1). Each is one round trip.
struct LeaseSql {
  std::string acquire;  // params: key, owner, ttl_us
  std::string renew;    // params: ttl_us, key, owner
  std::string release;  // params: key, owner
  std::string read;     // params: key
  std::string get_name;      // params: name, timeout_us -> 1 / 0 / NULL
  std::string release_name;  // params: name
  std::string release_and_wake;  // params: name, key, owner
};

// Row-lock statements (scheme 2).
struct RowSql {
  std::string exists;  // params: name
  std::string create;  // params: name
  std::string nowait;  // params: name; a row back = locked
  // Lock waiting at most kRowSlicesMs[i] ms; params: name.
  std::vector<std::string> sliced;
};

// A table name as an SQL identifier (names are validated at parse time).
inline std::string QuoteIdent(const std::string& ident) { return "`" + ident + "`"; }

// The statements of each scheme are built once per client from the
// validated table names, in the scheme's own file (lease_scheme.cc,
// row_scheme.cc) next to the code that runs them and reads their results.
LeaseSql MakeLeaseSql(const ClientOptions& opts);
RowSql MakeRowSql(const ClientOptions& opts);

// The wait slices a row-lock acquisition is made of: a bounded set, so that
// every statement stays prepared and cached.
extern const int64_t kRowSlicesMs[];
extern const size_t kRowSliceCount;

// Brackets every attempt of a statement that may block (on each connection
// the retries use), so that a cancel can end it at once by shutting its
// socket: a lock's LockHost::EnterServerWait / LeaveServerWait (scheme.h).
// enter returns false when the call was cancelled already (the statement
// is not sent).
struct ServerWait {
  std::function<bool(Conn&)> enter;
  std::function<void()> leave;
};

struct LeaseAttempt {
  bool won = false;
  uint64_t fence = 0;           // when won
  int64_t remaining_us = 0;     // when busy: the holder's lease, by the DB clock
  Clock::time_point sent_at{};  // when the winning statement was sent
};

// The lock tables: name, the column types dlock checks (type prefixes, as
// information_schema spells them), the DDL that creates the table and the
// privileges dlock's statements need on it. The single source for the
// client's own schema setup and for `dlock init --print-sql` / `dlock doctor`.
struct SchemaTable {
  std::string name;
  std::vector<std::pair<std::string, std::string>> cols;
  std::string ddl;
  std::vector<const char*> privileges;  // "SELECT", "INSERT", "UPDATE", "DELETE"
};
std::vector<SchemaTable> SchemaTables(const ClientOptions& opts);
// Seeds the fencing-floor row (idempotent).
std::string SchemaSeedSql(const ClientOptions& opts);
// OK when table has the columns want (type prefixes); kState when it does
// not exist; kDb naming the column that is missing or of another type.
Status CheckTableColumns(Conn& conn, const std::string& table,
                         const std::vector<std::pair<std::string, std::string>>& want);
// Whether the connection's user holds the privileges dlock needs on an
// existing table (its statements prepared, never run): kDb naming the
// privilege and the table otherwise.
Status CheckTablePrivileges(Conn& conn, const ClientOptions& opts, const SchemaTable& table);
// Creates the missing lock tables, checks the columns of all of them and the
// user's privileges on them, and seeds the fencing floor: a client's open,
// and `dlock init`. A table missing without the CREATE privilege is kDb
// saying to run `dlock init`.
Status EnsureTables(Conn& conn, const ClientOptions& opts);
// A lease table made again after a drop continues above the next multiple
// of kFenceEpoch: the floor jumps there (2^40: a key would need 10^12
// acquisitions within one epoch to reach the next; after 8192 re-creations
// tokens are still below 2^53, exact as a double).
constexpr uint64_t kFenceEpoch = uint64_t{1} << 40;

// On Galera any node's death stalls every write for ~6 s (research: 5.6-6.4 s
// after a SIGKILL, evs.suspect_timeout 5 s + the view change): below these,
// a TOPOLOGY warning (client open, first lock with such a ttl) and doctor.
constexpr int64_t kGaleraMinTtlMs = 15000;
constexpr int kGaleraMinReadTimeoutS = 10;
// Moves the floor to the next epoch; run before the lease table is created
// again (schema.cc).
std::string FenceEpochSql(const ClientOptions& opts);

class ClientImpl {
 public:
  static Status Open(const std::string& url, const Config& cfg, std::unique_ptr<ClientImpl>* out);
  ~ClientImpl();

  const ClientOptions& options() const { return opts_; }
  const LockOptions& lock_defaults() const { return lock_defaults_; }
  const ServerInfo& server() const { return server_; }
  Pool& pool() { return pool_; }
  pid_t pid() const { return pid_; }
  const LeaseSql& lease_sql() const { return lease_sql_; }
  const RowSql& row_sql() const { return row_sql_; }

  // host:pid:uuid, new for every acquisition (A4).
  std::string NewOwner();

  // Borrow a connection for one statement; waits at most until deadline, but
  // at least kPoolGrace so that a zero wait still gets a connection.
  Status GetConn(Clock::time_point deadline, PooledConn* out,
                 const std::function<bool()>& stop = nullptr);
  // Until when a statement dropped with its connection is re-run on a fresh
  // one: the call's deadline, or connect_timeout from now if that is later.
  Clock::time_point RetryUntil(Clock::time_point deadline) const;

  // Scheme 1, one statement each (defined in lease_scheme.cc, beside the
  // statements), re-run on a fresh connection when the connection drops
  // (they are idempotent for the same owner) and on 1213: RunIdempotent
  // (retry.h).
  // preferred: a connection the caller already holds (used first; the pool
  // serves the retries), or nullptr.
  // wait (may be null): brackets each attempt's statement (ServerWait).
  Status LeaseAcquire(const std::string& key, const std::string& owner, int64_t ttl_ms,
                      Clock::time_point deadline, Conn* preferred, LeaseAttempt* out,
                      const std::function<bool()>& stop = nullptr,
                      const ServerWait* wait = nullptr);
  // *renewed: the row was ours and live by the DB clock, and is extended.
  Status LeaseRenew(const std::string& key, const std::string& owner, int64_t ttl_ms,
                    bool* renewed, Clock::time_point* sent_at);
  // *released: our row was live and is now free; *ours: it was still ours
  // (false = someone else's now).
  Status LeaseRelease(const std::string& key, const std::string& owner, Conn* preferred,
                      bool* released, bool* ours);

  // Creates the lock tables that are missing and checks the columns of
  // those that exist (Open does it too; this is for an open client, e.g.
  // after the tables were dropped). Forgets which lock rows it saw.
  Status EnsureSchema();

  // Row locks: the rows this client knows exist (so that an acquisition
  // does not check again).
  bool RowKnown(const std::string& name);
  void NoteRow(const std::string& name);

  // A8: deletes leases expired for longer than the grace, in batches, while
  // holding the cleanup lock (skipped, *ran = false, when another client
  // holds it). Keeps the fencing floor above every deleted token.
  Status Cleanup(uint64_t* deleted, bool* ran);

  Counters& counters() { return counters_; }
  void PushEvent(Event e) { events_.Push(std::move(e), &counters_.events_dropped); }
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
  bool PopEvent(Clock::time_point deadline, Event* out) { return events_.Pop(deadline, out); }
  Renewer& renewer() { return renewer_; }
  // The lock objects of this client that share a hold (holder=thread,
  // reentrant): *out is the live LockImpl for identity (mode and key), or
  // make() a new one. kInvalid, naming the option, when the live one has
  // other lock options.
  Status SharedLock(const std::string& identity, const LockOptions& opts,
                    const std::function<std::shared_ptr<LockImpl>()>& make,
                    std::shared_ptr<LockImpl>* out);
  void ForgetLock(const std::string& identity, const LockImpl* l);
  WaitQueues& waiters() { return waiters_; }
  // Wake-up names (GET_LOCK) are used unless the server is a Galera node.
  bool wakeup_supported() const { return !server_.galera; }
  // On Galera, a TOPOLOGY warning (once per client) for a lease ttl that
  // cannot ride out the ~6 s write stall of a node's death (under 15 s).
  void CheckTtlForTopology(const LockOptions& lock, const std::string& key);

 private:
  ClientImpl(ClientOptions opts, LockOptions lock_defaults);
  Status InitSchema(Conn& conn);

  ClientOptions opts_;
  LockOptions lock_defaults_;
  Pool pool_;
  ServerInfo server_;
  std::atomic<bool> warned_short_ttl_{false};
  pid_t pid_;
  std::string host_;
  LeaseSql lease_sql_;
  RowSql row_sql_;
  std::mutex locks_mu_;
  std::unordered_map<std::string, std::weak_ptr<LockImpl>> locks_;
  std::mutex rows_mu_;
  std::unordered_set<std::string> known_rows_;
  Counters counters_;
  Events events_;
  WaitQueues waiters_;
  // Periodic cleanup (cleanup_interval_ms > 0).
  std::mutex janitor_mu_;
  std::condition_variable janitor_cv_;
  bool janitor_stop_ = false;
  std::thread janitor_;
  void JanitorLoop();
  // Declared last: destroyed first, while everything it uses still exists.
  Renewer renewer_;

 public:
  void StartJanitor();
};

// Fresh connections for RunIdempotent (retry.h) from a client's pool,
// through GetConn (so a zero wait still gets one): one at a time, the
// previous one given back first (a broken one is closed there).
class PoolConns : public ConnSource {
 public:
  PoolConns(ClientImpl* client, Clock::time_point deadline,
            std::function<bool()> stop = nullptr)
      : client_(client), deadline_(deadline), stop_(std::move(stop)) {}
  Status Fresh(SqlConn** out) override;
  // The connection Fresh handed out last (nullptr before the first).
  Conn* current() { return held_ ? &*held_ : nullptr; }

 private:
  ClientImpl* client_;
  Clock::time_point deadline_;
  std::function<bool()> stop_;
  PooledConn held_;
};

}  // namespace dlock

#endif  // DLOCK_CORE_CLIENT_IMPL_H_
