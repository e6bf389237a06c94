// MySQL 8.0 and 8.4 (and servers of its line, such as Percona Server):
// where its statements differ from dialect.cc's common ones. None of
// MariaDB's own forms: no SET STATEMENT (a row lock's wait is bounded by
// the session's innodb_lock_wait_timeout, set and restored around it;
// row_scheme.cc), no information_schema.GLOBAL_VARIABLES (gone in 8.0),
// the upsert's row alias (`AS new`) instead of VALUES(col) (deprecated
// since 8.0.20), FOR SHARE instead of LOCK IN SHARE MODE, and the
// in-transaction check from an OK reply's status flag.
//
// Not run against a MySQL server here (README, "Servers"): the suites run
// with this dialect forced against MariaDB, which accepts every statement
// below but one: the acquire. MariaDB (10.11) takes neither `AS new` nor
// FOR SHARE, so on a server whose version names MariaDB the acquire is
// MariaDB's (dialect_mariadb.cc, the same statement in the older forms,
// which MySQL 8.4 still accepts with a deprecation warning).
#include "dialect.h"

namespace dlock {

namespace {

Statements Build(const ClientOptions& opts, bool on_mariadb) {
  Statements s = CommonStatements(opts);
  s.dialect = "mysql";
  const std::string t = QuoteIdent(opts.table);
  const std::string f = QuoteIdent(opts.table + "_fence");
  const std::string r = QuoteIdent(opts.row_table);
  const std::string now = "UTC_TIMESTAMP(6)";
  // The acquire of dialect_mariadb.cc (its comment says how it works), with
  // the inserted row named `new`.
  s.lease.acquire =
      on_mariadb
          ? kMariaDbDialect.build(opts, true).lease.acquire
          : "INSERT INTO " + t + " (lock_key, owner, expire_time, create_time, fence) VALUES (?, ?, " +
                now + " + INTERVAL ? MICROSECOND, " + now +
                ", LAST_INSERT_ID(COALESCE((SELECT fence_floor FROM " + f +
                " WHERE id = 1 FOR SHARE), 0) + 1)) AS new ON DUPLICATE KEY UPDATE "
                "fence = IF(expire_time < " + now + ", LAST_INSERT_ID(fence + 1), "
                "IF(owner = new.owner, LAST_INSERT_ID(fence), "
                "fence + 0 * LAST_INSERT_ID(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, " + now +
                ", expire_time))))), "
                "create_time = IF(expire_time < " + now + ", " + now + ", create_time), "
                "owner = IF(expire_time < " + now + " OR owner = new.owner, new.owner, owner), "
                "expire_time = IF(owner = new.owner, "
                "GREATEST(expire_time + INTERVAL 1 MICROSECOND, new.expire_time), expire_time)";
  s.lease.acquire_ordered =
      on_mariadb ? kMariaDbDialect.build(opts, true).lease.acquire_ordered
                 : OrderedAcquire(
                       opts, [](const char* col) { return std::string("new.") + col; }, " AS new",
                       "FOR SHARE");
  // Run between set_wait(1) and restore_wait: a duplicate takes a share lock
  // on the existing row, which its holder has locked exclusively.
  s.row.create = "INSERT IGNORE INTO " + r + " (lock_name, updated_time) VALUES (?, " + now + ")";
  s.row.sliced.clear();  // no per-statement bound: the session's, below
  s.row.set_wait = "SET SESSION innodb_lock_wait_timeout = ?";
  s.row.restore_wait = "SET SESSION innodb_lock_wait_timeout = DEFAULT";
  // Any statement's OK reply carries SERVER_STATUS_IN_TRANS.
  s.session.in_txn_probe = "DO 0";
  s.session.in_txn_probe_row = false;
  return s;
}

}  // namespace

// Plain @@ variables only. MySQL has no wsrep of its own; Percona XtraDB
// Cluster (MySQL with Galera) names itself in @@version_comment.
const Dialect kMySqlDialect = {
    "mysql",
    "SELECT @@global.read_only, @@global.innodb_read_only, @@version, "
    "IF(@@version_comment LIKE '%XtraDB Cluster%', 'ON', 'OFF'), @@session.binlog_format",
    // MySQL 8.0 has no information_schema.GLOBAL_STATUS (Percona XtraDB
    // Cluster: not tested here, no such server installs on this machine).
    "SELECT @@session.wsrep_on, VARIABLE_NAME, VARIABLE_VALUE FROM "
    "performance_schema.global_status WHERE VARIABLE_NAME IN "
    "('wsrep_ready','wsrep_cluster_status','wsrep_local_state_comment','wsrep_cluster_size')",
    Build,
};

}  // namespace dlock
