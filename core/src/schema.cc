// The lock tables: the column check, the privilege check, and creating
// them (their statements: dialect.cc).
#include <mysqld_error.h>

#include <algorithm>
#include <cstdlib>

#include "client_impl.h"

namespace dlock {

Status CheckTableColumns(Conn& conn, const TableSql& sql, const std::string& table,
                         const std::vector<std::pair<std::string, std::string>>& want) {
  ExecResult r;
  Status s = conn.Exec(sql.columns, {Param::Text(table)}, &r);
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

// dlock reads what its statements did through LAST_INSERT_ID(expr): the
// fencing token, the holder's remaining time, whether a release was live.
// A BEFORE INSERT or BEFORE UPDATE trigger on the table makes the server
// report 0 instead (MariaDB 10.11, measured), so tokens would read 0 and
// live releases "lost". Refused for any trigger the user can see; the
// acquire refuses a won lease without a token for those it cannot.
Status CheckNoTriggers(Conn& conn, const TableSql& sql, const ClientOptions& opts) {
  ExecResult r;
  Status s = conn.Exec(sql.triggers, {Param::Text(opts.table)}, &r);
  if (!s.ok() || r.rows.empty()) return s;
  std::string names;
  for (const Row& row : r.rows) names += (names.empty() ? "" : ", ") + (row[0] ? *row[0] : std::string("?"));
  return Status(Code::kDb, "table " + QualifiedName(opts, opts.table) + " has a trigger (" + names +
                               "): dlock reads the fencing token and each statement's outcome "
                               "through LAST_INSERT_ID(), which the server reports as 0 when a "
                               "trigger runs on the table; drop the trigger, or give dlock a table "
                               "of its own (table=)");
}

Status CheckTablePrivileges(Conn& conn, const ClientOptions& opts, const SchemaTable& tb) {
  for (size_t i = 0; i < tb.privileges.size(); ++i) {
    const std::string p = tb.privileges[i];
    Status s = conn.Prepare(tb.probes[i]);
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

Status EnsureTables(Conn& conn, const TableSql& sql, const ClientOptions& opts) {
  for (const SchemaTable& tb : sql.tables) {
    if (tb.galera_only && !conn.server().galera) continue;
    Status s = CheckTableColumns(conn, sql, tb.name, tb.cols);
    if (s.code() == Code::kState && tb.name == opts.table) {
      // The lease table is missing. If the floor's table is there, this is a
      // re-creation: the dropped rows took the highest tokens with them (the
      // floor only covers rows cleanup deleted), so before any row can exist
      // again the floor moves to the next epoch, above every token issued so
      // far (B1). On a first install the floor's table is missing too (1146).
      Status e = conn.Query(sql.epoch);
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
      s = CheckTableColumns(conn, sql, tb.name, tb.cols);
    }
    if (!s.ok()) return s;
    if (tb.name == opts.table && !(s = CheckNoTriggers(conn, sql, opts)).ok()) return s;
    if (!(s = CheckTablePrivileges(conn, opts, tb)).ok()) return s;
  }
  return conn.Query(sql.seed);
}

Status ClientImpl::InitSchema(Conn& conn) { return EnsureTables(conn, sql_.schema, opts_); }

Status ClientImpl::EnsureSchema() {
  PooledConn conn;
  Status s = GetConn(Clock::now() + std::chrono::seconds(opts_.connect_timeout_s), &conn, nullptr,
                     ConnectBy::kPerNode);
  if (!s.ok()) return s;
  s = InitSchema(*conn);
  MutexLock g(rows_mu_);
  known_rows_.clear();  // a dropped row table took its rows along
  return s;
}

}  // namespace dlock
