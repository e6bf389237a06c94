// MariaDB (10.6 and later; tested on 10.11): where its statements differ
// from dialect.cc's common ones. Per-statement variables (SET STATEMENT ..
// FOR) bound a row lock's wait in one round trip; `VALUES(col)` and
// `LOCK IN SHARE MODE` are its only forms of the upsert and the share lock;
// @@in_transaction answers after a failed statement.
#include <cstdio>

#include "dialect.h"

namespace dlock {

namespace {

Statements Build(const ClientOptions& opts, bool /*on_mariadb*/) {
  Statements s = CommonStatements(opts);
  s.dialect = "mariadb";
  const std::string t = QuoteIdent(opts.table);
  const std::string f = QuoteIdent(opts.table + "_fence");
  const std::string r = QuoteIdent(opts.row_table);
  const std::string now = "UTC_TIMESTAMP(6)";
  // One statement takes a free key, takes over an expired lease, or repeats
  // our own acquisition (a retry after a dropped connection). Assignment
  // order matters: fence and create_time read the old expiry, owner is
  // decided next, expire_time last (it compares against the new owner).
  // Our own repeat only moves the expiry forward, by 1 us at least (so
  // that it counts as a change: a win is affected rows > 0), like a
  // renewal: a repeat that runs late, with an older NOW, never shortens
  // the lease its holder was given.
  // The fence of a new row starts above every token that cleanup deleted
  // (the floor, read with a share lock so that cleanup cannot slip between).
  // When busy, the holder's remaining microseconds come back through
  // LAST_INSERT_ID without changing the row, so waiters need no extra read.
  s.lease.acquire =
      "INSERT INTO " + t + " (lock_key, owner, expire_time, create_time, fence) VALUES (?, ?, " +
      now + " + INTERVAL ? MICROSECOND, " + now +
      ", LAST_INSERT_ID(COALESCE((SELECT fence_floor FROM " + f +
      " WHERE id = 1 LOCK IN SHARE MODE), 0) + 1)) ON DUPLICATE KEY UPDATE "
      "fence = IF(expire_time < " + now + ", LAST_INSERT_ID(fence + 1), "
      "IF(owner = VALUES(owner), LAST_INSERT_ID(fence), "
      "fence + 0 * LAST_INSERT_ID(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, " + now + ", expire_time))))), "
      "create_time = IF(expire_time < " + now + ", " + now + ", create_time), "
      "owner = IF(expire_time < " + now + " OR owner = VALUES(owner), VALUES(owner), owner), "
      "expire_time = IF(owner = VALUES(owner), "
      "GREATEST(expire_time + INTERVAL 1 MICROSECOND, VALUES(expire_time)), expire_time)";
  s.lease.acquire_ordered = OrderedAcquire(
      opts, [](const char* col) { return std::string("VALUES(") + col + ")"; }, "",
      "LOCK IN SHARE MODE");
  // Never blocks behind a holder for long: a duplicate takes a share lock on
  // the existing row, which the holder has locked exclusively.
  s.row.create = "SET STATEMENT innodb_lock_wait_timeout=1 FOR INSERT IGNORE INTO " + r +
                 " (lock_name, updated_time) VALUES (?, " + now + ")";
  // max_statement_time bounds the wait to the millisecond; the lock wait
  // timeout (whole seconds, above it) is only the backstop.
  for (size_t i = 0; i < kRowSliceCount; ++i) {
    const int64_t ms = kRowSlicesMs[i];
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "SET STATEMENT max_statement_time=%lld.%03lld, innodb_lock_wait_timeout=%lld FOR ",
                  static_cast<long long>(ms / 1000), static_cast<long long>(ms % 1000),
                  static_cast<long long>(ms / 1000 + 2));
    s.row.sliced.push_back(buf + s.row.take);
  }
  s.session.in_txn_probe = "SELECT @@in_transaction";
  s.session.in_txn_probe_row = true;
  return s;
}

}  // namespace

// information_schema so that servers built without wsrep do not fail on an
// unknown variable.
const Dialect kMariaDbDialect = {
    "mariadb",
    "SELECT @@global.read_only, @@global.innodb_read_only, @@version, "
    "IFNULL((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
    "WHERE VARIABLE_NAME='WSREP_ON'),'OFF'), @@session.binlog_format",
    // information_schema answers on a node outside the primary component,
    // where table reads fail with 1047 (and SELECT 1 still works).
    "SELECT @@session.wsrep_on, VARIABLE_NAME, VARIABLE_VALUE FROM "
    "information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN "
    "('WSREP_READY','WSREP_CLUSTER_STATUS','WSREP_LOCAL_STATE_COMMENT','WSREP_CLUSTER_SIZE')",
    Build,
};

}  // namespace dlock
