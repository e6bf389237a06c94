// Shared helpers for the core's doctest suites: the test server's URL, an
// independent admin connection (plain libmariadb, so that what the tests read
// from the lock tables does not depend on the code under test), unique key
// prefixes, and polling with a deadline.
#ifndef DLOCK_TESTS_CORE_TEST_UTIL_H_
#define DLOCK_TESTS_CORE_TEST_UTIL_H_

#include <doctest/doctest.h>
#include <mysql.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlock/core.hpp"
#include "dlock_test_env.h"
#include "options.h"

namespace dtest {

using Clock = std::chrono::steady_clock;
using dlock::Code;

inline int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

inline std::string CodeStr(Code c) { return dlock::CodeName(static_cast<int>(c)); }

// "dlt_<tag>_<pid>_<random>_": keys of one run never meet another run's.
inline std::string UniquePrefix(const std::string& tag) {
  std::random_device rd;
  std::uniform_int_distribution<uint32_t> d;
  return "dlt_" + tag + "_" + std::to_string(getpid()) + "_" + std::to_string(d(rd)) + "_";
}

inline std::string Hex(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// A SQL literal for any bytes: X'..' (X'' is the empty string).
inline std::string Lit(const std::string& s) { return "X'" + Hex(s) + "'"; }

// Polls cond until it holds or the deadline passes; never sleeps past it.
template <class F>
bool PollUntil(Clock::time_point deadline, F cond, std::chrono::milliseconds step = std::chrono::milliseconds(5)) {
  for (;;) {
    if (cond()) return true;
    auto now = Clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(step, deadline - now));
  }
}

// The test server's options, parsed by the library's own parser (unit-tested
// in core_unit).
inline dlock::ClientOptions ServerOptions(const char* url = dlock_test_url()) {
  dlock::ClientOptions o;
  dlock::Status s = dlock::ParseUrl(url, &o);
  REQUIRE_MESSAGE(s.ok(), "cannot parse the test URL: " << s.message());
  return o;
}

using SqlRow = std::vector<std::optional<std::string>>;

// An admin connection with the test URL's credentials (root on the fixture
// server), autocommit, text protocol.
class Admin {
 public:
  // url: another server's (the second of a several-servers test).
  explicit Admin(const char* url = dlock_test_url()) {
    dlock::ClientOptions o = ServerOptions(url);
    m_ = mysql_init(nullptr);
    REQUIRE(m_ != nullptr);
    unsigned timeout = 10;
    mysql_optionsv(m_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_optionsv(m_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_optionsv(m_, MYSQL_INIT_COMMAND, "SET SESSION time_zone='+00:00'");
    const char* sock = o.socket.empty() ? nullptr : o.socket.c_str();
    MYSQL* ok = mysql_real_connect(m_, o.socket.empty() ? o.host.c_str() : "localhost",
                                   o.user.empty() ? nullptr : o.user.c_str(), o.password.c_str(),
                                   o.database.c_str(), o.socket.empty() ? o.port : 0, sock, 0);
    REQUIRE_MESSAGE(ok != nullptr, "admin connection failed: " << mysql_error(m_));
  }
  ~Admin() {
    if (m_ != nullptr) mysql_close(m_);
  }
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;

  // Runs sql; returns "" on success or the error text.
  std::string TryExec(const std::string& sql) {
    if (mysql_real_query(m_, sql.data(), sql.size()) != 0)
      return std::string(mysql_error(m_)) + " (" + std::to_string(mysql_errno(m_)) + ")";
    MYSQL_RES* r = mysql_store_result(m_);
    if (r != nullptr) mysql_free_result(r);
    return "";
  }
  void Exec(const std::string& sql) {
    std::string err = TryExec(sql);
    REQUIRE_MESSAGE(err.empty(), "admin SQL failed: " << sql << ": " << err);
  }
  std::vector<SqlRow> Query(const std::string& sql) {
    std::vector<SqlRow> rows;
    REQUIRE_MESSAGE(mysql_real_query(m_, sql.data(), sql.size()) == 0,
                    "admin SQL failed: " << sql << ": " << mysql_error(m_));
    MYSQL_RES* r = mysql_store_result(m_);
    REQUIRE_MESSAGE(r != nullptr, "admin SQL returned no result: " << sql);
    unsigned n = mysql_num_fields(r);
    while (MYSQL_ROW row = mysql_fetch_row(r)) {
      unsigned long* len = mysql_fetch_lengths(r);
      SqlRow out(n);
      for (unsigned i = 0; i < n; ++i)
        if (row[i] != nullptr) out[i] = std::string(row[i], len[i]);
      rows.push_back(std::move(out));
    }
    mysql_free_result(r);
    return rows;
  }
  // The first column of the first row ("<NULL>" / "<none>" otherwise).
  std::string Scalar(const std::string& sql) {
    std::vector<SqlRow> rows = Query(sql);
    if (rows.empty() || rows[0].empty()) return "<none>";
    return rows[0][0] ? *rows[0][0] : "<NULL>";
  }
  int64_t Int(const std::string& sql) {
    std::string v = Scalar(sql);
    REQUIRE_MESSAGE((!v.empty() && v[0] != '<'), "expected a number from " << sql << ", got " << v);
    return std::stoll(v);
  }

 private:
  MYSQL* m_ = nullptr;
};

// The lease row of key as the database has it: owner, expire_time, fence
// (empty vector when there is no row).
inline SqlRow LeaseRow(Admin& admin, const std::string& key,
                       const std::string& table = "distributed_lock") {
  std::vector<SqlRow> rows = admin.Query("SELECT owner, DATE_FORMAT(expire_time, '%Y-%m-%d %H:%i:%s.%f'), fence FROM `" +
                                         table + "` WHERE lock_key = " + Lit(key));
  REQUIRE(rows.size() <= 1);
  return rows.empty() ? SqlRow{} : rows[0];
}

inline std::shared_ptr<dlock::Client> OpenClient(const dlock::Config& cfg = dlock::Config()) {
  std::shared_ptr<dlock::Client> c;
  dlock::Status s = dlock::Client::Open(dlock_test_url(), cfg, &c);
  REQUIRE_MESSAGE(s.ok(), "Client::Open: " << CodeStr(s.code()) << ": " << s.message());
  REQUIRE(c != nullptr);
  return c;
}

// mode: "lease" or "row".
inline dlock::Config LockConfig(const std::string& mode, int64_t ttl_ms = 0) {
  dlock::Config cfg;
  REQUIRE(cfg.Set("mode", mode).ok());
  if (ttl_ms > 0) REQUIRE(cfg.Set("ttl_ms", std::to_string(ttl_ms)).ok());
  return cfg;
}

inline std::unique_ptr<dlock::Lock> OpenLock(const std::shared_ptr<dlock::Client>& client,
                                             const std::string& key, const std::string& mode = "lease",
                                             int64_t ttl_ms = 0) {
  dlock::Config cfg = LockConfig(mode, ttl_ms);
  std::unique_ptr<dlock::Lock> l;
  dlock::Status s = dlock::Lock::Open(client, key, cfg, &l);
  REQUIRE_MESSAGE(s.ok(), "Lock::Open: " << CodeStr(s.code()) << ": " << s.message());
  REQUIRE(l != nullptr);
  return l;
}

// The second test server's URL (fixture db2, or DLOCK_URL2); without one the
// suite is skipped (exit 77, ctest's SKIP_RETURN_CODE).
inline const char* Url2() {
  const char* u = dlock_test_url2();
  if (u == nullptr) {
    MESSAGE("SKIP: no second server (fixture db2 or DLOCK_URL2)");
    std::exit(77);
  }
  return u;
}

// A client over url, which may list several servers.
inline std::shared_ptr<dlock::Client> OpenUrl(const std::string& url) {
  std::shared_ptr<dlock::Client> c;
  dlock::Status s = dlock::Client::Open(url, dlock::Config(), &c);
  REQUIRE_MESSAGE(s.ok(), "Client::Open: " << CodeStr(s.code()) << ": " << s.message());
  return c;
}

// The first key of prefix + 0, 1, ... that lives on server `want` of client c.
inline std::string KeyOn(const dlock::Client& c, const std::string& prefix, size_t want) {
  // With two servers 1,000 keys all missing one has odds 2^-1000: a routing
  // bug, reported at once rather than at ctest's timeout.
  for (int i = 0; i < 1000; ++i) {
    std::string k = prefix + std::to_string(i);
    size_t at = 9;
    REQUIRE(c.ServerOf(k, &at).ok());
    if (at == want) return k;
  }
  FAIL("no key of " << prefix << " lives on server " << want << " in 1,000 tries");
  return {};
}

}  // namespace dtest

// "Code == expected" with the status's message in the failure output.
#define DT_CHECK_CODE(expr, expected)                                                       \
  do {                                                                                      \
    dlock::Status dt_s_ = (expr);                                                           \
    CHECK_MESSAGE(dt_s_.code() == (expected), #expr " gave " << dtest::CodeStr(dt_s_.code()) \
                                                  << " (" << dt_s_.message() << "), want "  \
                                                  << dtest::CodeStr(expected));             \
  } while (0)
#define DT_REQUIRE_CODE(expr, expected)                                                       \
  do {                                                                                        \
    dlock::Status dt_s_ = (expr);                                                             \
    REQUIRE_MESSAGE(dt_s_.code() == (expected), #expr " gave " << dtest::CodeStr(dt_s_.code()) \
                                                    << " (" << dt_s_.message() << "), want "  \
                                                    << dtest::CodeStr(expected));             \
  } while (0)

#endif  // DLOCK_TESTS_CORE_TEST_UTIL_H_
