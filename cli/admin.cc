// The operator's commands: list, release --force, init, cleanup (doctor is in
// doctor.cc), all through the core's public API (dlock/admin.hpp, core.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dlock/admin.hpp"
#include "duration.h"
#include "exit_codes.h"
#include "say.h"

namespace dlock_cli {

using dlock::Status;

namespace {

double Seconds(int64_t us) { return std::round(static_cast<double>(us) / 1000.0) / 1000.0; }

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

bool IsUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const unsigned char b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) return false;
      cp = cp << 6 | (b & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n + 1;
  }
  return true;
}

// Printable in a terminal: control bytes (and every byte >= 0x80 when the
// key is not UTF-8) as \xNN, cut at 80 bytes.
std::string Shown(const std::string& key) {
  static const char kDigits[] = "0123456789abcdef";
  const bool utf8 = IsUtf8(key);
  std::string out;
  for (unsigned char c : key) {
    if (out.size() >= 80) return out + "...";
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'' || (c >= 0x80 && !utf8)) {
      out += "\\x";
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

int OpenAdmin(const std::string& url, std::unique_ptr<dlock::Admin>* admin) {
  Status s = dlock::Admin::Open(url, admin);
  return s.ok() ? -1 : Fail(kExitUnavailable, s.message());
}

nlohmann::json LeaseJson(const dlock::LeaseInfo& l) {
  nlohmann::json key = nullptr;
  if (IsUtf8(l.key)) key = l.key;
  return {{"key", key},
          {"key_hex", Hex(l.key)},
          {"owner", l.owner},
          {"host", l.host},
          {"pid", l.pid},
          {"token", l.token},
          {"revoked", l.revoked},
          {"held_for_s", Seconds(l.held_for_us)},
          {"expires_in_s", Seconds(l.expires_in_us)}};
}

}  // namespace

int ExitFor(const Status& s) {
  switch (s.code()) {
    case dlock::Code::kOk: return kExitOk;
    case dlock::Code::kBusy: return kExitBusy;
    case dlock::Code::kInvalid: return kExitUsage;
    default: return kExitUnavailable;
  }
}

namespace {

// "server 2 of 3 (mysql://app@db2:3306/app)": no password.
std::string ServerTitle(const std::string& url, size_t i, size_t n) {
  std::string shown;
  if (!dlock::UrlWithoutPassword(url, &shown).ok()) shown = "?";
  return "server " + std::to_string(i + 1) + " of " + std::to_string(n) + " (" + shown + ")";
}

int ListOne(const std::string& url, const std::string& prefix, bool json, nlohmann::json* all,
            const std::string& server) {
  std::unique_ptr<dlock::Admin> admin;
  if (int rc = OpenAdmin(url, &admin); rc >= 0) return rc;
  std::vector<dlock::LeaseInfo> leases;
  bool table_exists = true;
  Status s = admin->ListLeases(prefix, &leases, &table_exists);
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  if (!table_exists) Say("table " + admin->lease_table() + " does not exist yet (dlock init creates it)");
  if (json) {
    for (const auto& l : leases) {
      nlohmann::json one = LeaseJson(l);
      if (!server.empty()) one["server"] = server;
      all->push_back(std::move(one));
    }
    return kExitOk;
  }
  if (leases.empty()) {
    std::printf("no locks held%s\n", prefix.empty() ? "" : (" under '" + Shown(prefix) + "'").c_str());
  } else {
    size_t kw = 3, ow = 5;
    for (const auto& l : leases) {
      kw = std::max(kw, Shown(l.key).size());
      ow = std::max(ow, l.revoked ? 9 : l.owner.size());
    }
    std::printf("%-*s  %-*s  %7s  %9s  %10s\n", static_cast<int>(kw), "KEY", static_cast<int>(ow),
                "OWNER", "TOKEN", "HELD FOR", "EXPIRES IN");
    for (const auto& l : leases)
      std::printf("%-*s  %-*s  %7llu  %9s  %10s\n", static_cast<int>(kw), Shown(l.key).c_str(),
                  static_cast<int>(ow), l.revoked ? "(revoked)" : l.owner.c_str(),
                  static_cast<unsigned long long>(l.token), FormatDuration(l.held_for_us / 1000).c_str(),
                  FormatDuration(l.expires_in_us / 1000).c_str());
  }
  return kExitOk;
}

}  // namespace

// A URL naming several servers: each server's leases in turn (a section per
// server; in JSON one array, each lease with its "server").
int CmdList(const std::string& url, const std::string& prefix, bool json) {
  const std::vector<std::string> servers = dlock::SplitServerUrls(url);
  std::vector<std::string> ids;
  if (servers.size() > 1) {
    Status s = dlock::ServerIds(url, dlock::Config(), &ids);
    if (!s.ok()) return Fail(kExitUsage, s.message());
  }
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < servers.size(); ++i) {
    if (servers.size() > 1 && !json) std::printf("%s== %s\n", i == 0 ? "" : "\n", ServerTitle(servers[i], i, servers.size()).c_str());
    if (int rc = ListOne(servers[i], prefix, json, &all, servers.size() > 1 ? ids[i] : "");
        rc != kExitOk)
      return rc;
  }
  if (json)
    std::printf("%s\n", all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  else
    std::printf("(row locks are not listed: see dlock list --help)\n");
  return kExitOk;
}

int CmdRelease(const std::string& url_in, const std::string& key) {
  std::string url;  // the key's server, with a URL naming several
  // dlock's clients (dlock run) take no options beyond the URL's: the key's
  // server is the one they put it on.
  Status s = dlock::KeyServerUrl(url_in, dlock::Config(), key, &url);
  if (!s.ok()) return Fail(kExitUsage, s.message());
  std::unique_ptr<dlock::Admin> admin;
  if (int rc = OpenAdmin(url, &admin); rc >= 0) return rc;
  dlock::LeaseInfo l;
  bool was_held = false;
  s = admin->Revoke(key, &l, &was_held);
  if (s.code() == dlock::Code::kInvalid) return Fail(kExitUsage, s.message());
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  if (!was_held) {
    if (l.revoked && l.expires_in_us >= 0)
      std::printf("'%s' is already revoked (token %llu); free in %s\n", Shown(key).c_str(),
                  static_cast<unsigned long long>(l.token), FormatDuration(l.expires_in_us / 1000).c_str());
    else
      std::printf("'%s' is not held; nothing removed\n", Shown(key).c_str());
    return kExitFailed;
  }
  std::printf("revoked '%s': owner %s, token %llu, held for %s; another owner can take it in %s, "
              "when the revoked lease ends (its holder finds the lock lost at its next renewal; "
              "a `dlock run` holder has stopped its command by then)\n",
              Shown(key).c_str(), l.owner.c_str(), static_cast<unsigned long long>(l.token),
              FormatDuration(l.held_for_us / 1000).c_str(), FormatDuration(l.expires_in_us / 1000).c_str());
  return kExitOk;
}

// A URL naming several servers: every server's schema, in turn; the first
// failure ends it (the servers before it are done, which is idempotent).
int CmdInit(const std::string& url, bool print_sql) {
  const std::vector<std::string> servers = dlock::SplitServerUrls(url);
  if (servers.size() > 1) {
    std::vector<std::string> ids;
    Status s = dlock::ServerIds(url, dlock::Config(), &ids);
    if (!s.ok()) return Fail(kExitUsage, s.message());
  }
  for (size_t i = 0; i < servers.size(); ++i) {
    if (servers.size() > 1 && print_sql)
      std::printf("-- %s\n", ServerTitle(servers[i], i, servers.size()).c_str());
    if (print_sql) {
      dlock::SchemaSql sql;
      Status s = dlock::DescribeSchema(servers[i], &sql);
      if (!s.ok()) return Fail(kExitUnavailable, s.message());
      std::printf("-- dlock schema (tables %s, %s, %s; %s is used on Galera only); run as a\n"
                  "-- user with CREATE, then grant SELECT, INSERT, UPDATE, DELETE on them to the\n"
                  "-- application's user.\n",
                  sql.lease_table.c_str(), sql.fence_table.c_str(), sql.row_table.c_str(),
                  sql.claim_table.c_str());
      for (const auto& st : sql.statements) std::printf("%s;\n", st.c_str());
      continue;
    }
    std::unique_ptr<dlock::Admin> admin;
    if (int rc = OpenAdmin(servers[i], &admin); rc >= 0) return rc;
    Status s = admin->CreateSchema();
    if (!s.ok()) return Fail(kExitUnavailable, s.message());
    std::printf("schema ready on %s: tables %s, %s_fence, %s\n", admin->where().c_str(),
                admin->lease_table().c_str(), admin->lease_table().c_str(), admin->row_table().c_str());
  }
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
