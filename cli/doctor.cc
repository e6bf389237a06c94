// `dlock doctor`: checks the server and the lock tables, one line per fact,
// each OK/WARN/FAIL with what to do.
#include <sys/time.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client_impl.h"  // SchemaTables: the tables and columns the core expects
#include "commands.h"
#include "direct.h"
#include "exit_codes.h"

namespace dlock_cli {

using dlock::Conn;
using dlock::ExecResult;
using dlock::Param;
using dlock::Status;

namespace {

struct Report {
  int fails = 0;
  void Line(const char* level, const char* topic, const std::string& text) {
    if (std::string(level) == "FAIL") ++fails;
    std::printf("%-4s  %-10s  %s\n", level, topic, text.c_str());
  }
};

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// SQL LIKE-style match of a grant's database pattern (% _ and \ escapes).
bool GrantDbMatches(const std::string& pat, size_t pi, const std::string& s, size_t si) {
  while (pi < pat.size()) {
    char c = pat[pi];
    if (c == '%') {
      for (size_t k = si; k <= s.size(); ++k)
        if (GrantDbMatches(pat, pi + 1, s, k)) return true;
      return false;
    }
    if (si >= s.size()) return false;
    if (c == '\\' && pi + 1 < pat.size()) {
      if (pat[pi + 1] != s[si]) return false;
      pi += 2;
    } else {
      if (c != '_' && c != s[si]) return false;
      ++pi;
    }
    ++si;
  }
  return si == s.size();
}

// Reads one `quoted` or bare identifier at pos.
std::string ReadIdent(const std::string& s, size_t* pos) {
  std::string out;
  if (*pos < s.size() && s[*pos] == '`') {
    ++*pos;
    while (*pos < s.size()) {
      if (s[*pos] == '`') {
        if (*pos + 1 < s.size() && s[*pos + 1] == '`') {
          out.push_back('`');
          *pos += 2;
          continue;
        }
        ++*pos;
        break;
      }
      out.push_back(s[(*pos)++]);
    }
  } else {
    while (*pos < s.size() && s[*pos] != '.' && s[*pos] != ' ') out.push_back(s[(*pos)++]);
  }
  return out;
}

// Privileges that SHOW GRANTS gives the current user on db.table.
std::set<std::string> PrivilegesOn(const std::vector<std::string>& grants, const std::string& db,
                                   const std::string& table) {
  std::set<std::string> out;
  for (const std::string& g : grants) {
    if (g.compare(0, 6, "GRANT ") != 0) continue;
    size_t on = g.find(" ON ");
    size_t to = g.find(" TO ", on == std::string::npos ? 0 : on);
    if (on == std::string::npos || to == std::string::npos) continue;  // a role grant
    std::string object = g.substr(on + 4, to - on - 4);
    if (object.compare(0, 9, "FUNCTION ") == 0 || object.compare(0, 10, "PROCEDURE ") == 0 ||
        object.compare(0, 8, "PACKAGE ") == 0)
      continue;
    if (object.compare(0, 6, "TABLE ") == 0) object = object.substr(6);
    bool applies = false;
    if (object == "*.*") {
      applies = true;
    } else {
      size_t pos = 0;
      std::string gdb = ReadIdent(object, &pos);
      if (pos < object.size() && object[pos] == '.') {
        ++pos;
        std::string gtable = object.substr(pos) == "*" ? "*" : ReadIdent(object, &pos);
        if (gtable == "*") applies = GrantDbMatches(gdb, 0, db, 0);
        else applies = gdb == db && gtable == table;
      }
    }
    if (!applies) continue;
    // Privilege list, skipping column lists "SELECT (a, b)".
    std::string privs = g.substr(6, on - 6), cur;
    int depth = 0;
    auto flush = [&] {
      size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      if (b != std::string::npos) out.insert(Upper(cur.substr(b, e - b + 1)));
      cur.clear();
    };
    for (char c : privs) {
      if (c == '(') ++depth;
      else if (c == ')') --depth;
      else if (c == ',' && depth == 0) flush();
      else if (depth == 0) cur.push_back(c);
    }
    flush();
  }
  return out;
}

bool Has(const std::set<std::string>& p, const std::string& priv) {
  return p.count("ALL PRIVILEGES") > 0 || p.count("ALL") > 0 || p.count(priv) > 0;
}

}  // namespace

int CmdDoctor(const std::string& url) {
  Report rep;
  dlock::ClientOptions o;
  Status s = dlock::ParseUrl(url, &o);
  if (!s.ok()) {
    rep.Line("FAIL", "url", s.message() + ": fix --url / DLOCK_URL");
    return kExitFailed;
  }
  std::unique_ptr<Conn> conn;
  s = Conn::Connect(o, &conn);
  if (!s.ok()) {
    rep.Line("FAIL", "connect", s.message() +
                                    ": check that the server runs and listens there, the user and "
                                    "the password (URL or DLOCK_PASSWORD)");
    return kExitFailed;
  }
  rep.Line("OK", "connect", "connected to " + o.Where() + " as " + (o.user.empty() ? "(default user)" : o.user));

  const auto& info = conn->server();
  if (info.version.find("MariaDB") != std::string::npos)
    rep.Line("OK", "server", "MariaDB " + info.version);
  else
    rep.Line("WARN", "server", info.version + ": dlock is built and tested on MariaDB; row locks use "
                                              "MariaDB syntax (SET STATEMENT, NOWAIT)");
  if (info.read_only)
    rep.Line("FAIL", "read_only", "the server is read-only (a replica?): point the URL at the primary");
  else
    rep.Line("OK", "read_only", "writable");
  if (info.galera)
    rep.Line("WARN", "galera", "wsrep_on=ON: lease locks only (row locks are refused, they do not "
                               "exclude across nodes); send all lock traffic to one node");
  else
    rep.Line("OK", "galera", "not a Galera node (wsrep_on is off)");

  // Schema: the same tables and columns the core checks and creates.
  const auto tables = dlock::SchemaTables(o);
  bool missing_any = false, lease_ok = false;
  std::vector<std::string> good;
  for (const auto& t : tables) {
    ExecResult r;
    s = conn->Exec("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                   "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
                   {Param::Text(t.name)}, &r, false);
    if (!s.ok()) {
      rep.Line("FAIL", "schema", "cannot read information_schema: " + s.message());
      continue;
    }
    if (r.rows.empty()) {
      missing_any = true;
      rep.Line("WARN", "schema", "table " + t.name + " does not exist: run `dlock init` (or "
                                 "`dlock init --print-sql` for a DBA); clients create it if they may");
      continue;
    }
    std::string bad;
    for (const auto& want : t.cols) {
      bool found = false;
      for (const auto& row : r.rows) {
        if (row[0] && *row[0] == want.first) {
          found = true;
          std::string type = row[1].value_or("");
          if (type.compare(0, want.second.size(), want.second) != 0)
            bad = "column " + want.first + " is " + type + ", dlock needs " + want.second + "...";
        }
      }
      if (!found) bad = "has no column " + want.first;
      if (!bad.empty()) break;
    }
    if (!bad.empty()) {
      rep.Line("FAIL", "schema", "table " + t.name + " " + bad +
                                     ": choose other names (table=/row_table= in the URL) or migrate it");
    } else {
      good.push_back(t.name);
      if (&t == &tables[0]) lease_ok = true;
    }
  }
  if (!good.empty()) {
    std::string list;
    for (const auto& g : good) list += (list.empty() ? "" : ", ") + g;
    rep.Line("OK", "schema", "as expected: " + list);
  }

  // Privileges of the current user, from SHOW GRANTS.
  {
    ExecResult r;
    s = conn->Exec("SHOW GRANTS", {}, &r, false);
    if (!s.ok()) {
      rep.Line("WARN", "grants", "SHOW GRANTS failed: " + s.message());
    } else {
      std::vector<std::string> grants;
      bool roles = false;
      for (const auto& row : r.rows)
        if (row[0]) {
          grants.push_back(*row[0]);
          if (row[0]->find(" ON ") == std::string::npos) roles = true;
        }
      struct Need {
        std::string table;
        std::vector<std::string> privs;
      };
      std::vector<Need> needs = {{tables[0].name, {"SELECT", "INSERT", "UPDATE", "DELETE"}},
                                 {tables[1].name, {"SELECT", "INSERT", "UPDATE"}},
                                 {tables[2].name, {"SELECT", "INSERT", "UPDATE"}}};
      std::string lacking;
      for (const auto& n : needs) {
        auto have = PrivilegesOn(grants, o.database, n.table);
        for (const auto& p : n.privs)
          if (!Has(have, p)) lacking += (lacking.empty() ? "" : ", ") + p + " on " + n.table;
        if (missing_any && !Has(have, "CREATE")) lacking += (lacking.empty() ? "" : ", ") + std::string("CREATE on ") + n.table;
      }
      if (lacking.empty())
        rep.Line("OK", "grants", "the current user may use the lock tables (SELECT, INSERT, UPDATE, DELETE)");
      else if (roles)
        rep.Line("WARN", "grants", "SHOW GRANTS does not show " + lacking +
                                       " (a role may grant it: check SHOW GRANTS FOR the role)");
      else
        rep.Line("FAIL", "grants", "missing " + lacking + ": GRANT SELECT, INSERT, UPDATE, DELETE ON " +
                                       Q(o.database) + ".* TO the user");
    }
  }

  // Clock offset: informational; dlock's expiry uses only the server clock.
  {
    struct timeval before, after;
    ExecResult r;
    gettimeofday(&before, nullptr);
    s = conn->Exec("SELECT UNIX_TIMESTAMP(NOW(6))", {}, &r, false);
    gettimeofday(&after, nullptr);
    if (!s.ok() || r.rows.empty() || !r.rows[0][0]) {
      rep.Line("WARN", "clock", "cannot read the server's clock: " + s.message());
    } else {
      double server = std::strtod(r.rows[0][0]->c_str(), nullptr);
      double b = before.tv_sec + before.tv_usec / 1e6, a = after.tv_sec + after.tv_usec / 1e6;
      double offset = server - (a + b) / 2, rtt = a - b;
      char buf[200];
      std::snprintf(buf, sizeof buf, "host clock is %+.3f s from the server's (round trip %.1f ms)",
                    -offset, rtt * 1000);
      if (std::fabs(offset) <= 1.0 + rtt)
        rep.Line("OK", "clock", buf);
      else
        rep.Line("WARN", "clock", std::string(buf) + ": locks stay correct (expiry uses only the "
                                                     "server clock), but fix NTP so that logs agree");
    }
  }

  if (lease_ok) {
    ExecResult r;
    s = conn->Exec("SELECT COUNT(*), IFNULL(SUM(owner <> '' AND expire_time >= UTC_TIMESTAMP(6)), 0), "
                   "IFNULL(SUM(expire_time < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR), 0) FROM " + Q(o.table),
                   {}, &r, false);
    if (!s.ok() || r.rows.empty()) {
      rep.Line("WARN", "size", "cannot count " + o.table + ": " + s.message());
    } else {
      int64_t total = ToInt(r.rows[0][0]), held = ToInt(r.rows[0][1]), stale = ToInt(r.rows[0][2]);
      std::string text = o.table + ": " + std::to_string(total) + " rows, " + std::to_string(held) +
                         " held, " + std::to_string(stale) + " expired over an hour ago";
      if (stale > 10000 || total > 1000000)
        rep.Line("WARN", "size", text + ": run `dlock cleanup` (from cron) or set cleanup_interval_ms on a client");
      else
        rep.Line("OK", "size", text);
    }
  }
  return rep.fails > 0 ? kExitFailed : kExitOk;
}

}  // namespace dlock_cli
