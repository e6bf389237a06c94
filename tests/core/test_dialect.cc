// The statements each SQL dialect sends, pinned (no server): a change to
// any of them shows here. tests/core/CMakeLists.txt also runs the suites
// with `dialect=mysql` forced against MariaDB (the *_mysql variants).
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "dialect.h"
#include "options.h"

using dlock::ChooseDialect;
using dlock::ClientOptions;
using dlock::SqlDialect;
using dlock::Statements;

namespace {

using Named = std::vector<std::pair<std::string, std::string>>;

// Every statement of a Statements, by name.
Named All(const Statements& s) {
  Named out = {
      {"lease.acquire", s.lease.acquire},   {"lease.renew", s.lease.renew},
      {"lease.release", s.lease.release},   {"lease.read", s.lease.read},
      {"lease.get_name", s.lease.get_name}, {"lease.release_name", s.lease.release_name},
      {"lease.release_and_wake", s.lease.release_and_wake},
      {"lease.hand_over", s.lease.hand_over},
      {"lease.acquire_ordered", s.lease.acquire_ordered},
      {"lease.claim", s.lease.claim},       {"lease.unclaim", s.lease.unclaim},
      {"row.exists", s.row.exists},         {"row.create", s.row.create},
      {"row.nowait", s.row.nowait},         {"row.take", s.row.take},
      {"row.set_wait", s.row.set_wait},     {"row.restore_wait", s.row.restore_wait},
      {"cleanup.isolation", s.cleanup.isolation}, {"cleanup.lock_floor", s.cleanup.lock_floor},
      {"cleanup.pick", s.cleanup.pick},     {"cleanup.raise_floor", s.cleanup.raise_floor},
      {"cleanup.remove", s.cleanup.remove}, {"cleanup.cutoff", s.cleanup.cutoff},
      {"cleanup.count", s.cleanup.count},   {"cleanup.claims", s.cleanup.claims},   {"schema.seed", s.schema.seed},
      {"schema.epoch", s.schema.epoch},     {"schema.columns", s.schema.columns},
      {"admin.list", s.admin.list},         {"admin.get", s.admin.get},
      {"admin.lock", s.admin.lock},         {"admin.revoke", s.admin.revoke},
      {"admin.clock", s.admin.clock},       {"admin.counts", s.admin.counts},
      {"admin.grants", s.admin.grants},     {"session.in_txn_probe", s.session.in_txn_probe},
  };
  for (size_t i = 0; i < s.row.sliced.size(); ++i)
    out.push_back({"row.sliced[" + std::to_string(i) + "]", s.row.sliced[i]});
  for (size_t i = 0; i < s.renew.batch.size(); ++i) {
    out.push_back({"renew.batch[" + std::to_string(i) + "]", s.renew.batch[i]});
    out.push_back({"renew.check[" + std::to_string(i) + "]", s.renew.check[i]});
  }
  for (const auto& t : s.schema.tables) {
    out.push_back({"schema.ddl " + t.name, t.ddl});
    for (size_t i = 0; i < t.probes.size(); ++i)
      out.push_back({"schema.probe " + t.name + " " + t.privileges[i], t.probes[i]});
  }
  return out;
}

const std::string kNow = "UTC_TIMESTAMP(6)";

const std::string kMariaDbAcquire =
    "INSERT INTO `distributed_lock` (lock_key, owner, expire_time, create_time, fence) VALUES (?, "
    "?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), "
    "LAST_INSERT_ID(COALESCE((SELECT fence_floor FROM `distributed_lock_fence` WHERE id = 1 LOCK "
    "IN SHARE MODE), 0) + 1)) ON DUPLICATE KEY UPDATE fence = IF(expire_time < UTC_TIMESTAMP(6), "
    "LAST_INSERT_ID(fence + 1), IF(owner = VALUES(owner), LAST_INSERT_ID(fence), fence + 0 * "
    "LAST_INSERT_ID(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expire_time))))), "
    "create_time = IF(expire_time < UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), create_time), owner = "
    "IF(expire_time < UTC_TIMESTAMP(6) OR owner = VALUES(owner), VALUES(owner), owner), "
    "expire_time = IF(owner = VALUES(owner), GREATEST(expire_time + INTERVAL 1 MICROSECOND, "
    "VALUES(expire_time)), expire_time)";

const std::string kMySqlAcquire =
    "INSERT INTO `distributed_lock` (lock_key, owner, expire_time, create_time, fence) VALUES (?, "
    "?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), "
    "LAST_INSERT_ID(COALESCE((SELECT fence_floor FROM `distributed_lock_fence` WHERE id = 1 FOR "
    "SHARE), 0) + 1)) AS new ON DUPLICATE KEY UPDATE fence = IF(expire_time < UTC_TIMESTAMP(6), "
    "LAST_INSERT_ID(fence + 1), IF(owner = new.owner, LAST_INSERT_ID(fence), fence + 0 * "
    "LAST_INSERT_ID(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expire_time))))), "
    "create_time = IF(expire_time < UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), create_time), owner = "
    "IF(expire_time < UTC_TIMESTAMP(6) OR owner = new.owner, new.owner, owner), "
    "expire_time = IF(owner = new.owner, GREATEST(expire_time + INTERVAL 1 MICROSECOND, "
    "new.expire_time), expire_time)";

// The claim-ordered acquire (Galera, fair=1), with the inserted row's
// columns spelled `v`.
std::string OrderedAcquire(const std::string& share, const std::string& alias,
                           const std::string& (*v)(const std::string&)) {
  return "INSERT INTO `distributed_lock` (lock_key, owner, expire_time, create_time, fence) VALUES "
         "(?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), "
         "LAST_INSERT_ID(COALESCE((SELECT fence_floor FROM `distributed_lock_fence` WHERE id = 1 " +
         share + "), 0) + 1))" + alias + " ON DUPLICATE KEY UPDATE owner = IF(owner = " + v("owner") +
         " OR (expire_time < UTC_TIMESTAMP(6) AND NOT EXISTS (SELECT 1 FROM `distributed_lock_claim` "
         "w WHERE w.lock_key = ? AND w.claimant <> ? AND w.until_time >= UTC_TIMESTAMP(6) AND "
         "w.since_time < COALESCE((SELECT m.since_time FROM `distributed_lock_claim` m WHERE "
         "m.lock_key = ? AND m.claimant = ?), '9999-12-31'))), " + v("owner") + ", owner), fence = "
         "IF(owner <> " + v("owner") + ", fence + 0 * LAST_INSERT_ID(2 * GREATEST(0, "
         "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expire_time)) + IF(NOT EXISTS (SELECT 1 "
         "FROM `distributed_lock_claim` w WHERE w.lock_key = ? AND w.claimant <> ? AND "
         "w.until_time >= UTC_TIMESTAMP(6) AND w.since_time < COALESCE((SELECT m.since_time FROM "
         "`distributed_lock_claim` m WHERE m.lock_key = ? AND m.claimant = ?), '9999-12-31')), 0, "
         "1)), IF(expire_time < "
         "UTC_TIMESTAMP(6), LAST_INSERT_ID(fence + 1), LAST_INSERT_ID(fence))), create_time = "
         "IF(owner = " + v("owner") + " AND expire_time < UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), "
         "create_time), expire_time = IF(owner = " + v("owner") + ", GREATEST(expire_time + "
         "INTERVAL 1 MICROSECOND, " + v("expire_time") + "), expire_time)";
}

const std::string& MariaCol(const std::string& c) {
  static std::string owner = "VALUES(owner)", expire = "VALUES(expire_time)";
  return c == "owner" ? owner : expire;
}
const std::string& MySqlCol(const std::string& c) {
  static std::string owner = "new.owner", expire = "new.expire_time";
  return c == "owner" ? owner : expire;
}

}  // namespace

TEST_CASE("dialect: the server's version picks it; the option forces it") {
  CHECK(std::string(ChooseDialect(SqlDialect::kAuto, "10.11.6-MariaDB-0+deb12u1").name) == "mariadb");
  CHECK(std::string(ChooseDialect(SqlDialect::kAuto, "5.5.5-10.6.16-MariaDB-log").name) == "mariadb");
  CHECK(std::string(ChooseDialect(SqlDialect::kAuto, "8.0.36").name) == "mysql");
  CHECK(std::string(ChooseDialect(SqlDialect::kAuto, "8.4.0-commercial").name) == "mysql");
  CHECK(std::string(ChooseDialect(SqlDialect::kAuto, "8.0.35-27-Percona-XtraDB-Cluster").name) == "mysql");
  CHECK(std::string(ChooseDialect(SqlDialect::kAuto, "").name) == "mysql");
  CHECK(std::string(ChooseDialect(SqlDialect::kMySql, "10.11.6-MariaDB").name) == "mysql");
  CHECK(std::string(ChooseDialect(SqlDialect::kMariaDb, "8.0.36").name) == "mariadb");

  ClientOptions o;
  CHECK(o.dialect == SqlDialect::kAuto);
  REQUIRE(dlock::ParseUrl("mysql://u@h/db?dialect=mysql", &o).ok());
  CHECK(o.dialect == SqlDialect::kMySql);
  REQUIRE(dlock::ApplyClientOption("dialect", "mariadb", &o).ok());
  CHECK(o.dialect == SqlDialect::kMariaDb);
  dlock::Status s = dlock::ApplyClientOption("dialect", "postgres", &o);
  CHECK(s.code() == dlock::Code::kInvalid);
  CHECK(s.message().find("dialect") != std::string::npos);
}

TEST_CASE("dialect mariadb: the statements it sends") {
  const Statements s = dlock::kMariaDbDialect.build(ClientOptions(), true);
  CHECK(std::string(s.dialect) == "mariadb");
  CHECK(s.lease.acquire == kMariaDbAcquire);
  CHECK(s.lease.renew ==
        "UPDATE `distributed_lock` SET expire_time = GREATEST(expire_time + INTERVAL 1 MICROSECOND, "
        "UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
        "WHERE lock_key = ? AND owner = ? AND expire_time >= UTC_TIMESTAMP(6)");
  CHECK(s.lease.release ==
        "UPDATE `distributed_lock` SET owner = '', expire_time = IF(LAST_INSERT_ID(expire_time >= "
        "UTC_TIMESTAMP(6)), '1970-01-01 00:00:00', '1970-01-01 00:00:00') WHERE lock_key = ? AND "
        "owner = ?");
  CHECK(s.lease.read ==
        "SELECT owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expire_time) FROM "
        "`distributed_lock` WHERE lock_key = ?");
  CHECK(s.lease.get_name == "SELECT GET_LOCK(?, ? / 1000000)");
  CHECK(s.lease.release_name == "DO RELEASE_LOCK(?)");
  CHECK(s.lease.release_and_wake ==
        "UPDATE `distributed_lock` SET owner = '', expire_time = IF(LAST_INSERT_ID(expire_time >= "
        "UTC_TIMESTAMP(6)) + 0 * IFNULL(RELEASE_LOCK(?), 0), '1970-01-01 00:00:00', '1970-01-01 "
        "00:00:00') WHERE lock_key = ? AND owner = ?");
  CHECK(s.lease.hand_over ==
        "UPDATE `distributed_lock` SET owner = IF((expire_time >= UTC_TIMESTAMP(6)) + 0 * "
        "IFNULL(RELEASE_LOCK(?), 0) AND IS_USED_LOCK(?) IS NULL AND GET_LOCK(?, 0) = 1, ?, ''), "
        "fence = IF(owner = ?, LAST_INSERT_ID(fence + 1), fence + 0 * LAST_INSERT_ID(expire_time >= "
        "UTC_TIMESTAMP(6))), create_time = IF(owner = ?, UTC_TIMESTAMP(6), create_time), "
        "expire_time = IF(owner = ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, '1970-01-01 00:00:00') "
        "WHERE lock_key = ? AND owner = ?");
  CHECK(s.lease.acquire_ordered == OrderedAcquire("LOCK IN SHARE MODE", "", MariaCol));
  CHECK(s.lease.claim ==
        "INSERT INTO `distributed_lock_claim` (lock_key, claimant, since_time, until_time) VALUES "
        "(?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) ON DUPLICATE KEY "
        "UPDATE until_time = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND");
  CHECK(s.lease.unclaim == "DELETE FROM `distributed_lock_claim` WHERE lock_key = ? AND claimant = ?");
  // The claim table is Galera's only.
  REQUIRE(s.schema.tables.size() == 4);
  for (size_t i = 0; i < 3; ++i) CHECK_FALSE(s.schema.tables[i].galera_only);
  CHECK(s.schema.tables[3].name == "distributed_lock_claim");
  CHECK(s.schema.tables[3].galera_only);
  REQUIRE(s.renew.batch.size() == 11);  // 1, 2, 4 .. 1024 leases
  REQUIRE(s.renew.check.size() == 11);
  CHECK(s.renew.batch[1] ==
        "UPDATE `distributed_lock` SET expire_time = GREATEST(expire_time + INTERVAL 1 MICROSECOND, "
        "UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
        "WHERE lock_key IN (?,?) AND owner IN (?,?) AND expire_time >= UTC_TIMESTAMP(6)");
  CHECK(s.renew.check[0] ==
        "SELECT lock_key, owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expire_time) FROM "
        "`distributed_lock` WHERE lock_key IN (?) AND owner IN (?)");
  CHECK(s.row.exists == "SELECT 1 FROM `fixed_lock` WHERE lock_name = ?");
  CHECK(s.row.create ==
        "SET STATEMENT innodb_lock_wait_timeout=1 FOR INSERT IGNORE INTO `fixed_lock` (lock_name, "
        "updated_time) VALUES (?, UTC_TIMESTAMP(6))");
  CHECK(s.row.nowait == "SELECT 1 FROM `fixed_lock` WHERE lock_name = ? FOR UPDATE NOWAIT");
  REQUIRE(s.row.sliced.size() == dlock::kRowSliceCount);
  CHECK(s.row.sliced.front() ==
        "SET STATEMENT max_statement_time=0.050, innodb_lock_wait_timeout=2 FOR SELECT 1 FROM "
        "`fixed_lock` WHERE lock_name = ? FOR UPDATE");
  CHECK(s.row.sliced.back() ==
        "SET STATEMENT max_statement_time=30.000, innodb_lock_wait_timeout=32 FOR SELECT 1 FROM "
        "`fixed_lock` WHERE lock_name = ? FOR UPDATE");
  CHECK(s.row.set_wait.empty());
  CHECK(s.row.restore_wait.empty());
  CHECK(s.cleanup.isolation == "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
  CHECK(s.cleanup.lock_floor == "SELECT fence_floor FROM `distributed_lock_fence` WHERE id = 1 FOR UPDATE");
  CHECK(s.cleanup.pick ==
        "SELECT fence FROM `distributed_lock` WHERE expire_time < ? ORDER BY expire_time LIMIT ? "
        "FOR UPDATE");
  CHECK(s.cleanup.raise_floor ==
        "UPDATE `distributed_lock_fence` SET fence_floor = GREATEST(fence_floor, ?) WHERE id = 1");
  CHECK(s.cleanup.remove ==
        "DELETE FROM `distributed_lock` WHERE expire_time < ? ORDER BY expire_time LIMIT ?");
  CHECK(s.cleanup.cutoff ==
        "SELECT DATE_FORMAT(UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND, '%Y-%m-%d %H:%i:%s.%f')");
  CHECK(s.cleanup.count == "SELECT COUNT(*) FROM `distributed_lock`");
  CHECK(s.cleanup.claims == "DELETE FROM `distributed_lock_claim` WHERE until_time < ? LIMIT ?");
  REQUIRE(s.schema.tables.size() == 4);
  CHECK(s.schema.tables[0].ddl ==
        "CREATE TABLE IF NOT EXISTS `distributed_lock` (lock_key VARBINARY(512) NOT NULL COMMENT "
        "'lock name, compared byte for byte', owner VARBINARY(255) NOT NULL COMMENT 'host:pid:uuid "
        "of the holder; empty = free', expire_time DATETIME(6) NOT NULL COMMENT 'UTC, by the server "
        "clock', create_time DATETIME(6) NOT NULL COMMENT 'UTC, when the current holder acquired', "
        "fence BIGINT UNSIGNED NOT NULL COMMENT 'fencing token: grows with every acquisition', "
        "PRIMARY KEY (lock_key), KEY idx_expire_time (expire_time)) ENGINE=InnoDB COMMENT='dlock "
        "lease locks'");
  CHECK(s.schema.tables[0].probes ==
        std::vector<std::string>{"SELECT 1 FROM `distributed_lock` WHERE 0",
                                 "INSERT INTO `distributed_lock` (lock_key) VALUES (?)",
                                 "UPDATE `distributed_lock` SET lock_key = lock_key WHERE 0",
                                 "DELETE FROM `distributed_lock` WHERE 0"});
  CHECK(s.schema.tables[1].ddl ==
        "CREATE TABLE IF NOT EXISTS `distributed_lock_fence` (id TINYINT UNSIGNED NOT NULL PRIMARY "
        "KEY, fence_floor BIGINT UNSIGNED NOT NULL COMMENT 'highest token of any deleted lease "
        "row') ENGINE=InnoDB COMMENT='dlock: fencing floor kept across cleanup'");
  CHECK(s.schema.tables[2].ddl ==
        "CREATE TABLE IF NOT EXISTS `fixed_lock` (lock_name VARBINARY(512) NOT NULL COMMENT 'lock "
        "name, compared byte for byte', updated_time DATETIME(6) NULL COMMENT 'UTC, when the row "
        "was created', PRIMARY KEY (lock_name)) ENGINE=InnoDB COMMENT='dlock row locks (SELECT ... "
        "FOR UPDATE)'");
  CHECK(s.schema.seed == "INSERT IGNORE INTO `distributed_lock_fence` (id, fence_floor) VALUES (1, 0)");
  CHECK(s.schema.epoch ==
        "UPDATE `distributed_lock_fence` SET fence_floor = (fence_floor DIV 1099511627776 + 1) * "
        "1099511627776 WHERE id = 1");
  CHECK(s.schema.columns ==
        "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
        "DATABASE() AND TABLE_NAME = ?");
  const std::string cols =
      "SELECT lock_key, owner, fence, TIMESTAMPDIFF(MICROSECOND, create_time, UTC_TIMESTAMP(6)), "
      "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expire_time) FROM `distributed_lock` WHERE ";
  CHECK(s.admin.list == cols + "expire_time >= UTC_TIMESTAMP(6) AND lock_key LIKE ? ORDER BY lock_key");
  CHECK(s.admin.get == cols + "lock_key = ? AND expire_time >= UTC_TIMESTAMP(6)");
  CHECK(s.admin.lock == cols + "lock_key = ? FOR UPDATE");
  CHECK(s.admin.revoke == "UPDATE `distributed_lock` SET owner = '' WHERE lock_key = ? AND owner = ?");
  CHECK(s.admin.clock == "SELECT UNIX_TIMESTAMP(NOW(6))");
  CHECK(s.admin.counts ==
        "SELECT COUNT(*), IFNULL(SUM(owner <> '' AND expire_time >= UTC_TIMESTAMP(6)), 0), "
        "IFNULL(SUM(expire_time < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR), 0) FROM `distributed_lock`");
  CHECK(s.admin.grants == "SHOW GRANTS");
  CHECK(s.session.in_txn_probe == "SELECT @@in_transaction");
  CHECK(s.session.in_txn_probe_row);
  CHECK(std::string(dlock::kMariaDbDialect.server_facts) ==
        "SELECT @@global.read_only, @@global.innodb_read_only, @@version, IFNULL((SELECT "
        "VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE "
        "VARIABLE_NAME='WSREP_ON'),'OFF'), @@session.binlog_format");
  CHECK(std::string(dlock::kMariaDbDialect.galera_health) ==
        "SELECT @@session.wsrep_on, VARIABLE_NAME, VARIABLE_VALUE FROM "
        "information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN "
        "('WSREP_READY','WSREP_CLUSTER_STATUS','WSREP_LOCAL_STATE_COMMENT','WSREP_CLUSTER_SIZE')");
}

TEST_CASE("dialect mysql: the statements it sends, none of them in a MariaDB-only form") {
  const Statements my = dlock::kMySqlDialect.build(ClientOptions(), false);
  const Statements maria = dlock::kMariaDbDialect.build(ClientOptions(), true);
  CHECK(std::string(my.dialect) == "mysql");
  CHECK(my.lease.acquire == kMySqlAcquire);
  CHECK(my.lease.acquire_ordered == OrderedAcquire("FOR SHARE", " AS new", MySqlCol));
  CHECK(my.row.create ==
        "INSERT IGNORE INTO `fixed_lock` (lock_name, updated_time) VALUES (?, UTC_TIMESTAMP(6))");
  CHECK(my.row.sliced.empty());  // waits are bounded by the session's innodb_lock_wait_timeout
  CHECK(my.row.take == "SELECT 1 FROM `fixed_lock` WHERE lock_name = ? FOR UPDATE");
  CHECK(my.row.set_wait == "SET SESSION innodb_lock_wait_timeout = ?");
  CHECK(my.row.restore_wait == "SET SESSION innodb_lock_wait_timeout = DEFAULT");
  CHECK(my.session.in_txn_probe == "DO 0");
  CHECK_FALSE(my.session.in_txn_probe_row);
  CHECK(std::string(dlock::kMySqlDialect.server_facts) ==
        "SELECT @@global.read_only, @@global.innodb_read_only, @@version, IF(@@version_comment "
        "LIKE '%XtraDB Cluster%', 'ON', 'OFF'), @@session.binlog_format");

  // Every other statement is the family's common one, as MariaDB's.
  const Named a = All(my), b = All(maria);
  const std::vector<std::string> own = {"lease.acquire", "lease.acquire_ordered", "row.create", "row.set_wait",
                                        "row.restore_wait", "session.in_txn_probe"};
  for (const auto& m : a) {
    bool mine = false;
    for (const auto& o : own) mine = mine || o == m.first;
    if (mine) continue;
    for (const auto& x : b)
      if (x.first == m.first) {
        INFO(m.first);
        CHECK(m.second == x.second);
      }
  }
  // MariaDB's own forms, none of which MySQL 8.0/8.4 takes (or which it
  // deprecates).
  for (const auto& m : a) {
    INFO(m.first, ": ", m.second);
    for (const char* form : {"SET STATEMENT", "GLOBAL_VARIABLES", "VALUES(", "LOCK IN SHARE MODE",
                             "@@in_transaction", "max_statement_time"})
      CHECK(m.second.find(form) == std::string::npos);
  }
  CHECK(std::string(dlock::kMySqlDialect.server_facts).find("GLOBAL_VARIABLES") == std::string::npos);
  CHECK(std::string(dlock::kMySqlDialect.galera_health) ==
        "SELECT @@session.wsrep_on, VARIABLE_NAME, VARIABLE_VALUE FROM "
        "performance_schema.global_status WHERE VARIABLE_NAME IN "
        "('wsrep_ready','wsrep_cluster_status','wsrep_local_state_comment','wsrep_cluster_size')");
}

TEST_CASE("dialect mysql forced against MariaDB: two statements are substituted, the acquires") {
  // MariaDB 10.11 takes neither the upsert's row alias (`AS new`) nor FOR
  // SHARE, so the suites' *_mysql variants (this dialect forced against
  // MariaDB) send MariaDB's acquire; everything else is sent as above.
  const Statements forced = dlock::kMySqlDialect.build(ClientOptions(), true);
  const Statements my = dlock::kMySqlDialect.build(ClientOptions(), false);
  CHECK(forced.lease.acquire == kMariaDbAcquire);
  CHECK(forced.lease.acquire_ordered == OrderedAcquire("LOCK IN SHARE MODE", "", MariaCol));
  const Named a = All(forced), b = All(my);
  REQUIRE(a.size() == b.size());
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].second == b[i].second) continue;
    ++differ;
    CHECK((a[i].first == "lease.acquire" || a[i].first == "lease.acquire_ordered"));
  }
  CHECK(differ == 2);
}

TEST_CASE("dialect: table names reach every statement that names a table") {
  ClientOptions o;
  o.table = "my_leases";
  o.row_table = "my_rows";
  for (const dlock::Dialect* d : {&dlock::kMariaDbDialect, &dlock::kMySqlDialect}) {
    INFO(d->name);
    for (const auto& m : All(d->build(o, false))) {
      INFO(m.first);
      CHECK(m.second.find("distributed_lock") == std::string::npos);
      CHECK(m.second.find("fixed_lock") == std::string::npos);
    }
    const Statements s = d->build(o, false);
    CHECK(s.lease.renew.find("`my_leases`") != std::string::npos);
    CHECK(s.row.exists.find("`my_rows`") != std::string::npos);
    CHECK(s.cleanup.lock_floor.find("`my_leases_fence`") != std::string::npos);
  }
}
