// The operator's commands: list, release --force, init, cleanup (doctor is in
// doctor.cc). list and release read the lock tables over a connection of
// their own (the core has no such calls); every statement is prepared, with
// the key as a parameter and table names only from the validated options.
#include <mysqld_error.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client_impl.h"  // SchemaTables: the DDL the core creates
#include "commands.h"
#include "conn.h"
#include "direct.h"
#include "duration.h"
#include "exit_codes.h"
#include "options.h"

namespace dlock_cli {

using dlock::Conn;
using dlock::ExecResult;
using dlock::Param;
using dlock::Status;

namespace {

// LIKE pattern matching the keys that start with prefix.
std::string PrefixPattern(const std::string& prefix) {
  std::string p;
  for (char c : prefix) {
    if (c == '%' || c == '_' || c == '\\') p.push_back('\\');
    p.push_back(c);
  }
  return p + "%";
}

struct Held {
  std::string key, owner;
  uint64_t token = 0;
  int64_t held_us = 0, expires_us = 0;
};

double Seconds(int64_t us) { return std::round(static_cast<double>(us) / 1000.0) / 1000.0; }

}  // namespace

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "dlock: %s\n", msg.c_str());
  return code;
}

int ExitFor(const Status& s) {
  switch (s.code()) {
    case dlock::Code::kOk: return kExitOk;
    case dlock::Code::kBusy: return kExitBusy;
    case dlock::Code::kInvalid: return kExitUsage;
    default: return kExitUnavailable;
  }
}

int CmdList(const std::string& url, const std::string& prefix, bool json) {
  dlock::ClientOptions o;
  std::unique_ptr<Conn> conn;
  Status s = Connect(url, &o, &conn);
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  const std::string now = "UTC_TIMESTAMP(6)";
  ExecResult r;
  s = conn->Exec("SELECT lock_key, owner, fence, TIMESTAMPDIFF(MICROSECOND, create_time, " + now +
                     "), TIMESTAMPDIFF(MICROSECOND, " + now + ", expire_time) FROM " + Q(o.table) +
                     " WHERE owner <> '' AND expire_time >= " + now +
                     " AND lock_key LIKE ? ORDER BY lock_key",
                 {Param::Bytes(PrefixPattern(prefix))}, &r, false);
  if (!s.ok() && s.server_errno() == ER_NO_SUCH_TABLE) {
    std::fprintf(stderr, "dlock: table %s does not exist yet (dlock init creates it)\n", o.table.c_str());
    r.rows.clear();
  } else if (!s.ok()) {
    return Fail(kExitUnavailable, s.message());
  }
  std::vector<Held> held;
  for (const auto& row : r.rows) {
    Held h;
    h.key = row[0].value_or("");
    h.owner = row[1].value_or("");
    h.token = static_cast<uint64_t>(std::strtoull(row[2].value_or("0").c_str(), nullptr, 10));
    h.held_us = ToInt(row[3]);
    h.expires_us = ToInt(row[4]);
    held.push_back(std::move(h));
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Held& h : held)
      out.push_back({{"key", h.key},
                     {"owner", h.owner},
                     {"token", h.token},
                     {"held_for_s", Seconds(h.held_us)},
                     {"expires_in_s", Seconds(h.expires_us)}});
    // Keys are bytes: anything that is not UTF-8 shows as U+FFFD.
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  if (held.empty()) {
    std::printf("no locks held%s\n", prefix.empty() ? "" : (" under '" + dlock::QuoteKey(prefix) + "'").c_str());
    return kExitOk;
  }
  size_t kw = 3, ow = 5;
  for (const Held& h : held) {
    kw = std::max(kw, dlock::QuoteKey(h.key).size());
    ow = std::max(ow, h.owner.size());
  }
  std::printf("%-*s  %-*s  %7s  %9s  %10s\n", static_cast<int>(kw), "KEY", static_cast<int>(ow), "OWNER",
              "TOKEN", "HELD FOR", "EXPIRES IN");
  for (const Held& h : held)
    std::printf("%-*s  %-*s  %7llu  %9s  %10s\n", static_cast<int>(kw), dlock::QuoteKey(h.key).c_str(),
                static_cast<int>(ow), h.owner.c_str(), static_cast<unsigned long long>(h.token),
                FormatDuration(h.held_us / 1000).c_str(), FormatDuration(h.expires_us / 1000).c_str());
  return kExitOk;
}

int CmdRelease(const std::string& url, const std::string& key) {
  Status s = dlock::ValidateKey(key);
  if (!s.ok()) return Fail(kExitUsage, s.message());
  dlock::ClientOptions o;
  std::unique_ptr<Conn> conn;
  s = Connect(url, &o, &conn);
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  const std::string now = "UTC_TIMESTAMP(6)";
  ExecResult r;
  // Read and free the row in one transaction, so what is printed is exactly
  // what was removed. The row is freed in place as a release does: its
  // fencing counter stays, and the holder's next renewal finds it lost.
  s = conn->Query("START TRANSACTION");
  if (s.ok())
    s = conn->Exec("SELECT owner, fence, TIMESTAMPDIFF(MICROSECOND, create_time, " + now +
                       "), TIMESTAMPDIFF(MICROSECOND, " + now + ", expire_time) FROM " + Q(o.table) +
                       " WHERE lock_key = ? FOR UPDATE",
                   {Param::Bytes(key)}, &r, false);
  if (!s.ok()) {
    if (!conn->broken()) (void)conn->Query("ROLLBACK");
    return Fail(kExitUnavailable, s.message());
  }
  if (r.rows.empty() || r.rows[0][0].value_or("").empty() || ToInt(r.rows[0][3]) < 0) {
    (void)conn->Query("ROLLBACK");
    std::printf("'%s' is not held; nothing removed\n", dlock::QuoteKey(key).c_str());
    return kExitFailed;
  }
  const std::string owner = *r.rows[0][0];
  const std::string token = r.rows[0][1].value_or("0");
  const int64_t held_us = ToInt(r.rows[0][2]), left_us = ToInt(r.rows[0][3]);
  s = conn->Exec("UPDATE " + Q(o.table) +
                     " SET owner = '', expire_time = '1970-01-01 00:00:00' WHERE lock_key = ? AND owner = ?",
                 {Param::Bytes(key), Param::Bytes(owner)}, &r, false);
  if (s.ok()) s = conn->Query("COMMIT");
  if (!s.ok()) {
    if (!conn->broken()) (void)conn->Query("ROLLBACK");
    return Fail(kExitUnavailable, s.message());
  }
  std::printf("released '%s': owner %s, token %s, held for %s, %s left on its lease\n",
              dlock::QuoteKey(key).c_str(), owner.c_str(), token.c_str(),
              FormatDuration(held_us / 1000).c_str(), FormatDuration(left_us / 1000).c_str());
  return kExitOk;
}

int CmdInit(const std::string& url, bool print_sql) {
  if (print_sql) {
    dlock::ClientOptions o;
    if (!url.empty()) {
      Status s = dlock::ParseUrl(url, &o);
      if (!s.ok()) return Fail(kExitUnavailable, s.message());
    }
    std::printf("-- dlock schema (tables %s, %s_fence, %s); run as a user with CREATE, then grant\n"
                "-- SELECT, INSERT, UPDATE, DELETE on them to the application's user.\n",
                o.table.c_str(), o.table.c_str(), o.row_table.c_str());
    for (const auto& t : dlock::SchemaTables(o)) std::printf("%s;\n", t.ddl.c_str());
    std::printf("%s;\n", dlock::SchemaSeedSql(o).c_str());
    return kExitOk;
  }
  if (url.empty()) return Fail(kExitUsage, "no database URL: pass --url or set DLOCK_URL");
  std::shared_ptr<dlock::Client> client;
  Status s = dlock::Client::Open(url, dlock::Config(), &client);
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  const auto& o = client->impl()->options();
  std::printf("schema ready on %s: tables %s, %s_fence, %s\n", o.Where().c_str(), o.table.c_str(),
              o.table.c_str(), o.row_table.c_str());
  return kExitOk;
}

int CmdCleanup(const std::string& url, int64_t grace_ms) {
  dlock::Config cfg;
  Status s = cfg.Set("cleanup_grace_ms", std::to_string(grace_ms));
  if (!s.ok()) return Fail(kExitUsage, s.message());
  std::shared_ptr<dlock::Client> client;
  s = dlock::Client::Open(url, cfg, &client);
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  uint64_t deleted = 0;
  s = client->Cleanup(&deleted);
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  uint64_t rows = 0;
  (void)client->Counter("table_rows", &rows);
  std::printf("removed %llu expired lease rows (expired more than %s ago); %llu rows remain\n",
              static_cast<unsigned long long>(deleted), FormatDuration(grace_ms).c_str(),
              static_cast<unsigned long long>(rows));
  return kExitOk;
}

}  // namespace dlock_cli
