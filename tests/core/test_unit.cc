// core_unit: option, URL, identifier and key parsing. No database.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "dlock/core.hpp"
#include "options.h"
#include "url_secret.h"

using dlock::ClientOptions;
using dlock::Code;
using dlock::Config;
using dlock::Status;

namespace {

// Unsets DLOCK_PASSWORD for a scope (and restores it), so that the
// environment the tests run in cannot change what a URL means.
class EnvPassword {
 public:
  explicit EnvPassword(const char* value) {
    const char* old = std::getenv("DLOCK_PASSWORD");
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) setenv("DLOCK_PASSWORD", value, 1);
    else unsetenv("DLOCK_PASSWORD");
  }
  ~EnvPassword() {
    if (had_) setenv("DLOCK_PASSWORD", old_.c_str(), 1);
    else unsetenv("DLOCK_PASSWORD");
  }

 private:
  bool had_ = false;
  std::string old_;
};

ClientOptions MustParse(const std::string& url) {
  ClientOptions o;
  Status s = dlock::ParseUrl(url, &o);
  INFO("url: ", url);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return o;
}

}  // namespace

TEST_CASE("ParseUrl: user, password, host, port, database and defaults") {
  EnvPassword env(nullptr);
  ClientOptions o = MustParse("mysql://alice:s3cret@db.example.com:3307/app");
  CHECK(o.user == "alice");
  CHECK(o.password == "s3cret");
  CHECK(o.host == "db.example.com");
  CHECK(o.port == 3307u);
  CHECK(o.database == "app");
  CHECK(o.socket.empty());
  CHECK(o.pool == 8);
  CHECK(o.connect_timeout_s == 5);
  CHECK(o.read_timeout_s == 30);
  CHECK(o.table == "distributed_lock");
  CHECK(o.row_table == "fixed_lock");
  CHECK(o.Where() == "db.example.com:3307/app");

  o = MustParse("mysql://bob@10.0.0.5/db1");
  CHECK(o.user == "bob");
  CHECK(o.password.empty());
  CHECK(o.host == "10.0.0.5");
  CHECK(o.port == 3306u);
  CHECK(o.database == "db1");

  o = MustParse("mysql://h/d");  // no user at all
  CHECK(o.user.empty());
  CHECK(o.host == "h");

  o = MustParse("mysql:///d");  // empty host = loopback
  CHECK(o.host == "127.0.0.1");
  CHECK(o.database == "d");

  // The password may contain ':' and '@' unescaped: the last '@' ends it.
  o = MustParse("mysql://u:p:a@ss@h:1/d");
  CHECK(o.user == "u");
  CHECK(o.password == "p:a@ss");
  CHECK(o.host == "h");
  CHECK(o.port == 1u);
  o = MustParse("mysql://u@h:65535/d");
  CHECK(o.port == 65535u);
}

TEST_CASE("ParseUrl: several hosts (a Galera cluster), each with its own port") {
  EnvPassword env(nullptr);
  ClientOptions o = MustParse("mysql://u:p,w@db1:3311,db2,[::1]:3313/app?pool=2");
  CHECK(o.password == "p,w");  // a ',' in the password is the password's
  REQUIRE(o.nodes.size() == 3u);
  CHECK(o.nodes[0].host == "db1");
  CHECK(o.nodes[0].port == 3311u);
  CHECK(o.nodes[1].host == "db2");
  CHECK(o.nodes[1].port == 3306u);
  CHECK(o.nodes[2].host == "::1");
  CHECK(o.nodes[2].port == 3313u);
  CHECK(o.host == "db1");  // the first node is the one messages name before a connection
  CHECK(o.port == 3311u);
  CHECK(o.pool == 2);
  CHECK(MustParse("mysql://u@db1:3311/app").nodes.empty());  // one address: no list
  // In a list, localhost is TCP (Connector/C would take its socket and
  // ignore the port: every node the same server).
  o = MustParse("mysql://u@localhost:3311,LocalHost:3312/app");
  REQUIRE(o.nodes.size() == 2u);
  CHECK(o.nodes[0].host == "127.0.0.1");
  CHECK(o.nodes[1].host == "127.0.0.1");
  CHECK(o.nodes[1].port == 3312u);
  CHECK(o.host == "127.0.0.1");
  // One address: localhost with a port is TCP to that port, as in a list,
  // a DSN and a JDBC URL (the same URL means the same server in every
  // language); without a port it stays Connector/C's default unix socket;
  // socket= wins.
  o = MustParse("mysql://u@localhost:3311/app");
  CHECK(o.host == "127.0.0.1");
  CHECK(o.port == 3311u);
  CHECK(o.socket.empty());
  CHECK(MustParse("mariadb+mariadbconnector://u@LocalHost:3311/app").host == "127.0.0.1");
  CHECK(MustParse("mysql://u@localhost:3306/app").host == "127.0.0.1");  // the default, written
  o = MustParse("mysql://u@localhost/app");
  CHECK(o.host == "localhost");
  CHECK(o.port == 3306u);
  o = MustParse("mysql://u@localhost:3311/app?socket=/tmp/s.sock");
  CHECK(o.host == "localhost");
  CHECK(o.socket == "/tmp/s.sock");
  CHECK(o.Where() == "/tmp/s.sock/app");
  CHECK(MustParse("mysql://u@localhost.example:3311/app").host == "localhost.example");
  CHECK(MustParse("mysql://u@[localhost]:3311/app").host == "127.0.0.1");

  for (const char* bad : {"mysql://u@db1:3311,,db2:3312/app", "mysql://u@db1:3311,/app",
                          "mysql://u@,db2/app", "mysql://u@db1:x,db2:3312/app",
                          "mysql://u@db1:3311,db2:3312/app?socket=/tmp/s"}) {
    ClientOptions x;
    Status s = dlock::ParseUrl(bad, &x);
    INFO(bad);
    CHECK(s.code() == dlock::Code::kInvalid);
    CHECK(!s.message().empty());
  }
  std::string many = "mysql://u@";
  for (int i = 0; i < 17; ++i) many += (i ? ",h" : "h") + std::to_string(i);
  ClientOptions x;
  CHECK(dlock::ParseUrl(many + "/app", &x).code() == dlock::Code::kInvalid);
}

TEST_CASE("ParseUrl: mariadb:// scheme is the same as mysql://") {
  EnvPassword env(nullptr);
  ClientOptions a = MustParse("mariadb://u:pw@h:3310/d?pool=3");
  ClientOptions b = MustParse("mysql://u:pw@h:3310/d?pool=3");
  CHECK(a.user == b.user);
  CHECK(a.password == b.password);
  CHECK(a.host == b.host);
  CHECK(a.port == b.port);
  CHECK(a.database == b.database);
  CHECK(a.pool == 3);
}

TEST_CASE("ParseUrl: IPv6 hosts in brackets") {
  EnvPassword env(nullptr);
  ClientOptions o = MustParse("mysql://u@[::1]:3307/d");
  CHECK(o.host == "::1");
  CHECK(o.port == 3307u);
  o = MustParse("mysql://u:pw@[2001:db8::5]/d");
  CHECK(o.host == "2001:db8::5");
  CHECK(o.port == 3306u);
  CHECK(o.password == "pw");

  Status s = dlock::ParseUrl("mysql://u@[::1/d", &o);
  CHECK(s.code() == Code::kInvalid);
  s = dlock::ParseUrl("mysql://u@[::1]x/d", &o);
  CHECK(s.code() == Code::kInvalid);
  s = dlock::ParseUrl("mysql://u@[::1]:99999/d", &o);
  CHECK(s.code() == Code::kInvalid);
}

TEST_CASE("ParseUrl: options in the query") {
  EnvPassword env(nullptr);
  ClientOptions o = MustParse(
      "mysql://u@h/d?socket=/run/mysqld/mysqld.sock&pool=16&connect_timeout=2&read_timeout=9"
      "&table=my_leases&row_table=my_rows&ssl_mode=require");
  CHECK(o.socket == "/run/mysqld/mysqld.sock");
  CHECK(o.pool == 16);
  CHECK(o.connect_timeout_s == 2);
  CHECK(o.read_timeout_s == 9);
  CHECK(o.table == "my_leases");
  CHECK(o.row_table == "my_rows");
  CHECK(o.ssl_mode == dlock::SslMode::kRequire);
  CHECK(o.Where() == "/run/mysqld/mysqld.sock/d");

  // Percent-encoded socket path and an empty pair are accepted.
  o = MustParse("mysql://u@h/d?socket=%2Ftmp%2Fx.sock&&pool=1");
  CHECK(o.socket == "/tmp/x.sock");
  CHECK(o.pool == 1);
  o = MustParse("mysql://u@h/d?pool=1024");
  CHECK(o.pool == 1024);
}

TEST_CASE("ParseUrl: percent-decoding of user, password and database") {
  EnvPassword env(nullptr);
  ClientOptions o = MustParse("mysql://us%40er%3Ax:p%40ss%3Aw%2Fo%25rd%20@h/my%2Ddb");
  CHECK(o.user == "us@er:x");
  CHECK(o.password == "p@ss:w/o%rd ");
  CHECK(o.database == "my-db");
  o = MustParse("mysql://%e6%97%a5:%E6%97%A5@h/d%C3%A9");  // UTF-8, both hex cases
  CHECK(o.user == "\xe6\x97\xa5");
  CHECK(o.password == "\xe6\x97\xa5");
  CHECK(o.database == "d\xc3\xa9");
}

TEST_CASE("ParseUrl: DLOCK_PASSWORD fills in a missing password only") {
  {
    EnvPassword env("from-env");
    CHECK(MustParse("mysql://u@h/d").password == "from-env");
    CHECK(MustParse("mysql://u:@h/d").password == "from-env");  // empty = missing
    CHECK(MustParse("mysql://u:inurl@h/d").password == "inurl");  // the URL wins
  }
  {
    EnvPassword env(nullptr);
    CHECK(MustParse("mysql://u@h/d").password.empty());
  }
}

TEST_CASE("ParseUrl: malformed URLs are kInvalid and never echo the password") {
  EnvPassword env(nullptr);
  const std::string pw = "Pw7hunter2";
  const std::vector<std::string> bad = {
      "u:" + pw + "@h:3306/d",                       // no scheme
      "http://u:" + pw + "@h/d",                     // wrong scheme
      "mysql:/u:" + pw + "@h/d",                     // half a scheme
      "mysql://u:" + pw + "@h:3306",                 // no /db
      "mysql://u:" + pw + "@h:3306/",                // empty db
      "mysql://u:" + pw + "@h:3306/?pool=1",         // empty db with options
      "mysql://u:" + pw + "@h:0/d",                  // port 0
      "mysql://u:" + pw + "@h:70000/d",              // port too big
      "mysql://u:" + pw + "@h:abc/d",                // port not a number
      "mysql://u:" + pw + "@h:/d",                   // empty port
      "mysql://u:" + pw + "@h:-1/d",                 // negative port
      "mysql://u:" + pw + "@h:3306/d%zz",            // bad escape in db
      "mysql://u:" + pw + "@h:3306/d%4",             // truncated escape
      "mysql://u:" + pw + "@h:3306/d%00x",           // NUL in db
      "mysql://u%zz:" + pw + "@h/d",                 // bad escape in user
      "mysql://u%00:" + pw + "@h/d",                 // NUL in user
      "mysql://u:" + pw + "%zz@h/d",                 // bad escape in the password
      "mysql://u:" + pw + "%00@h/d",                 // NUL in the password
      "mysql://u:" + pw + "%@h/d",                   // truncated escape in the password
      "mysql://u:" + pw + "@h/d?bogus=1",            // unknown option
      "mysql://u:" + pw + "@h/d?ttl_ms=5",           // a lock option is not a URL option
      "mysql://u:" + pw + "@h/d?pool",               // option without value
      "mysql://u:" + pw + "@h/d?pool=",              // empty value
      "mysql://u:" + pw + "@h/d?pool=0",             // out of range
      "mysql://u:" + pw + "@h/d?pool=x",             // not a number
      "mysql://u:" + pw + "@h/d?connect_timeout=0",  // out of range
      "mysql://u:" + pw + "@h/d?table=a-b",          // bad identifier
      "mysql://u:" + pw + "@h/d?row_table=1x",       // bad identifier
      "mysql://u:" + pw + "@h/d?ssl_mode=maybe",     // bad enum
      "mysql://u:" + pw + "@h/d?pool=%zz",           // bad escape in a value
      "mysql://u:" + pw + "@h/a/b",                  // '/' in db
      "mysql://u:" + pw + "@h/a%60b",                // '`' in db
      "mysql://u:" + pw + "@[]/d",                   // empty host in []
      "mysql://u:" + pw + "@[]:3306/d",              // empty host in []
      "mysql://u:" + pw + "@h/d#frag",               // a fragment
      "mysql://u:" + pw + "@h/d?pool=2#frag",        // a fragment after options
      "mysql://u:x/" + pw + "@h/d",                  // unencoded '/' in the password
      "mysql://u:x?" + pw + "@h/d",                  // unencoded '?' in the password
      "mysql://u:x#" + pw + "@h/d",                  // unencoded '#' in the password
      "mysql://u:" + pw + "/x@h",                    // ... and the port would echo it
      "mysql://u:" + pw + "/d",                      // no '@': the port is the password
  };
  for (const std::string& url : bad) {
    ClientOptions o;
    o.user = "untouched";
    Status s = dlock::ParseUrl(url, &o);
    INFO("url: ", url, " -> ", s.message());
    CHECK(s.code() == Code::kInvalid);
    CHECK(!s.message().empty());
    CHECK(s.message().find(pw) == std::string::npos);
    CHECK(s.message().find("hunter") == std::string::npos);
    CHECK(o.user == "untouched");  // *out untouched on failure

    // The same through Client::Open: it parses first, so no server is needed.
    std::shared_ptr<dlock::Client> c;
    Status cs = dlock::Client::Open(url, Config(), &c);
    CHECK(cs.code() == Code::kInvalid);
    CHECK(cs.message().find(pw) == std::string::npos);
    CHECK(c == nullptr);
  }
}

TEST_CASE("URL: an unencoded '/', '?' or '#' in the password is named as such") {
  for (const char* url : {"mysql://u:a/b@h/d", "mysql://u:a?b@h/d", "mysql://u:a?b@h/d?pool=2",
                          "mysql://u:a#b@h/d", "mysql://u:a/b@h", "mysql://u:a/b/c@h:1/d"}) {
    ClientOptions o;
    Status s = dlock::ParseUrl(url, &o);
    INFO("url: ", url, " -> ", s.message());
    CHECK(s.code() == Code::kInvalid);
    CHECK(s.message().find("password") != std::string::npos);
    CHECK(s.message().find("%2F") != std::string::npos);
  }
  ClientOptions o;
  Status s = dlock::ParseUrl("mysql://a/b@h/d", &o);
  CHECK(s.message().find("user name") != std::string::npos);
  // An '@' in the database or an option value is not mistaken for one.
  CHECK(dlock::ParseUrl("mysql://u@h/d?ssl_ca=/x@y/ca.pem", &o).ok());
  CHECK(o.ssl_ca == "/x@y/ca.pem");
  CHECK(dlock::ParseUrl("mysql://h/d@x", &o).ok());
  CHECK(o.database == "d@x");
  CHECK(dlock::ParseUrl("mysql://u:p%2F%3F%23w@h/d", &o).ok());
  CHECK(o.password == "p/?#w");
  s = dlock::ParseUrl("mysql://u@h/d#x", &o);
  CHECK(s.message().find("'#'") != std::string::npos);
  s = dlock::ParseUrl("mysql://u@[]/d", &o);
  CHECK(s.message().find("empty host") != std::string::npos);
  CHECK(dlock::ParseUrl("mysql://u@[::1]:3307/d", &o).ok());
  CHECK(o.host == "::1");
}

TEST_CASE("URL typos that put the password where messages show it are refused, and say why") {
  EnvPassword env(nullptr);
  const std::string pw = "S3cr3tPw";
  struct Case {
    std::string url, says;
  };
  const std::vector<Case> cases = {
      {"mysql://app:" + pw + "127.0.0.1:3306/db", "host contains ':'"},  // the '@' forgotten
      {"mysql://app:" + pw + ":3306/db", "host contains ':'"},           // the host forgotten
      {"mysql://app:" + pw + "db.example.com:3306/db", "host contains ':'"},
      {"mysql://::1/db", "brackets"},                                    // a bare IPv6 address
      {"mysql:///app:" + pw + "@127.0.0.1/db", "right after mysql://"},
      {"mysql:///app:" + pw + "@127.0.0.1:3306", "right after mysql://"},
      {"mysql:///app:" + pw, "contains ':'"},
      {"mysql://app@" + pw + "@127.0.0.1/db", "user name contains '@'"},
      {"mysql://app@127.0.0.1/db?password:" + pw, "not a URL option"},
      {"mysql://app@127.0.0.1/db?password=" + pw, "not a URL option"},
      {"mysql://app@127.0.0.1/db?pool=2&Passwd=" + pw, "not a URL option"},
      {"mysql://app@127.0.0.1/db?pwd%3D" + pw, "not a URL option"},
      {"mysql://app@127.0.0.1/db?" + pw, "has no '='"},
      {"mysql://app@127.0.0.1/db?x:" + pw + "=1", "not one of dlock's"},
      // A password with a raw '/' or '?' that starts like a port (fuzz_url):
      // the rest of it went into the options (echoed) or the database (Where()).
      {"mysql://app:6/x?pool=" + pw + "@127.0.0.1/db", "%2F, %3F"},
      {"mysql://app:6/" + pw + "?ssl_ca=x@127.0.0.1/db", "%2F, %3F"},
      {"mysql://app:3306?table=" + pw + "@127.0.0.1/db", "%2F, %3F"},
      {"mysql://127.0.0.1:3306/db?ssl_ca=/" + pw + "@x/ca.pem", "written %40"},
  };
  for (const Case& c : cases) {
    ClientOptions o;
    Status s = dlock::ParseUrl(c.url, &o);
    INFO("url: ", c.url, " -> ", s.message());
    CHECK(s.code() == Code::kInvalid);
    CHECK(s.message().find(c.says) != std::string::npos);
    CHECK(dtest::UrlSecretLeak(c.url, pw) == "");
    std::shared_ptr<dlock::Client> client;
    Status cs = dlock::Client::Open(c.url, Config(), &client);
    CHECK(cs.code() == Code::kInvalid);
    CHECK(dtest::SecretPieceIn(cs.message(), pw) == "");
  }
  // What stays accepted: IPv6 in brackets, a raw '@' in the password (the
  // last '@' ends it) or in the database after a host, an option's name.
  ClientOptions o;
  CHECK(dlock::ParseUrl("mysql://u@[::1]:3307/d", &o).ok());
  CHECK(dlock::ParseUrl("mysql://u:p@w@h/d", &o).ok());
  CHECK(o.password == "p@w");
  CHECK(dlock::ParseUrl("mysql://h/d@x", &o).ok());
  CHECK(dlock::ParseUrl("mysql:///d%3Ax", &o).ok());
  CHECK(o.database == "d:x");
  Status s = dlock::ParseUrl("mysql://h/d?pool", &o);
  CHECK(s.message().find("'pool' has no value") != std::string::npos);
  s = dlock::ParseUrl("mysql://h/d?pol=2", &o);
  CHECK(s.message().find("unknown URL option 'pol'") != std::string::npos);
  // The checker itself sees a leak where there is one.
  CHECK(dtest::UrlSecretLeak("mysql://" + pw + "@h/d", pw).find("user") != std::string::npos);
  CHECK(dtest::UrlSecretLeak("mysql://u@h/" + pw, pw).find("database") != std::string::npos);
  CHECK(dtest::SecretPieceIn("x" + pw.substr(2, 5) + "y", pw) == pw.substr(2, 5));
}

namespace {

// A URL with a random password and one or two of the typos people make
// around it; the password is at the start of one of the typos' results.
struct TypoUrl {
  std::string url, secret, typos;
};

TypoUrl MakeTypoUrl(std::mt19937& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  static const std::string kFirst = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  static const std::string kRest = kFirst + "0123456789!$*-_.~+,;=";
  std::string secret(1, kFirst[pick(kFirst.size())]);
  for (size_t n = 7 + pick(10); secret.size() < n;) secret.push_back(kRest[pick(kRest.size())]);

  static const char* const kUsers[] = {"app", "root", "svc_lock", "u"};
  static const char* const kHosts[] = {"127.0.0.1", "db.example.com", "localhost", "[::1]",
                                       "[2001:db8::5]", "h"};
  static const char* const kPorts[] = {"", ":3306", ":13306"};
  static const char* const kDbs[] = {"/app", "/test", "/my_db"};
  static const char* const kQueries[] = {"", "?pool=4", "?ssl_mode=require&pool=2"};
  std::string user = kUsers[pick(4)], host = kHosts[pick(6)], port = kPorts[pick(3)];
  std::string db = kDbs[pick(3)], query = kQueries[pick(3)], scheme = "mysql://";
  std::string pw = secret, typos;

  // An unencoded special byte inside the password. (Not '@' together with
  // a forgotten '@' below: "pw@rest" + "host" gives the host "resthost", a
  // well-formed name no parser can tell from a real one.)
  bool raw_at = false;
  if (pick(3) == 0) {
    static const char kSpecial[] = "/?#%@: ";
    char c = kSpecial[pick(sizeof kSpecial - 1)];
    raw_at = c == '@';
    pw.insert(1 + pick(pw.size() - 1), 1, c);
    typos += std::string("raw '") + c + "' ";
  }
  std::string sep = ":", at = "@";
  switch (pick(11)) {
    case 0: typos += "none"; break;
    case 1:
      if (!raw_at) at = "", typos += "no '@'";
      break;
    case 2: host = "", typos += "no host"; break;
    case 3:
      if (!raw_at) host = "", at = "", typos += "no host, no '@'";
      break;
    case 4: scheme = "mysql:///", typos += "'/' before user"; break;
    case 5: sep = "@", typos += "'@' for ':'"; break;
    case 6: at = "@@", typos += "'@@'"; break;
    case 7: {
      static const char* const kQ[] = {"?password:", "?password=", "?pass=", "?pwd:", "?Password=",
                                       "?pw%3D", "?pool=2&password=", "?"};
      size_t q = pick(8);
      return {scheme + user + "@" + host + port + db + kQ[q] + pw, secret,
              typos + "password in the query " + kQ[q]};
    }
    case 8: {
      static const char* const kS[] = {"mysql:/", "mysql:", "mysq://", "http://", "mysql:////",
                                       "mysql:\\\\"};
      scheme = kS[pick(6)], typos += "scheme " + scheme;
      break;
    }
    case 9: db = db.substr(1), typos += "no '/' before the database"; break;
    case 10: query = "", db = "", typos += "no database"; break;
  }
  return {scheme + user + sep + pw + at + host + port + db + query, secret, typos};
}

}  // namespace

TEST_CASE("URL: 20,000 typo'd URLs never show their password") {
  EnvPassword env(nullptr);
  std::mt19937 rng(20240524u);
  int refused = 0, leaks = 0;
  for (int i = 0; i < 20000; ++i) {
    TypoUrl t = MakeTypoUrl(rng);
    std::string leak = dtest::UrlSecretLeak(t.url, t.secret);
    ClientOptions o;
    if (!dlock::ParseUrl(t.url, &o).ok()) ++refused;
    if (!leak.empty() && ++leaks <= 20) {
      INFO("url: ", t.url, " (", t.typos, ")");
      CHECK_MESSAGE(leak.empty(), leak);
    }
  }
  CHECK(leaks == 0);
  MESSAGE(refused, " of 20000 refused, ", leaks, " leaked");
  CHECK(refused > 10000);  // most are typos the parser must catch
}

TEST_CASE("Messages quote input with control bytes escaped") {
  Config cfg;
  Status s = cfg.Set("pool", "5\n");
  CHECK(s.code() == Code::kInvalid);
  CHECK(s.message().find("'5\\x0a'") != std::string::npos);
  ClientOptions o;
  o.host = "h\nx";
  o.database = "d\x1b";
  CHECK(o.Where() == "h\\x0ax:3306/d\\x1b");
  CHECK(dlock::PrintableText("near 'a\nb'") == "near 'a\\x0ab'");
}

TEST_CASE("ValidateIdentifier") {
  for (const std::string& good : std::vector<std::string>{"a", "_", "_x", "distributed_lock",
                                                         "Lock_Table9", "A1_b2", std::string(58, 'x')}) {
    INFO("name: ", good);
    CHECK(dlock::ValidateIdentifier(good, "table").ok());
  }
  for (const std::string& bad : std::vector<std::string>{
           std::string(), "a-b", "1abc", "9", "a`b", "`", "a b", "a.b", "a;b", "t\xc3\xa9",
           std::string("a\0b", 3), std::string(59, 'x'), std::string(64, 'y')}) {
    INFO("name: ", dlock::QuoteKey(bad));
    Status s = dlock::ValidateIdentifier(bad, "row_table");
    CHECK(s.code() == Code::kInvalid);
    CHECK(s.message().find("row_table") != std::string::npos);
  }
}

TEST_CASE("ValidateKey") {
  CHECK(dlock::ValidateKey("k").ok());
  CHECK(dlock::ValidateKey(std::string(512, 'k')).ok());
  CHECK(dlock::ValidateKey(std::string(512, '\xff')).ok());
  CHECK(dlock::ValidateKey("order:1001").ok());
  CHECK(dlock::ValidateKey("\x01\x02\xfe binary ' \" ` \\ %").ok());
  CHECK(dlock::ValidateKey(std::string(1, '\x01')).ok());

  Status s = dlock::ValidateKey("");
  CHECK(s.code() == Code::kInvalid);
  s = dlock::ValidateKey(std::string(513, 'k'));
  CHECK(s.code() == Code::kInvalid);
  CHECK(s.message().find("513") != std::string::npos);
  s = dlock::ValidateKey(std::string("ab\0cd", 5));
  CHECK(s.code() == Code::kInvalid);
  CHECK(s.message().find("NUL") != std::string::npos);
  CHECK(dlock::ValidateKey(std::string("\0", 1)).code() == Code::kInvalid);
  CHECK(dlock::ValidateKey(std::string("abc\0", 4)).code() == Code::kInvalid);
  CHECK(dlock::ValidateKey(std::string(100000, 'k')).code() == Code::kInvalid);
}

TEST_CASE("QuoteKey escapes control bytes and quotes, and is bounded") {
  CHECK(dlock::QuoteKey("abc") == "abc");
  CHECK(dlock::QuoteKey(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(dlock::QuoteKey("a'b\\c\n") == "a\\x27b\\x5cc\\x0a");
  std::string q = dlock::QuoteKey(std::string(1000, 'z'));
  CHECK(q.size() < 100);
  CHECK(q.substr(q.size() - 3) == "...");
}

TEST_CASE("ParseInt ranges") {
  int64_t v = -42;
  CHECK(dlock::ParseInt("0", 0, 10, "x", &v).ok());
  CHECK(v == 0);
  CHECK(dlock::ParseInt("10", 0, 10, "x", &v).ok());
  CHECK(v == 10);
  CHECK(dlock::ParseInt("+7", 0, 10, "x", &v).ok());
  CHECK(v == 7);
  CHECK(dlock::ParseInt("-5", -5, 5, "x", &v).ok());
  CHECK(v == -5);
  CHECK(dlock::ParseInt("007", 0, 10, "x", &v).ok());
  CHECK(v == 7);
  CHECK(dlock::ParseInt("9223372036854775807", 0, INT64_MAX, "x", &v).ok());
  CHECK(v == INT64_MAX);
  CHECK(dlock::ParseInt("-9223372036854775808", INT64_MIN, 0, "x", &v).ok());
  CHECK(v == INT64_MIN);

  v = 123;
  for (const std::string& bad : std::vector<std::string>{"11", "-1", "", "-", "+", " 5", "5 ", "5x", "0x5", "1e3", "1.0",
                                "++1", "--1", "9223372036854775808", "-9223372036854775809",
                                "99999999999999999999", "000000000000000000001"}) {
    INFO("input: '", bad, "'");
    Status s = dlock::ParseInt(bad, 0, 10, "the_option", &v);
    CHECK(s.code() == Code::kInvalid);
    CHECK(s.message().find("the_option") != std::string::npos);
    CHECK(v == 123);  // untouched on failure
  }
  // The message says what is allowed.
  Status s = dlock::ParseInt("11", 1, 10, "pool", &v);
  CHECK(s.message().find("1..10") != std::string::npos);
}

TEST_CASE("Config::Set validates keys and values at once") {
  Config cfg;
  // Good values are stored.
  CHECK(cfg.Set("mode", "row").ok());
  CHECK(cfg.Set("mode", "lease").ok());
  CHECK(cfg.Set("ttl_ms", "1").ok());
  CHECK(cfg.Set("ttl_ms", std::to_string(dlock::kMaxTtlMs)).ok());
  CHECK(cfg.Set("pool", "1").ok());
  CHECK(cfg.Set("pool", "1024").ok());
  CHECK(cfg.Set("connect_timeout", "1").ok());
  CHECK(cfg.Set("read_timeout", "86400").ok());
  CHECK(cfg.Set("table", "t_1").ok());
  CHECK(cfg.Set("row_table", "_r").ok());
  CHECK(cfg.Set("ssl_mode", "verify").ok());
  CHECK(cfg.Set("socket", "/tmp/s.sock").ok());
  CHECK(cfg.values().at("mode") == "lease");
  CHECK(cfg.values().at("ttl_ms") == std::to_string(dlock::kMaxTtlMs));
  CHECK(cfg.values().at("pool") == "1024");

  struct Bad {
    const char* key;
    const char* value;
  };
  const Bad bad[] = {
      {"bogus", "1"},           {"", "1"},                 {"MODE", "row"},
      {"mode", "ROW"},          {"mode", ""},              {"mode", "exclusive"},
      {"ttl_ms", "-1"},         {"ttl_ms", "0"},           {"ttl_ms", "2592000001"},
      {"ttl_ms", "abc"},        {"ttl_ms", "1.5"},         {"ttl_ms", ""},
      {"pool", "0"},            {"pool", "1025"},          {"pool", "-3"},
      {"connect_timeout", "0"}, {"connect_timeout", "3601"}, {"read_timeout", "0"},
      {"table", "a-b"},         {"table", ""},             {"row_table", "1abc"},
      {"ssl_mode", "on"},       {"ssl_mode", ""},
  };
  for (const Bad& b : bad) {
    INFO("key '", std::string(b.key), "' value '", std::string(b.value), "'");
    Status s = cfg.Set(b.key, b.value);
    CHECK(s.code() == Code::kInvalid);
    CHECK(!s.message().empty());
  }
  // Rejected values never replace stored ones; unknown keys are never stored.
  CHECK(cfg.values().at("mode") == "lease");
  CHECK(cfg.values().at("ttl_ms") == std::to_string(dlock::kMaxTtlMs));
  CHECK(cfg.values().at("pool") == "1024");
  CHECK(cfg.values().at("table") == "t_1");
  CHECK(cfg.values().count("bogus") == 0);
  CHECK(cfg.values().count("MODE") == 0);
}

TEST_CASE("ApplyClientOption / ApplyLockOption and key classification") {
  CHECK(dlock::IsClientKey("pool"));
  CHECK(dlock::IsClientKey("table"));
  CHECK(!dlock::IsClientKey("mode"));
  CHECK(dlock::IsLockKey("mode"));
  CHECK(dlock::IsLockKey("ttl_ms"));
  CHECK(!dlock::IsLockKey("pool"));

  dlock::LockOptions lo;
  CHECK(lo.mode == dlock::LockMode::kLease);
  CHECK(lo.ttl_ms == 30000);
  CHECK(dlock::ApplyLockOption("mode", "row", &lo).ok());
  CHECK(lo.mode == dlock::LockMode::kRow);
  CHECK(dlock::ApplyLockOption("ttl_ms", "1500", &lo).ok());
  CHECK(lo.ttl_ms == 1500);
  CHECK(dlock::ApplyLockOption("pool", "2", &lo).code() == Code::kInvalid);
  CHECK(dlock::ApplyLockOption("ttl_ms", "-1", &lo).code() == Code::kInvalid);
  CHECK(lo.ttl_ms == 1500);

  ClientOptions co;
  CHECK(dlock::ApplyClientOption("mode", "row", &co).code() == Code::kInvalid);
  CHECK(dlock::ApplyClientOption("connect_timeout", "3", &co).ok());
  CHECK(co.connect_timeout_s == 3);
}

TEST_CASE("Code names are stable") {
  CHECK(std::string(dlock::CodeName(0)) == "DLOCK_OK");
  CHECK(std::string(dlock::CodeName(1)) == "DLOCK_BUSY");
  CHECK(std::string(dlock::CodeName(-1)) == "DLOCK_E_INVALID");
  CHECK(std::string(dlock::CodeName(-4)) == "DLOCK_E_READONLY");
  CHECK(std::string(dlock::CodeName(-10)) == "DLOCK_E_UNKNOWN");
  CHECK(std::string(dlock::CodeName(12345)) == "DLOCK_UNKNOWN_CODE");
  CHECK(static_cast<int>(Code::kLost) == -3);
}

TEST_CASE("Version and VersionNumber come from the one CMake VERSION") {
  int major = -1, minor = -1, patch = -1;
  char tail = 0;
  REQUIRE(std::sscanf(dlock::Version(), "%d.%d.%d%c", &major, &minor, &patch, &tail) == 3);
  CHECK(dlock::VersionNumber() == major * 10000 + minor * 100 + patch);
  CHECK(dlock::VersionNumber() >= 10300);  // dlock_abort, dlock_mode, negative waits
}
