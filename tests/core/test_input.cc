// core_input: bad and unusual input through the core's public API, against
// the fixture server: bad keys, exact key identity, SQL metacharacters, bad
// ttl/wait, bad URLs, wrong password, closed port; none of it changes the
// lock tables.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "core_test_util.h"
#include "url_secret.h"

using dlock::Code;
using dlock::LockState;
using namespace dtest;

namespace {

const std::string kPrefix = UniquePrefix("input");

// Rows of both lock tables whose key starts with prefix.
int64_t CountPrefixed(Admin& admin, const std::string& prefix = kPrefix) {
  const std::string n = std::to_string(prefix.size());
  return admin.Int("SELECT (SELECT COUNT(*) FROM distributed_lock WHERE LEFT(lock_key, " + n + ") = " +
                   Lit(prefix) + ") + (SELECT COUNT(*) FROM fixed_lock WHERE LEFT(lock_name, " + n +
                   ") = " + Lit(prefix) + ")");
}

int64_t CountEmptyKeys(Admin& admin) {
  return admin.Int("SELECT (SELECT COUNT(*) FROM distributed_lock WHERE lock_key = '') + "
                   "(SELECT COUNT(*) FROM fixed_lock WHERE lock_name = '')");
}

std::vector<std::string> LockTables(Admin& admin) {
  std::vector<std::string> names;
  for (const SqlRow& r : admin.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
                                     "DATABASE() AND TABLE_NAME IN ('distributed_lock', "
                                     "'distributed_lock_fence', 'fixed_lock') ORDER BY TABLE_NAME"))
    names.push_back(*r[0]);
  return names;
}

dlock::Status OpenLockStatus(const std::shared_ptr<dlock::Client>& c, const std::string& key,
                             const dlock::Config& cfg = dlock::Config()) {
  std::unique_ptr<dlock::Lock> l;
  dlock::Status s = dlock::Lock::Open(c, key, cfg, &l);
  if (!s.ok()) CHECK(l == nullptr);
  return s;
}

std::string WithPassword(const std::string& password) {
  dlock::ClientOptions o = ServerOptions();
  std::string url = "mysql://" + (o.user.empty() ? std::string("root") : o.user) + ":" + password + "@";
  url += o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  return url + ":" + std::to_string(o.port) + "/" + o.database;
}

}  // namespace

TEST_CASE("input: bad keys are refused by Lock::Open and change nothing") {
  Admin admin;
  auto c = OpenClient();
  const int64_t before = CountPrefixed(admin), empty_before = CountEmptyKeys(admin);
  for (const char* mode : {"lease", "row"}) {
    dlock::Config cfg;
    REQUIRE(cfg.Set("mode", mode).ok());
    INFO("mode ", std::string(mode));
    DT_CHECK_CODE(OpenLockStatus(c, "", cfg), Code::kInvalid);
    DT_CHECK_CODE(OpenLockStatus(c, kPrefix + std::string(513 - kPrefix.size(), 'k'), cfg), Code::kInvalid);
    DT_CHECK_CODE(OpenLockStatus(c, kPrefix + std::string(5000, 'k'), cfg), Code::kInvalid);
    DT_CHECK_CODE(OpenLockStatus(c, kPrefix + std::string("nul\0inside", 10), cfg), Code::kInvalid);
    DT_CHECK_CODE(OpenLockStatus(c, kPrefix + std::string("\0", 1), cfg), Code::kInvalid);
    DT_CHECK_CODE(OpenLockStatus(nullptr, kPrefix + "k", cfg), Code::kInvalid);
  }
  // Lock options only; client options and bad values are refused.
  dlock::Config client_opt;
  REQUIRE(client_opt.Set("pool", "2").ok());
  DT_CHECK_CODE(OpenLockStatus(c, kPrefix + "cfg", client_opt), Code::kInvalid);

  // Exactly 512 bytes is fine, and is stored untruncated.
  const std::string k512 = kPrefix + std::string(512 - kPrefix.size(), 'z');
  REQUIRE(k512.size() == 512);
  for (const char* mode : {"lease", "row"}) {
    auto l = OpenLock(c, k512, mode);
    DT_REQUIRE_CODE(l->Try(0), Code::kOk);
    CHECK(l->key() == k512);
    DT_CHECK_CODE(l->Release(), Code::kOk);
  }
  CHECK(admin.Int("SELECT LENGTH(lock_key) FROM distributed_lock WHERE lock_key = " + Lit(k512)) == 512);
  CHECK(admin.Int("SELECT LENGTH(lock_name) FROM fixed_lock WHERE lock_name = " + Lit(k512)) == 512);
  CHECK(CountPrefixed(admin) == before + 2);
  CHECK(CountEmptyKeys(admin) == empty_before);
}

TEST_CASE("input: keys differing by case, trailing space or accent are different locks") {
  Admin admin;
  auto c1 = OpenClient();
  auto c2 = OpenClient();
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"Key", "key"},
      {"key", "key "},
      {"key", "key\t"},
      {"cafe", "caf\xc3\xa9"},          // e vs precomposed é
      {"caf\xc3\xa9", "cafe\xcc\x81"},  // precomposed vs combining accent
      {"strasse", "stra\xc3\x9f" "e"},  // ss vs ß
      {"A", "\xef\xbc\xa1"},            // A vs fullwidth A
  };
  for (const char* mode : {"lease", "row"}) {
    for (const auto& p : pairs) {
      const std::string k1 = kPrefix + mode + "_" + p.first, k2 = kPrefix + mode + "_" + p.second;
      INFO("mode ", std::string(mode), ": '", dlock::QuoteKey(k1), "' vs '", dlock::QuoteKey(k2), "'");
      auto a = OpenLock(c1, k1, mode);
      auto b = OpenLock(c2, k2, mode);
      DT_REQUIRE_CODE(a->Try(0), Code::kOk);
      DT_CHECK_CODE(b->Try(0), Code::kOk);  // both held at once
      CHECK(a->held());
      CHECK(b->held());
      // Each still excludes its own key.
      auto a2 = OpenLock(c2, k1, mode);
      DT_CHECK_CODE(a2->Try(0), Code::kBusy);
      DT_CHECK_CODE(a->Release(), Code::kOk);
      DT_CHECK_CODE(b->Release(), Code::kOk);
    }
  }
  // The stored bytes are exactly the keys'.
  for (const auto& p : pairs) {
    for (const std::string& k : {kPrefix + "lease_" + p.first, kPrefix + "lease_" + p.second}) {
      CHECK(admin.Scalar("SELECT HEX(lock_key) FROM distributed_lock WHERE lock_key = " + Lit(k)) == Hex(k));
    }
  }
}

TEST_CASE("input: SQL metacharacters in keys work and the tables remain") {
  Admin admin;
  auto c1 = OpenClient();
  auto c2 = OpenClient();
  const std::vector<std::string> keys = {
      "'; DROP TABLE distributed_lock; --",
      "\"; DROP TABLE fixed_lock; #",
      "` OR 1=1 --",
      "\\",
      "\\'",
      "%",
      "_",
      "a%b_c",
      "' OR '1'='1",
      "x'); DELETE FROM distributed_lock_fence; --",
      "\x01\x02\x7f\x80\xff",
      "\xc3\x28 invalid utf-8",
      "line\nbreak\r\n",
      "?",
      "$1 :name @var",
  };
  const std::vector<std::string> tables_before = LockTables(admin);
  REQUIRE(tables_before.size() == 3);
  const int64_t floor_rows = admin.Int("SELECT COUNT(*) FROM distributed_lock_fence");
  for (const char* mode : {"lease", "row"}) {
    for (const std::string& suffix : keys) {
      const std::string key = kPrefix + "meta_" + mode + "_" + suffix;
      INFO("mode ", std::string(mode), ", key '", dlock::QuoteKey(key), "'");
      auto a = OpenLock(c1, key, mode);
      auto b = OpenLock(c2, key, mode);
      DT_REQUIRE_CODE(a->Try(0), Code::kOk);
      DT_CHECK_CODE(b->Try(0), Code::kBusy);
      CHECK(a->key() == key);
      DT_CHECK_CODE(a->Release(), Code::kOk);
      DT_CHECK_CODE(b->Try(0), Code::kOk);
      DT_CHECK_CODE(b->Release(), Code::kOk);
      const std::string table = std::string(mode) == "lease" ? "distributed_lock" : "fixed_lock";
      const std::string col = std::string(mode) == "lease" ? "lock_key" : "lock_name";
      CHECK(admin.Int("SELECT COUNT(*) FROM " + table + " WHERE " + col + " = " + Lit(key)) == 1);
    }
  }
  CHECK(LockTables(admin) == tables_before);
  CHECK(admin.Int("SELECT COUNT(*) FROM distributed_lock_fence") == floor_rows);
  // A metacharacter key never matched anything else: the other keys of this
  // run are all still there.
  CHECK(CountPrefixed(admin, kPrefix + "meta_") == static_cast<int64_t>(2 * keys.size()));
}

TEST_CASE("input: bad ttl is kInvalid and changes nothing; every wait is a wait") {
  auto c = OpenClient();
  dlock::Config cfg;
  for (const char* ttl : {"-1", "0", "2592000001", "99999999999999999999", "abc", "1.5", ""}) {
    INFO("ttl_ms '", std::string(ttl), "'");
    DT_CHECK_CODE(cfg.Set("ttl_ms", ttl), Code::kInvalid);
  }
  CHECK(cfg.values().empty());
  // A negative wait is no limit, and so is one past the clock's range: on a
  // free key each returns at once, holding it.
  for (const char* mode : {"lease", "row"}) {
    INFO("mode ", std::string(mode));
    auto l = OpenLock(c, kPrefix + "wait_" + mode, mode);
    for (int64_t w : {int64_t{-1}, int64_t{-1000}, INT64_MIN, int64_t{0}, INT64_MAX}) {
      INFO("wait ", w);
      auto t = Clock::now();
      DT_CHECK_CODE(l->Try(w), Code::kOk);
      CHECK(MsSince(t) < 2000);
      DT_CHECK_CODE(l->WaitLost(0), Code::kTimeout);  // held: a zero wait times out
      DT_CHECK_CODE(l->Release(), Code::kOk);
      DT_CHECK_CODE(l->WaitLost(w), Code::kOk);  // released: returns at once, any wait
    }
    DT_CHECK_CODE(l->Release(), Code::kState);
    DT_CHECK_CODE(l->Renew(), Code::kState);
  }
}

TEST_CASE("input: malformed URLs through Client::Open") {
  for (const std::string& url : std::vector<std::string>{"", "127.0.0.1/test", "mysql://root@127.0.0.1:0/test",
                                "mysql://root@127.0.0.1:3306", "mysql://root@127.0.0.1/",
                                "mysql://root@127.0.0.1/test?pool=0", "mysql://root@127.0.0.1/test?x=1"}) {
    INFO("url '", url, "'");
    std::shared_ptr<dlock::Client> c;
    DT_CHECK_CODE(dlock::Client::Open(url, dlock::Config(), &c), Code::kInvalid);
    CHECK(c == nullptr);
  }
  // Bad client options in the Config are refused too.
  dlock::Config cfg;
  DT_CHECK_CODE(cfg.Set("table", "bad-name"), Code::kInvalid);
  DT_CHECK_CODE(cfg.Set("nope", "1"), Code::kInvalid);
}

TEST_CASE("input: wrong password is kConnect and the message never has the password") {
  const std::string pw = "Wr0ngPassw0rd_x7";
  std::shared_ptr<dlock::Client> c;
  dlock::Status s = dlock::Client::Open(WithPassword(pw), dlock::Config(), &c);
  INFO(s.message());
  CHECK(s.code() == Code::kConnect);
  CHECK(s.server_errno() == 1045);
  CHECK(s.message().find(pw) == std::string::npos);
  CHECK(s.message().find("Wr0ng") == std::string::npos);
  CHECK(c == nullptr);

  // Through DLOCK_PASSWORD as well.
  dlock::ClientOptions o = ServerOptions();
  if (o.password.empty()) {
    setenv("DLOCK_PASSWORD", pw.c_str(), 1);
    s = dlock::Client::Open(dlock_test_url(), dlock::Config(), &c);
    unsetenv("DLOCK_PASSWORD");
    INFO(s.message());
    CHECK(s.code() == Code::kConnect);
    CHECK(s.message().find(pw) == std::string::npos);
  }
}

TEST_CASE("input: URL typos around the password never show it, also at connect time") {
  // The typos people make, aimed at the fixture server: each is refused when
  // parsed, or fails to log in; no message holds any 5 bytes of the password.
  const std::string pw = "Typ0dSecr3tZ";
  dlock::ClientOptions o = ServerOptions();
  const std::string user = o.user.empty() ? std::string("root") : o.user;
  const std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  const std::string port = std::to_string(o.port), db = o.database;
  const std::vector<std::string> urls = {
      "mysql://" + user + ":" + pw + host + ":" + port + "/" + db,   // the '@' forgotten
      "mysql://" + user + ":" + pw + ":" + port + "/" + db,          // the host forgotten
      "mysql://" + user + ":" + pw + "@:" + port + "/" + db,         // ... after the '@'
      "mysql://" + user + ":" + pw + "/" + db,                       // host and '@' forgotten
      "mysql:///" + user + ":" + pw + "@" + host + ":" + port + "/" + db,
      "mysql:///" + user + ":" + pw + "@" + host + ":" + port,
      "mysql://" + user + "@" + pw + "@" + host + ":" + port + "/" + db,  // '@' for ':'
      "mysql://" + user + "@" + host + ":" + port + "/" + db + "?password:" + pw,
      "mysql://" + user + "@" + host + ":" + port + "/" + db + "?password=" + pw,
      "mysql://" + user + ":" + pw + "@@" + host + ":" + port + "/" + db,
      "mysql://" + user + ":" + pw.substr(0, 6) + "/" + pw.substr(6) + "@" + host + ":" + port + "/" + db,
      "mysql://" + user + ":" + pw + "@" + host + ":" + port + "/" + db,  // just the wrong password
  };
  dlock::Config cfg;
  REQUIRE(cfg.Set("connect_timeout", "2").ok());
  for (const std::string& url : urls) {
    std::shared_ptr<dlock::Client> c;
    dlock::Status s = dlock::Client::Open(url, cfg, &c);
    INFO("url: ", url, " -> ", CodeStr(s.code()), ": ", s.message());
    CHECK(!s.ok());
    CHECK((s.code() == Code::kInvalid || s.code() == Code::kConnect));
    CHECK(SecretPieceIn(s.message(), pw) == "");
    CHECK(c == nullptr);
  }
}

TEST_CASE("input: unknown database is kConnect") {
  dlock::ClientOptions o = ServerOptions();
  std::string url = dlock_test_url();
  url = url.substr(0, url.rfind('/') + 1) + "dlock_no_such_db_" + std::to_string(getpid());
  std::shared_ptr<dlock::Client> c;
  dlock::Status s = dlock::Client::Open(url, dlock::Config(), &c);
  INFO(s.message());
  CHECK(s.code() == Code::kConnect);
  CHECK(c == nullptr);
}

TEST_CASE("input: a closed port is kConnect within the connect timeout") {
  // A bound socket that does not listen: nobody else can take the port, and
  // connecting to it is refused.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const int port = ntohs(a.sin_port);

  dlock::Config cfg;
  REQUIRE(cfg.Set("connect_timeout", "1").ok());
  std::shared_ptr<dlock::Client> c;
  const auto t = Clock::now();
  dlock::Status s = dlock::Client::Open("mysql://root:Secr3tPw@127.0.0.1:" + std::to_string(port) + "/test", cfg, &c);
  const int64_t took = MsSince(t);
  close(fd);
  INFO(s.message(), " after ", took, " ms");
  CHECK(s.code() == Code::kConnect);
  CHECK(took < 1500);
  CHECK(s.message().find("Secr3tPw") == std::string::npos);
  CHECK(s.message().find(std::to_string(port)) != std::string::npos);  // says where
  CHECK(c == nullptr);
}
