// Which dialect a server speaks, and the statements every server of the
// family accepts alike (a dialect's build starts from these; its own file
// says where it differs).
#include "dialect.h"

namespace dlock {

namespace {

const std::string kNow = "UTC_TIMESTAMP(6)";

std::string Placeholders(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s;
}

// The columns every operator's lease read selects, in this order.
std::string LeaseColumns() {
  return "lock_key, owner, fence, TIMESTAMPDIFF(MICROSECOND, create_time, " + kNow +
         "), TIMESTAMPDIFF(MICROSECOND, " + kNow + ", expire_time)";
}

// A statement that needs exactly the privilege p on table t (col: its
// primary key): prepared unrun, it tells whether the user holds it.
std::string Probe(const std::string& p, const std::string& t, const std::string& col) {
  if (p == "SELECT") return "SELECT 1 FROM " + t + " WHERE 0";
  if (p == "INSERT") return "INSERT INTO " + t + " (" + col + ") VALUES (?)";
  if (p == "UPDATE") return "UPDATE " + t + " SET " + col + " = " + col + " WHERE 0";
  return "DELETE FROM " + t + " WHERE 0";
}

std::vector<SchemaTable> Tables(const ClientOptions& opts) {
  const std::string t = opts.table, f = opts.table + "_fence", r = opts.row_table;
  // Every column is binary or numeric: the server's default character set
  // and collation cannot change what a key means (B2).
  std::vector<SchemaTable> out = {
      {t,
       {{"lock_key", "varbinary("}, {"owner", "varbinary("}, {"expire_time", "datetime(6)"},
        {"create_time", "datetime(6)"}, {"fence", "bigint"}},
       "CREATE TABLE IF NOT EXISTS " + QuoteIdent(t) +
           " (lock_key VARBINARY(512) NOT NULL COMMENT 'lock name, compared byte for byte',"
           " owner VARBINARY(255) NOT NULL COMMENT 'host:pid:uuid of the holder; empty = free',"
           " expire_time DATETIME(6) NOT NULL COMMENT 'UTC, by the server clock',"
           " create_time DATETIME(6) NOT NULL COMMENT 'UTC, when the current holder acquired',"
           " fence BIGINT UNSIGNED NOT NULL COMMENT 'fencing token: grows with every acquisition',"
           " PRIMARY KEY (lock_key), KEY idx_expire_time (expire_time))"
           " ENGINE=InnoDB COMMENT='dlock lease locks'",
       // acquire (INSERT .. ON DUPLICATE KEY UPDATE), renew and release
       // (UPDATE), cleanup (DELETE)
       {"SELECT", "INSERT", "UPDATE", "DELETE"},
       {}},
      {f,
       {{"id", "tinyint"}, {"fence_floor", "bigint"}},
       "CREATE TABLE IF NOT EXISTS " + QuoteIdent(f) +
           " (id TINYINT UNSIGNED NOT NULL PRIMARY KEY,"
           " fence_floor BIGINT UNSIGNED NOT NULL COMMENT 'highest token of any deleted lease row')"
           " ENGINE=InnoDB COMMENT='dlock: fencing floor kept across cleanup'",
       // read by acquire, seeded at open (INSERT IGNORE), raised by cleanup
       {"SELECT", "INSERT", "UPDATE"},
       {}},
      {r,
       {{"lock_name", "varbinary("}, {"updated_time", "datetime(6)"}},
       "CREATE TABLE IF NOT EXISTS " + QuoteIdent(r) +
           " (lock_name VARBINARY(512) NOT NULL COMMENT 'lock name, compared byte for byte',"
           " updated_time DATETIME(6) NULL COMMENT 'UTC, when the row was created',"
           " PRIMARY KEY (lock_name)) ENGINE=InnoDB COMMENT='dlock row locks (SELECT ... FOR UPDATE)'",
       // SELECT .. FOR UPDATE (MariaDB asks only SELECT), rows created by INSERT IGNORE
       {"SELECT", "INSERT"},
       {}},
  };
  // The claim order's table (Galera only; lease_scheme.cc): a waiter's
  // place in line across nodes, which a node-local wake-up cannot keep.
  SchemaTable claims = {
      t + "_claim",
      {{"lock_key", "varbinary("}, {"claimant", "varbinary("}, {"since_time", "datetime(6)"},
       {"until_time", "datetime(6)"}},
      "CREATE TABLE IF NOT EXISTS " + QuoteIdent(t + "_claim") +
          " (lock_key VARBINARY(512) NOT NULL COMMENT 'the lease waited for',"
          " claimant VARBINARY(255) NOT NULL COMMENT 'owner id of the waiting acquisition',"
          " since_time DATETIME(6) NOT NULL COMMENT 'UTC, when it began to wait: its place in line',"
          " until_time DATETIME(6) NOT NULL COMMENT 'UTC, when the claim dies unless kept alive',"
          " PRIMARY KEY (lock_key, claimant)) ENGINE=InnoDB"
          " COMMENT='dlock: waiters in line for a lease (Galera, fair=1)'",
      // claimed (INSERT .. ON DUPLICATE KEY UPDATE), read by the acquire,
      // dropped (DELETE)
      {"SELECT", "INSERT", "UPDATE", "DELETE"},
      {},
      true};
  out.push_back(claims);
  for (SchemaTable& tb : out)
    for (const char* p : tb.privileges)
      tb.probes.push_back(Probe(p, QuoteIdent(tb.name), tb.cols.front().first));
  return out;
}

}  // namespace

Statements CommonStatements(const ClientOptions& opts) {
  Statements s;
  const std::string t = QuoteIdent(opts.table);
  const std::string f = QuoteIdent(opts.table + "_fence");
  const std::string r = QuoteIdent(opts.row_table);

  // Lease (lease_scheme.cc). The acquire is each dialect's own.
  // A renewal never moves the expiry back: one that ran late (sent before a
  // cut, executed after the renewal that replaced it, with the older NOW)
  // would otherwise shorten the lease below what the holder was told. The
  // 1 us step keeps the row changed, so the affected count still says "ours
  // and live" without CLIENT_FOUND_ROWS.
  const std::string extend = " SET expire_time = GREATEST(expire_time + INTERVAL 1 MICROSECOND, " + kNow +
                             " + INTERVAL ? MICROSECOND)";
  s.lease.renew = "UPDATE " + t + extend + " WHERE lock_key = ? AND owner = ? AND expire_time >= " + kNow;
  // Release frees the row in place (the fence survives) and reports through
  // LAST_INSERT_ID whether the lease was still live by the DB clock.
  s.lease.release = "UPDATE " + t + " SET owner = '', expire_time = IF(LAST_INSERT_ID(expire_time >= " +
                    kNow + "), '1970-01-01 00:00:00', '1970-01-01 00:00:00') "
                    "WHERE lock_key = ? AND owner = ?";
  s.lease.read = "SELECT owner, fence, TIMESTAMPDIFF(MICROSECOND, " + kNow + ", expire_time) FROM " +
                 t + " WHERE lock_key = ?";
  // Wake-up hint only (never exclusion): a waiter blocks here until the
  // holder that came through this same path releases, or the timeout.
  s.lease.get_name = "SELECT GET_LOCK(?, ? / 1000000)";
  s.lease.release_name = "DO RELEASE_LOCK(?)";
  // The release of a holder that keeps the wake-up name gives the name up
  // inside the same statement: the next waiter is woken while our commit is
  // being flushed, and its acquire queues on the row lock we release at
  // commit, instead of starting only after our reply came back.
  s.lease.release_and_wake = "UPDATE " + t +
                             " SET owner = '', expire_time = IF(LAST_INSERT_ID(expire_time >= " +
                             kNow + ") + 0 * IFNULL(RELEASE_LOCK(?), 0), '1970-01-01 00:00:00', "
                             "'1970-01-01 00:00:00') WHERE lock_key = ? AND owner = ?";
  // Assignment order matters: owner is decided first, once (the name
  // functions run once); the others read the new owner. The name is given
  // up whatever the lease's state (+ evaluates both sides; AND stops at the
  // first false).
  s.lease.hand_over = "UPDATE " + t + " SET owner = IF((expire_time >= " + kNow +
                      ") + 0 * IFNULL(RELEASE_LOCK(?), 0) AND IS_USED_LOCK(?) IS NULL AND "
                      "GET_LOCK(?, 0) = 1, ?, ''), "
                      "fence = IF(owner = ?, LAST_INSERT_ID(fence + 1), fence + 0 * LAST_INSERT_ID(expire_time >= " +
                      kNow + ")), create_time = IF(owner = ?, " + kNow + ", create_time), "
                      "expire_time = IF(owner = ?, " + kNow + " + INTERVAL ? MICROSECOND, "
                      "'1970-01-01 00:00:00') WHERE lock_key = ? AND owner = ?";

  // The claim order (lease_scheme.cc). A claim keeps its place (since_time)
  // while it is kept alive; until_time moves with each keep-alive.
  const std::string c = QuoteIdent(opts.table + "_claim");
  s.lease.claim = "INSERT INTO " + c + " (lock_key, claimant, since_time, until_time) VALUES (?, ?, " +
                  kNow + ", " + kNow + " + INTERVAL ? MICROSECOND) ON DUPLICATE KEY UPDATE "
                  "until_time = " + kNow + " + INTERVAL ? MICROSECOND";
  s.lease.unclaim = "DELETE FROM " + c + " WHERE lock_key = ? AND claimant = ?";

  // The watchdog's batch (renewer.cc). Exact despite the two IN lists: an
  // owner id belongs to one acquisition of one key, so (key, owner) pairs
  // cannot mix.
  for (size_t n = 1; n <= kMaxRenewBatch; n <<= 1) {
    const std::string in = Placeholders(n);
    const std::string where = " WHERE lock_key IN (" + in + ") AND owner IN (" + in + ")";
    s.renew.batch.push_back("UPDATE " + t + extend + where + " AND expire_time >= " + kNow);
    s.renew.check.push_back("SELECT lock_key, owner, TIMESTAMPDIFF(MICROSECOND, " + kNow +
                            ", expire_time) FROM " + t + where);
  }

  // Row (row_scheme.cc): the article's SELECT .. FOR UPDATE, a locking
  // read, so acquiring and releasing cost no log flush. How a wait is
  // bounded is each dialect's own.
  s.row.take = "SELECT 1 FROM " + r + " WHERE lock_name = ? FOR UPDATE";
  s.row.exists = "SELECT 1 FROM " + r + " WHERE lock_name = ?";
  s.row.nowait = s.row.take + " NOWAIT";

  // Cleanup (cleanup.cc).
  const std::string range = " WHERE expire_time < ? ORDER BY expire_time LIMIT ?";
  s.cleanup.isolation = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ";
  s.cleanup.lock_floor = "SELECT fence_floor FROM " + f + " WHERE id = 1 FOR UPDATE";
  s.cleanup.pick = "SELECT fence FROM " + t + range + " FOR UPDATE";
  s.cleanup.raise_floor = "UPDATE " + f + " SET fence_floor = GREATEST(fence_floor, ?) WHERE id = 1";
  s.cleanup.remove = "DELETE FROM " + t + range;
  s.cleanup.cutoff = "SELECT DATE_FORMAT(" + kNow +
                     " - INTERVAL ? MICROSECOND, '%Y-%m-%d %H:%i:%s.%f')";
  s.cleanup.count = "SELECT COUNT(*) FROM " + t;
  // A claim left by a waiter that died (its window long over).
  s.cleanup.claims = "DELETE FROM " + QuoteIdent(opts.table + "_claim") + " WHERE until_time < ? LIMIT ?";

  // Schema (schema.cc).
  s.schema.tables = Tables(opts);
  s.schema.seed = "INSERT IGNORE INTO " + f + " (id, fence_floor) VALUES (1, 0)";
  s.schema.epoch = "UPDATE " + f + " SET fence_floor = (fence_floor DIV " +
                   std::to_string(kFenceEpoch) + " + 1) * " + std::to_string(kFenceEpoch) +
                   " WHERE id = 1";
  s.schema.columns =
      "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
      "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?";
  s.schema.triggers =
      "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS "
      "WHERE EVENT_OBJECT_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = ? ORDER BY TRIGGER_NAME";

  // The operator's (admin.cc).
  s.admin.list = "SELECT " + LeaseColumns() + " FROM " + t + " WHERE expire_time >= " + kNow +
                 " AND lock_key LIKE ? ORDER BY lock_key";
  s.admin.get = "SELECT " + LeaseColumns() + " FROM " + t + " WHERE lock_key = ? AND expire_time >= " +
                kNow;
  s.admin.lock = "SELECT " + LeaseColumns() + " FROM " + t + " WHERE lock_key = ? FOR UPDATE";
  s.admin.revoke = "UPDATE " + t + " SET owner = '' WHERE lock_key = ? AND owner = ?";
  s.admin.clock = "SELECT UNIX_TIMESTAMP(NOW(6))";
  s.admin.counts = "SELECT COUNT(*), IFNULL(SUM(owner <> '' AND expire_time >= " + kNow +
                   "), 0), IFNULL(SUM(expire_time < " + kNow + " - INTERVAL 1 HOUR), 0) FROM " + t;
  s.admin.grants = "SHOW GRANTS";
  return s;
}

std::string OrderedAcquire(const ClientOptions& opts, std::string (*inserted)(const char* col),
                           const char* alias, const char* share) {
  const std::string t = QuoteIdent(opts.table);
  const std::string f = QuoteIdent(opts.table + "_fence");
  const std::string c = QuoteIdent(opts.table + "_claim");
  const std::string owner = inserted("owner");
  // A live claim of another owner that is older than ours (with none of our
  // own: any live claim) keeps a free lease for it.
  const std::string first =
      "NOT EXISTS (SELECT 1 FROM " + c + " w WHERE w.lock_key = ? AND w.claimant <> ? AND "
      "w.until_time >= " + kNow + " AND w.since_time < COALESCE((SELECT m.since_time FROM " + c +
      " m WHERE m.lock_key = ? AND m.claimant = ?), '9999-12-31'))";
  // Unlike the plain acquire, the owner is decided first and only once, and
  // the rest follows from it: a new owner or our own expired lease gets the
  // next token, our own live one keeps its token (a repeat), and a lease
  // that stays another's reports 2 x its remaining microseconds (0 when it
  // is free but kept for an older claim), + 1 unless the caller is first in
  // the claim order (no older live claim of another owner: it polls fast).
  return "INSERT INTO " + t + " (lock_key, owner, expire_time, create_time, fence) VALUES (?, ?, " +
         kNow + " + INTERVAL ? MICROSECOND, " + kNow +
         ", LAST_INSERT_ID(COALESCE((SELECT fence_floor FROM " + f + " WHERE id = 1 " + share +
         "), 0) + 1))" + alias + " ON DUPLICATE KEY UPDATE "
         "owner = IF(owner = " + owner + " OR (expire_time < " + kNow + " AND " + first + "), " +
         owner + ", owner), "
         "fence = IF(owner <> " + owner + ", fence + 0 * LAST_INSERT_ID(2 * GREATEST(0, "
         "TIMESTAMPDIFF(MICROSECOND, " + kNow + ", expire_time)) + IF(" + first + ", 0, 1)), "
         "IF(expire_time < " + kNow +
         ", LAST_INSERT_ID(fence + 1), LAST_INSERT_ID(fence))), "
         "create_time = IF(owner = " + owner + " AND expire_time < " + kNow + ", " + kNow +
         ", create_time), "
         "expire_time = IF(owner = " + owner + ", GREATEST(expire_time + INTERVAL 1 MICROSECOND, " +
         inserted("expire_time") + "), expire_time)";
}

bool IsMariaDbVersion(const std::string& server_version) {
  return server_version.find("MariaDB") != std::string::npos;
}

const Dialect& ChooseDialect(SqlDialect forced, const std::string& server_version) {
  switch (forced) {
#define DLOCK_DIALECT_FORCED(id, word, marker, object) \
  case SqlDialect::id:                                 \
    return object;
    DLOCK_DIALECTS(DLOCK_DIALECT_FORCED)
#undef DLOCK_DIALECT_FORCED
    case SqlDialect::kAuto:
      break;
  }
#define DLOCK_DIALECT_MARKED(id, word, marker, object) \
  if (server_version.find(marker) != std::string::npos) return object;
  DLOCK_DIALECTS(DLOCK_DIALECT_MARKED)
#undef DLOCK_DIALECT_MARKED
  return kMySqlDialect;  // not reached: the last row's marker is ""
}

Statements OfflineStatements(const ClientOptions& opts) {
  return ChooseDialect(opts.dialect, "MariaDB").build(opts, false);
}

}  // namespace dlock
