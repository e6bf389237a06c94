// The lock tables: their DDL, the column check, and creating them.
#include <mysqld_error.h>

#include <algorithm>
#include <cstdlib>

#include "client_impl.h"

namespace dlock {

Status CheckTableColumns(Conn& conn, const std::string& table,
                         const std::vector<std::pair<std::string, std::string>>& want) {
  ExecResult r;
  Status s = conn.Exec(
      "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
      "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
      {Param::Text(table)}, &r);
  if (!s.ok()) return s;
  if (r.rows.empty()) return Status(Code::kState, "table " + table + " does not exist");
  for (const auto& w : want) {
    bool found = false;
    for (const Row& row : r.rows) {
      if (row[0] && *row[0] == w.first) {
        found = row[1] && row[1]->compare(0, w.second.size(), w.second) == 0;
        if (!found)
          return Status(Code::kDb, "table " + table + " exists but column " + w.first + " is " +
                                       (row[1] ? *row[1] : "NULL") + ", dlock needs " + w.second +
                                       "...: choose another table name (table=/row_table=) or "
                                       "migrate it (see README, Schema)");
        break;
      }
    }
    if (!found)
      return Status(Code::kDb, "table " + table + " exists but has no column " + w.first +
                                   ": choose another table name (table=/row_table=) or migrate it "
                                   "(see README, Schema)");
  }
  return Status::OK();
}

std::vector<SchemaTable> SchemaTables(const ClientOptions& opts) {
  const std::string t = opts.table, f = opts.table + "_fence", r = opts.row_table;
  // Every column is binary or numeric: the server's default character set
  // and collation cannot change what a key means (B2).
  return {
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
       {"SELECT", "INSERT", "UPDATE", "DELETE"}},
      {f,
       {{"id", "tinyint"}, {"fence_floor", "bigint"}},
       "CREATE TABLE IF NOT EXISTS " + QuoteIdent(f) +
           " (id TINYINT UNSIGNED NOT NULL PRIMARY KEY,"
           " fence_floor BIGINT UNSIGNED NOT NULL COMMENT 'highest token of any deleted lease row')"
           " ENGINE=InnoDB COMMENT='dlock: fencing floor kept across cleanup'",
       // read by acquire, seeded at open (INSERT IGNORE), raised by cleanup
       {"SELECT", "INSERT", "UPDATE"}},
      {r,
       {{"lock_name", "varbinary("}, {"updated_time", "datetime(6)"}},
       "CREATE TABLE IF NOT EXISTS " + QuoteIdent(r) +
           " (lock_name VARBINARY(512) NOT NULL COMMENT 'lock name, compared byte for byte',"
           " updated_time DATETIME(6) NULL COMMENT 'UTC, when the row was created',"
           " PRIMARY KEY (lock_name)) ENGINE=InnoDB COMMENT='dlock row locks (SELECT ... FOR UPDATE)'",
       // SELECT .. FOR UPDATE (MariaDB asks only SELECT), rows created by INSERT IGNORE
       {"SELECT", "INSERT"}},
  };
}

std::string SchemaSeedSql(const ClientOptions& opts) {
  return "INSERT IGNORE INTO " + QuoteIdent(opts.table + "_fence") + " (id, fence_floor) VALUES (1, 0)";
}

std::string FenceEpochSql(const ClientOptions& opts) {
  return "UPDATE " + QuoteIdent(opts.table + "_fence") + " SET fence_floor = (fence_floor DIV " +
         std::to_string(kFenceEpoch) + " + 1) * " + std::to_string(kFenceEpoch) + " WHERE id = 1";
}

namespace {

// "`db`.`table`", for messages.
std::string QualifiedName(const ClientOptions& opts, const std::string& table) {
  return "`" + QuoteKey(opts.database) + "`.`" + table + "`";
}

// What an admin runs so that a user without CREATE can use dlock (README,
// "Least privilege").
std::string Grant(const std::string& qualified) {
  return "GRANT SELECT, INSERT, UPDATE, DELETE ON " + qualified + " TO <the application's user>";
}

}  // namespace

Status CheckTablePrivileges(Conn& conn, const ClientOptions& opts, const SchemaTable& tb) {
  const std::string t = QuoteIdent(tb.name);
  const std::string col = tb.cols.front().first;  // the primary key
  for (const char* privilege : tb.privileges) {
    const std::string p = privilege;
    std::string probe;
    if (p == "SELECT") probe = "SELECT 1 FROM " + t + " WHERE 0";
    else if (p == "INSERT") probe = "INSERT INTO " + t + " (" + col + ") VALUES (?)";
    else if (p == "UPDATE") probe = "UPDATE " + t + " SET " + col + " = " + col + " WHERE 0";
    else probe = "DELETE FROM " + t + " WHERE 0";
    Status s = conn.Prepare(probe);
    if (s.server_errno() == ER_TABLEACCESS_DENIED_ERROR || s.server_errno() == ER_COLUMNACCESS_DENIED_ERROR)
      return Status(Code::kDb,
                    "the database user lacks the " + p + " privilege on " +
                        QualifiedName(opts, tb.name) + ", which dlock needs; an admin grants it: " +
                        Grant(QualifiedName(opts, tb.name)) + " (README: Least privilege) (" +
                        s.message() + ")",
                    s.server_errno());
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status EnsureTables(Conn& conn, const ClientOptions& opts) {
  for (const SchemaTable& tb : SchemaTables(opts)) {
    Status s = CheckTableColumns(conn, tb.name, tb.cols);
    if (s.code() == Code::kState && tb.name == opts.table) {
      // The lease table is missing. If the floor's table is there, this is a
      // re-creation: the dropped rows took the highest tokens with them (the
      // floor only covers rows cleanup deleted), so before any row can exist
      // again the floor moves to the next epoch, above every token issued so
      // far (B1). On a first install the floor's table is missing too (1146).
      Status e = conn.Query(FenceEpochSql(opts));
      // A user without privileges on the tables cannot create one either:
      // the CREATE below says what to do.
      if (!e.ok() && e.server_errno() != ER_NO_SUCH_TABLE &&
          e.server_errno() != ER_TABLEACCESS_DENIED_ERROR)
        return e;
    }
    if (s.code() == Code::kState) {  // missing: create it
      s = conn.Query(tb.ddl);
      if (s.server_errno() == ER_TABLEACCESS_DENIED_ERROR)
        return Status(Code::kDb,
                      "table " + QualifiedName(opts, tb.name) +
                          " is missing (or this database user has no privilege on it at all), "
                          "and the user lacks the CREATE privilege to create it: an admin "
                          "creates the tables once with `dlock init` (or runs the DDL of "
                          "`dlock init --print-sql`) and grants the user the rest: " +
                          Grant(QualifiedName(opts, tb.name)) + " (README: Least privilege) (" +
                          s.message() + ")",
                      s.server_errno());
      if (!s.ok()) return s;
      s = CheckTableColumns(conn, tb.name, tb.cols);
    }
    if (!s.ok()) return s;
    if (!(s = CheckTablePrivileges(conn, opts, tb)).ok()) return s;
  }
  return conn.Query(SchemaSeedSql(opts));
}

Status ClientImpl::InitSchema(Conn& conn) { return EnsureTables(conn, opts_); }

Status ClientImpl::EnsureSchema() {
  PooledConn conn;
  Status s = GetConn(Clock::now() + std::chrono::seconds(opts_.connect_timeout_s), &conn);
  if (!s.ok()) return s;
  s = InitSchema(*conn);
  std::lock_guard<std::mutex> g(rows_mu_);
  known_rows_.clear();  // a dropped row table took its rows along
  return s;
}

}  // namespace dlock
