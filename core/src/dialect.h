// Every statement the core sends, in one place per SQL dialect. The rest of
// the core speaks in operations and runs what a Statements holds; which
// text that is was decided once per client, after its first connection
// said which server this is (or the `dialect` option forced it).
//
// dialect_common.cc: what every server of the family accepts alike (most
//   statements: the lease table's columns are written there once).
// dialect_<word>.cc: a dialect's own forms, and its row in dialect_table.h.
// Transaction control (START TRANSACTION, COMMIT, ROLLBACK) and the session
// set-up at connect (conn.cc) are the same words everywhere and stay with
// the code that runs them.
//
// Adding a dialect: one file (its Dialect object), one row in
// dialect_table.h, one test run (tests/core: the statements it pins, and the
// suites with `dialect=<word>` forced) -- see CONTRIBUTING.md.
#ifndef DLOCK_CORE_DIALECT_H_
#define DLOCK_CORE_DIALECT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "options.h"

namespace dlock {

// A table name as an SQL identifier (names are validated at parse time).
inline std::string QuoteIdent(const std::string& ident) { return "`" + ident + "`"; }

// Lease-lock statements (scheme 1). Each is one round trip.
struct LeaseSql {
  std::string acquire;  // params: key, owner, ttl_us
  std::string renew;    // params: ttl_us, key, owner
  std::string release;  // params: key, owner
  std::string read;     // params: key
  std::string get_name;      // params: name, timeout_us -> 1 / 0 / NULL
  std::string release_name;  // params: name
  std::string release_and_wake;  // params: name, key, owner
  // The release of a holder whose own process waits for the key next
  // (lease_scheme.cc HandOver): gives up the wake-up name like
  // release_and_wake, and when no other session was waiting for it (then
  // that session now holds it: the release is plain) and the lease was
  // still live, takes the name back and passes the lease to next_owner in
  // the same statement, with the next token. LAST_INSERT_ID: 0 released
  // (it had expired), 1 released (live), >= 2 passed on with that token
  // (every token is 1 or more, so the next one is 2 or more).
  // params: name, name, name, next_owner x4, ttl_us, key, owner
  std::string hand_over;
  // The claim order (on Galera with fair=1, where wake-up names are
  // node-local): the acquire takes a free lease only if no live claim of
  // another owner is older than the caller's own (none: than any); busy, it
  // reports 2 x the holder's remaining microseconds, + 1 unless the caller
  // is first in line (lease_ops.cc reads it); params: key, owner, ttl_us,
  // then key, owner, key, owner twice (the claims, read by the owner's and
  // by the reply's expression). A waiter that found
  // the lease busy claims (or keeps its claim alive): params key, owner,
  // window_us, window_us; the winner or a waiter that gives up drops it:
  // params key, owner.
  std::string acquire_ordered;
  std::string claim;
  std::string unclaim;
};

// The watchdog's batch (renewer.cc), prepared per size bucket: [i] serves
// 2^i leases (the last one repeated as padding), up to kMaxRenewBatch.
constexpr size_t kMaxRenewBatch = 1024;
struct RenewSql {
  std::vector<std::string> batch;  // params: ttl_us, n keys, n owners
  std::vector<std::string> check;  // params: n keys, n owners -> key, owner, remaining us
};

// The wait slices a row-lock acquisition is made of (row_scheme.cc): a
// bounded set, so that every statement stays prepared and cached.
extern const int64_t kRowSlicesMs[];
extern const size_t kRowSliceCount;

// Row-lock statements (scheme 2).
struct RowSql {
  std::string exists;  // params: name
  std::string create;  // params: name; never waits long behind a holder
  std::string nowait;  // params: name; a row back = locked
  // A server that bounds one statement's lock wait: [i] waits at most
  // kRowSlicesMs[i] ms; params: name. Empty when the dialect bounds waits
  // by the session instead (the fields below).
  std::vector<std::string> sliced;
  // Without per-statement bounds: `take` waits as long as the session's
  // innodb_lock_wait_timeout (whole seconds), which `set_wait` sets
  // (params: seconds) and `restore_wait` gives back before the connection
  // serves anything else. `create` then runs inside set_wait(1)/restore.
  std::string take;  // params: name; a row back = locked
  std::string set_wait;
  std::string restore_wait;
};

// A8's batch and its neighbours (cleanup.cc).
struct CleanupSql {
  std::string isolation;    // before the batch's transaction: its locking reads lock gaps
  std::string lock_floor;   // the fencing floor's row, FOR UPDATE
  std::string pick;         // params: cutoff, limit -> fence of each expired row, locked
  std::string raise_floor;  // params: highest fence deleted
  std::string remove;       // params: cutoff, limit
  std::string cutoff;       // params: grace_us -> the cutoff as text
  std::string count;        // -> rows in the lease table
  std::string claims;       // params: cutoff, limit; dead claims (Galera's claim table)
};

// A lock table: name, the column types dlock checks (type prefixes, as
// information_schema spells them), the DDL that creates it, the privileges
// dlock's statements need on it and, for each, a statement that needs it
// exactly (prepared, never run, to check the privilege).
struct SchemaTable {
  std::string name;
  std::vector<std::pair<std::string, std::string>> cols;
  std::string ddl;
  std::vector<const char*> privileges;  // "SELECT", "INSERT", "UPDATE", "DELETE"
  std::vector<std::string> probes;      // one per privilege
  // Used on a Galera node only (the claim order): created and checked
  // there, left alone elsewhere.
  bool galera_only = false;
};

struct TableSql {
  std::vector<SchemaTable> tables;  // lease, fence, row, claims (Galera)
  std::string seed;     // seeds the fencing-floor row (idempotent)
  std::string epoch;    // moves the floor to the next epoch (kFenceEpoch)
  std::string columns;  // params: table -> COLUMN_NAME, COLUMN_TYPE
  std::string triggers; // params: table -> TRIGGER_NAME (those the user may see)
};

// The operator's statements (admin.cc, `dlock list/release/doctor`). A lease
// read gives: key, owner, fence, held us, remaining us.
struct AdminSql {
  std::string list;    // params: LIKE pattern; held (and revoked) leases by key
  std::string get;     // params: key; live only
  std::string lock;    // params: key; FOR UPDATE, inside a transaction
  std::string revoke;  // params: key, owner
  std::string clock;   // -> the server's UNIX time, in seconds with microseconds
  std::string counts;  // -> rows, held, expired over an hour ago
  std::string grants;  // -> the user's GRANT lines
};

// What a session says about itself.
struct SessionSql {
  // After a statement failed (an error reply carries no status flags): a
  // statement whose reply says whether a transaction is still open. With
  // in_txn_probe_row it returns one row (0 = none open); otherwise the OK
  // reply's status flag (Conn::InTransaction) says it.
  std::string in_txn_probe;
  bool in_txn_probe_row = false;
};

// Every statement of one client, for its tables, in its dialect.
struct Statements {
  const char* dialect = "";
  LeaseSql lease;
  RenewSql renew;
  RowSql row;
  CleanupSql cleanup;
  TableSql schema;
  AdminSql admin;
  SessionSql session;
};

// A lease table made again after a drop continues above the next multiple
// of kFenceEpoch: the floor jumps there (2^40: a key would need 10^12
// acquisitions within one epoch to reach the next; after 8192 re-creations
// tokens are still below 2^53, exact as a double).
constexpr uint64_t kFenceEpoch = uint64_t{1} << 40;

struct Dialect {
  const char* name;  // the option's word
  // Run on every connection before anything else (conn.cc), one row:
  // global read_only, innodb_read_only, version, whether it is a Galera
  // node ("ON"/"1"), the session's binlog_format.
  const char* server_facts;
  // Run after server_facts on a Galera node (conn.cc): rows of (session
  // wsrep_on, status name, value) for wsrep_ready, wsrep_cluster_status,
  // wsrep_local_state_comment and wsrep_cluster_size. Both are the server
  // family's (chosen by its version, not by a forced dialect).
  const char* galera_health;
  // The statements for opts' tables. on_mariadb: the server's version names
  // MariaDB (a dialect forced against a server of another family may need
  // to say where it differs; dialect_mysql.cc does for one statement).
  Statements (*build)(const ClientOptions& opts, bool on_mariadb);
};

#define DLOCK_DIALECT_DECLARE(id, word, marker, object) extern const Dialect object;
DLOCK_DIALECTS(DLOCK_DIALECT_DECLARE)
#undef DLOCK_DIALECT_DECLARE

// What every dialect shares (dialect_common.cc); a dialect's build starts here.
Statements CommonStatements(const ClientOptions& opts);

// The claim-ordered acquire (LeaseSql::acquire_ordered) in a dialect's
// forms: `inserted(col)` names the inserted row's column in the upsert
// (VALUES(col) or new.col), `alias` follows the VALUES list (" AS new" or
// ""), `share` is the share-lock clause of the fencing floor's read.
std::string OrderedAcquire(const ClientOptions& opts, std::string (*inserted)(const char* col),
                           const char* alias, const char* share);

// The dialect for a server: the forced one, or the first row of
// dialect_table.h whose marker the version contains.
const Dialect& ChooseDialect(SqlDialect forced, const std::string& server_version);
// Whether a server's version names MariaDB.
bool IsMariaDbVersion(const std::string& server_version);
// The statements without a server (`dlock init --print-sql`): the forced
// dialect's, MariaDB's for auto.
Statements OfflineStatements(const ClientOptions& opts);

}  // namespace dlock

#endif  // DLOCK_CORE_DIALECT_H_
