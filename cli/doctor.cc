// `dlock doctor`: checks the server and the lock tables, one line per fact,
// each OK/WARN/FAIL with what to do. The facts come from the core
// (dlock::Admin); what to make of them is decided here.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "dlock/admin.hpp"
#include "exit_codes.h"
#include "say.h"

namespace dlock_cli {

namespace {

class Report {
 public:
  void Ok(const char* topic, const std::string& text) { Line("OK", topic, text); }
  void Warn(const char* topic, const std::string& text) { Line("WARN", topic, text); }
  void Failed(const char* topic, const std::string& text) {
    ++fails_;
    Line("FAIL", topic, text);
  }
  int exit_code() const { return fails_ > 0 ? kExitFailed : kExitOk; }

 private:
  void Line(const char* level, const char* topic, const std::string& text) {
    std::printf("%-4s  %-10s  %s\n", level, topic, Scrub(text).c_str());
  }
  int fails_ = 0;
};

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void CheckServer(const dlock::Admin& admin, Report* rep) {
  const dlock::ServerFacts& f = admin.facts();
  if (f.mariadb)
    rep->Ok("server", "MariaDB " + f.version + " (dialect " + f.dialect + ")");
  else
    rep->Warn("server", f.version + " (dialect " + f.dialect + "): dlock is tested on MariaDB; "
                                    "its MySQL 8.0/8.4 statements were tested only against "
                                    "MariaDB (README: Servers)");
  if (f.read_only)
    rep->Failed("read_only", "the server is read-only (a replica?): point the URL at the primary");
  else
    rep->Ok("read_only", "writable");
  if (!f.galera) {
    rep->Ok("galera", "not a Galera node (wsrep_on is off)");
    return;
  }
  const std::string node = "Galera node " + f.node + ", cluster of " + std::to_string(f.cluster_size);
  if (f.galera_unhealthy.rfind("wsrep_local_state_comment=", 0) == 0)
    rep->Warn("galera", node + ": " + f.galera_unhealthy +
                            " (a donor or a joiner): a multi-host URL skips it while it is");
  else if (!f.galera_unhealthy.empty())
    rep->Failed("galera", node + ": cannot take locks now: " + f.galera_unhealthy +
                              "; name the other nodes in the URL (mysql://u@h1:p1,h2:p2,h3:p3/db)");
  else if (f.cluster_size < 3)
    rep->Warn("galera", node + ": with fewer than 3 nodes, one node's death loses quorum and "
                               "every node refuses lock statements until it is back");
  else
    rep->Ok("galera", node + ", Synced: lease locks work on every node (row locks are refused: "
                             "they do not exclude across nodes)");
  // Any node's death stalls every write for ~6 s.
  if (f.read_timeout_s < 10)
    rep->Warn("timeouts", "read_timeout=" + std::to_string(f.read_timeout_s) +
                              " s: a node's death stalls every write ~6 s, and a renewal cut off "
                              "by the timeout has an unknown outcome; use read_timeout=10 or more");
  else
    rep->Ok("timeouts", "read_timeout=" + std::to_string(f.read_timeout_s) +
                            " s outlasts the ~6 s write stall of a node's death; give leases a "
                            "ttl of 15 s or more (dlock run --ttl; the default 30 s is)");
}

// Returns whether a table is missing, and whether the lease table is usable.
void CheckSchema(dlock::Admin& admin, Report* rep, bool* missing, bool* lease_ok) {
  *missing = *lease_ok = false;
  std::vector<dlock::TableCheck> tables;
  dlock::Status s = admin.CheckSchema(&tables);
  if (!s.ok()) {
    rep->Failed("schema", "cannot read information_schema: " + s.message());
    return;
  }
  std::vector<std::string> good;
  for (const auto& t : tables) {
    if (!t.exists) {
      *missing = true;
      rep->Warn("schema", "table " + t.name + " does not exist: run `dlock init` (or `dlock init "
                          "--print-sql` for a DBA); clients create it if they may");
    } else if (!t.problem.empty()) {
      rep->Failed("schema", t.problem);
    } else {
      good.push_back(t.name);
      if (t.name == admin.lease_table()) *lease_ok = true;
    }
  }
  if (!good.empty()) rep->Ok("schema", "as expected: " + Join(good));
}

void CheckGrants(dlock::Admin& admin, bool missing_tables, Report* rep) {
  dlock::GrantCheck g;
  dlock::Status s = admin.CheckGrants(missing_tables, &g);
  if (!s.ok()) {
    rep->Warn("grants", "SHOW GRANTS failed: " + s.message());
  } else if (g.missing.empty()) {
    rep->Ok("grants", "the current user may use the lock tables (SELECT, INSERT, UPDATE, DELETE)");
  } else if (g.via_roles) {
    rep->Warn("grants", "SHOW GRANTS does not show " + Join(g.missing) +
                            " (a role may grant it: check SHOW GRANTS FOR the role)");
  } else {
    rep->Failed("grants", "missing " + Join(g.missing) + ": GRANT SELECT, INSERT, UPDATE, DELETE ON `" +
                              admin.database() + "`.* TO the user");
  }
}

// Informational: dlock's expiry uses only the server's clock.
void CheckClock(dlock::Admin& admin, Report* rep) {
  dlock::ClockCheck c;
  dlock::Status s = admin.CheckClock(&c);
  if (!s.ok()) {
    rep->Warn("clock", "cannot read the server's clock: " + s.message());
    return;
  }
  char buf[200];
  std::snprintf(buf, sizeof buf, "host clock is %+.3f s from the server's (round trip %.1f ms)",
                c.offset_s, c.round_trip_s * 1000);
  if (std::fabs(c.offset_s) <= 1.0 + c.round_trip_s)
    rep->Ok("clock", buf);
  else
    rep->Warn("clock", std::string(buf) + ": locks stay correct (expiry uses only the server "
                                          "clock), but fix NTP so that logs agree");
}

void CheckSize(dlock::Admin& admin, Report* rep) {
  dlock::LeaseCounts n;
  dlock::Status s = admin.CountLeases(&n);
  if (!s.ok()) {
    rep->Warn("size", "cannot count " + admin.lease_table() + ": " + s.message());
    return;
  }
  const std::string text = admin.lease_table() + ": " + std::to_string(n.rows) + " rows, " +
                           std::to_string(n.held) + " held, " + std::to_string(n.expired_over_1h) +
                           " expired over an hour ago";
  if (n.expired_over_1h > 10000 || n.rows > 1000000)
    rep->Warn("size", text + ": run `dlock cleanup` (from cron) or set cleanup_interval_ms on a client");
  else
    rep->Ok("size", text);
}

}  // namespace

namespace {

int DoctorOne(const std::string& url) {
  Report rep;
  std::unique_ptr<dlock::Admin> admin;
  dlock::Status s = dlock::Admin::Open(url, &admin);
  if (s.code() == dlock::Code::kInvalid) {
    rep.Failed("url", s.message() + ": fix --url / DLOCK_URL");
    return rep.exit_code();
  }
  if (!s.ok()) {
    rep.Failed("connect", s.message() + ": check that the server runs and listens there, the user "
                                        "and the password (URL or DLOCK_PASSWORD)");
    return rep.exit_code();
  }
  rep.Ok("connect", "connected to " + admin->where() + " as " +
                        (admin->user().empty() ? "(default user)" : admin->user()));
  CheckServer(*admin, &rep);
  bool missing = false, lease_ok = false;
  CheckSchema(*admin, &rep, &missing, &lease_ok);
  CheckGrants(*admin, missing, &rep);
  CheckClock(*admin, &rep);
  if (lease_ok) CheckSize(*admin, &rep);
  return rep.exit_code();
}

}  // namespace

// A URL naming several servers: the list itself (each server once), then
// every server's checks under its own heading; failed if any failed.
int CmdDoctor(const std::string& url) {
  const std::vector<std::string> servers = dlock::SplitServerUrls(url);
  if (servers.size() == 1) return DoctorOne(url);
  Report rep;
  std::vector<std::string> ids;
  dlock::Status s = dlock::ServerIds(url, dlock::Config(), &ids);
  if (!s.ok()) {
    rep.Failed("servers", s.message() + ": fix --url / DLOCK_URL");
    return rep.exit_code();
  }
  rep.Ok("servers", std::to_string(servers.size()) +
                        " independent servers, each key on one (rendezvous hash of the server's "
                        "identity and the key): every client must list the same servers (in any "
                        "order), or a key may be held on two at once");
  int rc = rep.exit_code();
  for (size_t i = 0; i < servers.size(); ++i) {
    std::printf("\n== server %zu of %zu: %s\n", i + 1, servers.size(), Scrub(ids[i]).c_str());
    if (DoctorOne(servers[i]) != kExitOk) rc = kExitFailed;
  }
  return rc;
}

}  // namespace dlock_cli
