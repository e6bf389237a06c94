// core_unit: the application's own settings: go-sql-driver DSNs and JDBC URLs
// read into the same options as mysql:// URLs. No database.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <random>
#include <string>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/core.hpp"
#include "options.h"
#include "url_secret.h"

using dlock::ClientOptions;
using dlock::Code;
using dlock::SslMode;
using dlock::Status;

namespace {

// DLOCK_PASSWORD unset for a scope (and restored).
class NoEnvPassword {
 public:
  NoEnvPassword() {
    const char* old = std::getenv("DLOCK_PASSWORD");
    if ((had_ = old != nullptr)) old_ = old;
    unsetenv("DLOCK_PASSWORD");
  }
  ~NoEnvPassword() {
    if (had_) setenv("DLOCK_PASSWORD", old_.c_str(), 1);
  }

 private:
  bool had_ = false;
  std::string old_;
};

ClientOptions Parsed(const std::string& url) {
  ClientOptions o;
  Status s = dlock::ParseUrl(url, &o);
  INFO("url: ", url);
  REQUIRE_MESSAGE(s.ok(), s.message());
  return o;
}

// The error for url, which must be refused.
std::string Refused(const std::string& url) {
  ClientOptions o;
  o.user = "untouched";
  Status s = dlock::ParseUrl(url, &o);
  INFO("url: ", url, " -> ", s.message());
  CHECK(s.code() == Code::kInvalid);
  CHECK(!s.message().empty());
  CHECK(o.user == "untouched");
  return s.message();
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("DSN: user, password, address, database") {
  NoEnvPassword env;
  ClientOptions o = Parsed("alice:s3cret@tcp(db.example.com:3307)/app");
  CHECK(o.user == "alice");
  CHECK(o.password == "s3cret");
  CHECK(o.host == "db.example.com");
  CHECK(o.port == 3307u);
  CHECK(o.database == "app");
  CHECK(o.socket.empty());
  CHECK(o.Where() == "db.example.com:3307/app");
  CHECK(o.pool == 8);  // dlock's defaults for what the DSN does not say
  CHECK(o.connect_timeout_s == 5);
  CHECK(o.ssl_mode == SslMode::kDisable);

  o = Parsed("bob@tcp(10.0.0.5)/db1");  // no port: 3306
  CHECK(o.user == "bob");
  CHECK(o.password.empty());
  CHECK(o.host == "10.0.0.5");
  CHECK(o.port == 3306u);
  for (const char* dsn : {"@/db", "/db", "tcp/db", "@tcp()/db", "tcp()/db"}) {
    o = Parsed(dsn);  // go-sql-driver's defaults: tcp to 127.0.0.1:3306
    CHECK(o.user.empty());
    CHECK(o.host == "127.0.0.1");
    CHECK(o.port == 3306u);
    CHECK(o.database == "db");
  }
  o = Parsed("u@tcp([::1]:3307)/d");
  CHECK(o.host == "::1");
  CHECK(o.port == 3307u);
  o = Parsed("u@tcp([2001:db8::5])/d");
  CHECK(o.host == "2001:db8::5");
  CHECK(o.port == 3306u);
  o = Parsed("u@tcp(::1)/d");  // bare, as go-sql-driver reads it
  CHECK(o.host == "::1");
  CHECK(o.port == 3306u);
  o = Parsed("u@tcp(localhost:3307)/d");  // TCP, not Connector/C's "localhost" socket
  CHECK(o.host == "127.0.0.1");
  CHECK(o.port == 3307u);
  CHECK(Parsed("jdbc:mysql://localhost/d").host == "127.0.0.1");
  CHECK(Parsed("jdbc:mysql://localhost:3307/d").host == "127.0.0.1");
  CHECK(Parsed("mysql://localhost/d").host == "localhost");  // no port: Connector/C's socket
  CHECK(Parsed("mysql://localhost:3307/d").host == "127.0.0.1");  // a port: TCP, as above
  o = Parsed("u@tcp4(h:1)/d");
  CHECK(o.host == "h");
  CHECK(o.port == 1u);

  o = Parsed("app:pw@unix(/run/mysqld/mysqld.sock)/app");
  CHECK(o.socket == "/run/mysqld/mysqld.sock");
  CHECK(o.Where() == "/run/mysqld/mysqld.sock/app");
  CHECK(o.password == "pw");
  CHECK(Parsed("app@unix/app").socket == "/tmp/mysql.sock");  // go-sql-driver's default

  // The password is taken as it is, up to the last '@' before the last '/':
  // ':', '@', '/', '?', '#', '%' and '(' need no escaping (and get none).
  o = Parsed("u:p@ss:w/o?r#d%41(x)@tcp(h)/d");
  CHECK(o.user == "u");
  CHECK(o.password == "p@ss:w/o?r#d%41(x)");
  CHECK(o.host == "h");
  // The user name likewise; the database is path-unescaped.
  o = Parsed("us%40er:pw@tcp(h)/my%2Ddb%3Ax");
  CHECK(o.user == "us%40er");
  CHECK(o.database == "my-db:x");
  CHECK(Parsed("u:@tcp(h)/d").password.empty());
}

TEST_CASE("DSN: go-sql-driver's parameters map onto dlock's options or are ignored") {
  NoEnvPassword env;
  ClientOptions o = Parsed("u@tcp(h)/d?timeout=7s&readTimeout=1m30s");
  CHECK(o.connect_timeout_s == 7);
  CHECK(o.read_timeout_s == 90);
  // Whole seconds, rounded up; 0 (Go's "none") keeps dlock's default.
  CHECK(Parsed("u@tcp(h)/d?timeout=500ms").connect_timeout_s == 1);
  CHECK(Parsed("u@tcp(h)/d?timeout=1.2s").connect_timeout_s == 2);
  CHECK(Parsed("u@tcp(h)/d?timeout=2000ms").connect_timeout_s == 2);
  CHECK(Parsed("u@tcp(h)/d?timeout=1h").connect_timeout_s == 3600);
  CHECK(Parsed("u@tcp(h)/d?readTimeout=1h0m1s").read_timeout_s == 3601);
  CHECK(Parsed("u@tcp(h)/d?readTimeout=1500000us").read_timeout_s == 2);
  CHECK(Parsed("u@tcp(h)/d?readTimeout=1000000000ns").read_timeout_s == 1);
  CHECK(Parsed("u@tcp(h)/d?timeout=0").connect_timeout_s == 5);
  CHECK(Parsed("u@tcp(h)/d?timeout=0s").connect_timeout_s == 5);

  CHECK(Parsed("u@tcp(h)/d?tls=true").ssl_mode == SslMode::kVerify);
  CHECK(Parsed("u@tcp(h)/d?tls=1").ssl_mode == SslMode::kVerify);
  CHECK(Parsed("u@tcp(h)/d?tls=skip-verify").ssl_mode == SslMode::kRequire);
  CHECK(Parsed("u@tcp(h)/d?tls=preferred").ssl_mode == SslMode::kRequire);
  CHECK(Parsed("u@tcp(h)/d?tls=false").ssl_mode == SslMode::kDisable);

  // What shapes only the application's results is accepted and ignored.
  o = Parsed("u@tcp(h)/d?parseTime=true&loc=Local&charset=utf8mb4,utf8&collation=utf8mb4_bin"
             "&writeTimeout=3s&interpolateParams=true&multiStatements=true&maxAllowedPacket=0"
             "&time_zone=%27%2B00%3A00%27&allowNativePasswords=true&clientFoundRows=true");
  CHECK(o.connect_timeout_s == 5);
  CHECK(o.read_timeout_s == 30);

  // dlock's own client options by their names, values query-unescaped; an
  // explicit one wins over a mapped parameter, in either order.
  o = Parsed("u@tcp(h)/d?pool=3&table=jobs&ssl_ca=%2Fetc%2Fca+1.pem&ssl_mode=require");
  CHECK(o.pool == 3);
  CHECK(o.table == "jobs");
  CHECK(o.ssl_ca == "/etc/ca 1.pem");
  CHECK(o.ssl_mode == SslMode::kRequire);
  CHECK(Parsed("u@tcp(h)/d?connect_timeout=2&timeout=9s").connect_timeout_s == 2);
  CHECK(Parsed("u@tcp(h)/d?timeout=9s&connect_timeout=2").connect_timeout_s == 2);
  CHECK(Parsed("u@tcp(h)/d?ssl_mode=disable&tls=true").ssl_mode == SslMode::kDisable);
}

TEST_CASE("DSN: errors name every unknown parameter and never the password") {
  NoEnvPassword env;
  std::string m = Refused("u:Pw7hunter2@tcp(h)/d?parseTime=true&fooBar=1&zap=2&pool=2");
  CHECK(Has(m, "'fooBar', 'zap'"));
  CHECK(Has(m, "unknown parameters"));
  m = Refused("u:x@tcp(h)/d?sql_safe_updates=1");
  CHECK(Has(m, "'sql_safe_updates'"));
  // A name with a digit is counted, not shown: it may be a password.
  m = Refused("u:x@tcp(h)/d?Hunter2x=1&extra=2");
  CHECK(Has(m, "'extra' and 1 more, not shown"));
  CHECK(!Has(m, "Hunter"));
  CHECK(Has(Refused("u:x@tcp(h)/d?ttl_ms=5"), "'ttl_ms'"));  // a lock option is no URL option
  // With no password in the URL, a name may be the password in the wrong
  // place: only a near miss of a known name is shown (with the name).
  m = Refused("u@tcp(h)/d?parseTim=true&readtimeout=1s&Hunter=2");
  CHECK(Has(m, "'parseTim' (parseTime?), 'readtimeout' (readTimeout?) and 1 more, not shown"));
  CHECK(!Has(m, "Hunter"));
  CHECK(Has(Refused("u@tcp(h)/d?pol=2"), "'pol' (pool?)"));
  CHECK(Has(Refused("u@tcp(h)/d?timeout=5"), "Go duration"));
  CHECK(Has(Refused("u@tcp(h)/d?timeout=-5s"), "Go duration"));
  CHECK(Has(Refused("u@tcp(h)/d?timeout=2h"), "connect_timeout"));  // over 3600 s
  CHECK(Has(Refused("u@tcp(h)/d?tls=custom"), "RegisterTLSConfig"));
  CHECK(Has(Refused("u@tcp(h)/d?pool=0"), "pool"));
  CHECK(Has(Refused("u@tcp(h)/d?parseTime"), "'parseTime' has no value"));
  CHECK(Has(Refused("u@tcp(h)/d?parseTim"), "has no '='"));

  const std::string pw = "Pw7hunter2";
  const std::vector<std::string> bad = {
      "u:" + pw + "@h:3306/d",                     // no tcp(...)
      "u:" + pw + "@tcp(h:3306/d",                 // unclosed '('
      "u:" + pw + "@tcp(h:0)/d",                   // port 0
      "u:" + pw + "@tcp(h:99999)/d",               // port too big
      "u:" + pw + "@tcp(h:x)/d",                   // port not a number
      "u:" + pw + "@tcp(h:)/d",                    // empty port
      "u:" + pw + "@tcp([::1)/d",                  // unclosed '['
      "u:" + pw + "@tcp([::1]x)/d",                // junk after ']'
      "u:" + pw + "@tcp(h)",                       // no '/'
      "u:" + pw + "@tcp(h)/",                      // empty database
      "u:" + pw + "@tcp(h)/?pool=1",               // empty database with parameters
      "u:" + pw + "@tcp(h)/d%zz",                  // bad escape in the database
      "u:" + pw + "@tcp(h)/a%2Fb",                 // '/' in the database
      "u:" + pw + "@udp(h)/d",                     // no such protocol
      "u:" + pw + "tcp(h)/d",                      // the '@' forgotten
      "u:" + pw + "/d",                            // the '@' and the address forgotten
      "u@" + pw + "@tcp(h)/d",                     // '@' typed for ':'
      "u:" + pw + "@tcp(h)/d?ssl_ca=/etc/ca.pem",  // a raw '/' in a value
      "u:" + pw + "@tcp(h)/d?loc=Europe/Paris",    // ... without parentheses after it
      "u@tcp(h)/d?password=" + pw,                 // the password as a parameter
      "u@tcp(h)/d?pwd:" + pw,
      "u@tcp(h)/d?" + pw,                          // a bare password after '?'
      "u@tcp(h)/d?x=1&" + pw + "=1",               // one typed as a name
      "u:" + pw + "@tcp(h)/d?pool=%zz",            // bad escape in a value
      "u:" + pw + "@tcp(h)/d?bogus=1",
      std::string("u:") + pw + std::string("@tcp(h)/d\0x", 11),  // a NUL byte
  };
  for (const std::string& dsn : bad) {
    const std::string msg = Refused(dsn);
    INFO("dsn: ", dsn, " -> ", msg);
    CHECK(dtest::SecretPieceIn(msg, pw) == "");
    std::shared_ptr<dlock::Client> c;
    Status cs = dlock::Client::Open(dsn, dlock::Config(), &c);
    CHECK(cs.code() == Code::kInvalid);
    CHECK(dtest::SecretPieceIn(cs.message(), pw) == "");
  }
  CHECK(Has(Refused("u:x@tcp(h)/d?ssl_ca=/etc/ca.pem"), "%2F"));
  CHECK(Has(Refused("u@x@tcp(h)/d"), "user name contains '@'"));
  CHECK(Has(Refused("u:x@h:3306/d"), "tcp(host:port)"));
  CHECK(Has(Refused("u@tcp(h)/d?password=x"), "not a parameter"));
  // A URL with a scheme is not a DSN: the message names the forms.
  CHECK(Has(Refused("http://u:x@h/d"), "go-sql-driver DSN"));
  CHECK(Has(Refused("mysql:/u@h/d"), "mysql://"));
}

TEST_CASE("JDBC: jdbc:mysql:// and jdbc:mariadb:// URLs") {
  NoEnvPassword env;
  ClientOptions o = Parsed("jdbc:mysql://db.example.com:3307/app?user=alice&password=s%40c%26r+t");
  CHECK(o.user == "alice");
  CHECK(o.password == "s@c&r t");  // form-decoded: '+' is a space
  CHECK(o.host == "db.example.com");
  CHECK(o.port == 3307u);
  CHECK(o.database == "app");
  o = Parsed("jdbc:mariadb://alice:p%2Bw+x@[::1]/app");
  CHECK(o.user == "alice");
  CHECK(o.password == "p+w x");
  CHECK(o.host == "::1");
  CHECK(o.port == 3306u);
  CHECK(Parsed("JDBC:mysql://h/d").host == "h");
  CHECK(Parsed("jdbc:mysql://h/d?user=a%40b").user == "a@b");

  o = Parsed("jdbc:mysql://h/d?connectTimeout=2500&socketTimeout=10000");
  CHECK(o.connect_timeout_s == 3);  // milliseconds, rounded up to seconds
  CHECK(o.read_timeout_s == 10);
  o = Parsed("jdbc:mysql://h/d?connectTimeout=0&socketTimeout=0");  // 0 = none: dlock's default
  CHECK(o.connect_timeout_s == 5);
  CHECK(o.read_timeout_s == 30);

  const std::pair<const char*, SslMode> tls[] = {
      {"jdbc:mysql://h/d", SslMode::kDisable},
      {"jdbc:mysql://h/d?sslMode=DISABLED", SslMode::kDisable},
      {"jdbc:mysql://h/d?sslMode=PREFERRED", SslMode::kRequire},
      {"jdbc:mysql://h/d?sslMode=REQUIRED", SslMode::kRequire},
      {"jdbc:mysql://h/d?sslMode=VERIFY_CA", SslMode::kVerify},
      {"jdbc:mysql://h/d?sslMode=VERIFY_IDENTITY", SslMode::kVerify},
      {"jdbc:mariadb://h/d?sslMode=trust", SslMode::kRequire},
      {"jdbc:mariadb://h/d?sslMode=verify-full", SslMode::kVerify},
      {"jdbc:mariadb://h/d?sslmode=disable", SslMode::kDisable},
      {"jdbc:mysql://h/d?useSSL=true", SslMode::kRequire},
      {"jdbc:mysql://h/d?useSSL=true&verifyServerCertificate=true", SslMode::kVerify},
      {"jdbc:mysql://h/d?requireSSL=true", SslMode::kRequire},
      {"jdbc:mysql://h/d?useSSL=false&requireSSL=true", SslMode::kDisable},
      {"jdbc:mariadb://h/d?useSsl=true", SslMode::kVerify},
      {"jdbc:mariadb://h/d?useSSL=true&trustServerCertificate=true", SslMode::kRequire},
      {"jdbc:mysql://h/d?sslMode=REQUIRED&useSSL=false", SslMode::kRequire},  // sslMode wins
      {"jdbc:mysql://h/d?sslMode=REQUIRED&ssl_mode=verify", SslMode::kVerify},  // dlock's wins
  };
  for (const auto& t : tls) {
    INFO("url: ", t.first);
    CHECK(Parsed(t.first).ssl_mode == t.second);
  }
  o = Parsed("jdbc:mariadb://h/d?serverSslCert=/etc/ca.pem&localSocket=/run/m.sock");
  CHECK(o.ssl_ca == "/etc/ca.pem");
  CHECK(o.socket == "/run/m.sock");
  // Ignored: the application's own character set, time zone, statements.
  o = Parsed("jdbc:mysql://h/d?useUnicode=true&characterEncoding=UTF-8&serverTimezone=UTC"
             "&autoReconnect=true&rewriteBatchedStatements=true&CACHEPREPSTMTS=true");
  CHECK(o.pool == 8);
  // dlock's own options; MariaDB Connector/J's pool=true is its own.
  o = Parsed("jdbc:mysql://h/d?pool=4&table=jobs&connect_timeout=9&connectTimeout=1000");
  CHECK(o.pool == 4);
  CHECK(o.table == "jobs");
  CHECK(o.connect_timeout_s == 9);
  CHECK(Parsed("jdbc:mariadb://h/d?pool=true").pool == 8);
  CHECK(Parsed("jdbc:mariadb://h/d?pool=2").pool == 2);
}

TEST_CASE("JDBC: errors name every unknown parameter and never the password") {
  NoEnvPassword env;
  const std::string pw = "Pw7hunter2";
  std::string m = Refused("jdbc:mysql://h/d?user=u&password=" + pw + "&fooBar=1&useSSL=true&zap");
  CHECK(Has(m, "has no '='"));
  CHECK(Has(Refused("jdbc:mysql://h/d?useSSL"), "'useSSL' has no value"));
  CHECK(Has(Refused("jdbc:mysql://h/d?usessl=true&sslMod=x"), "'sslMod' (sslMode?)"));
  m = Refused("jdbc:mysql://h/d?user=u&password=" + pw + "&useSSL=true&fooBar=1&zap=2");
  CHECK(Has(m, "'fooBar', 'zap'"));
  CHECK(dtest::SecretPieceIn(m, pw) == "");
  // A raw '&' in the password: the tail is not shown.
  m = Refused("jdbc:mysql://h/d?user=u&password=ab&Cdefghij=1");
  CHECK(Has(m, "1 unknown parameter, not shown"));
  CHECK(!Has(m, "Cdefghij"));
  CHECK(Has(Refused("jdbc:mysql://h1,h2/d"), "several hosts"));
  CHECK(Has(Refused("jdbc:mysql:loadbalance://h1/d"), "one-host"));
  CHECK(Has(Refused("jdbc:mariadb:replication://h1/d"), "one-host"));
  CHECK(Has(Refused("jdbc:mysql+srv://h/d"), "one-host"));
  CHECK(Has(Refused("jdbc:postgresql://h/d"), "jdbc:mysql://"));
  CHECK(Has(Refused("jdbc:mysql://address=(host=h)(port=1)/d"), "address="));
  CHECK(Has(Refused("jdbc:mysql://u@h/d?user=v"), "user is given twice"));
  CHECK(Has(Refused("jdbc:mysql://h/d?sslMode=SOMETIMES"), "VERIFY_IDENTITY"));
  CHECK(Has(Refused("jdbc:mysql://h/d?useSSL=maybe"), "true or false"));
  CHECK(Has(Refused("jdbc:mysql://h/d?connectTimeout=5s"), "milliseconds"));
  CHECK(Has(Refused("jdbc:mysql://h/d?trustCertificateKeyStoreUrl=file:/k.jks"), "ssl_ca"));
  CHECK(Has(Refused("jdbc:mysql://h/d?socketTimeout=100000000"), "read_timeout"));
  CHECK(Has(Refused("jdbc:mysql://h/d?ttl_ms=1&password=x"), "'ttl_ms'"));

  const std::vector<std::string> bad = {
      "jdbc:mysql://u:" + pw + "@h/d?password=x",       // the password twice
      "jdbc:mysql://h/d?password=" + pw + "&password=x",
      "jdbc:mysql://h/d?password1=" + pw,               // multi-factor
      "jdbc:mysql://h/d?passwordX" + pw,                // '=' forgotten
      "jdbc:mysql://h/d?pwd=" + pw,
      "jdbc:mysql://h/d?password=" + pw + "%zz",        // bad escape
      "jdbc:mysql://h/d?password=" + pw + "#x",         // '#'
      "jdbc:mysql://h/d?password=a#" + pw,
      "jdbc:mysql://h/d?user=u&" + pw,                  // a bare password
      "jdbc:mysql://h/d?password=a&" + pw + "=1",       // a raw '&' in it
      "jdbc:mysql://u:" + pw + "@h:0/d",                // port
      "jdbc:mysql://u:" + pw + "@h",                    // no database
      "jdbc:mysql://u:" + pw + "@h/",                   // empty database
      "jdbc:mysql://u:" + pw + "@h1,h2/d",
      "jdbc:mysql://u:a/" + pw + "@h/d",                // a raw '/' in the password
      "jdbc:mysql://u:" + pw + "h:3306/d",              // the '@' forgotten
      "jdbc:mysql://u@" + pw + "@h/d",                  // '@' for ':'
      "jdbc:mysql:/u:" + pw + "@h/d",                   // half a scheme
      "jdbc:mysql://u:" + pw + "@h/d?bogus=1",
  };
  for (const std::string& url : bad) {
    m = Refused(url);
    INFO("url: ", url, " -> ", m);
    CHECK(dtest::SecretPieceIn(m, pw) == "");
  }
}

TEST_CASE("UrlWithoutPassword: DSNs and JDBC URLs keep their form") {
  NoEnvPassword env;
  std::string out;
  REQUIRE(dlock::UrlWithoutPassword("app:s3c/r@t@tcp(db1:3306)/app?pool=2", &out).ok());
  CHECK(out == "app@tcp(db1:3306)/app?pool=2");
  REQUIRE(dlock::UrlWithoutPassword("app@tcp(db1)/app", &out).ok());
  CHECK(out == "app@tcp(db1)/app");
  REQUIRE(dlock::UrlWithoutPassword("/app", &out).ok());
  CHECK(out == "/app");
  REQUIRE(dlock::UrlWithoutPassword(
              "jdbc:mysql://db1/app?user=app&password=s3cret&Password=x%26y&connectTimeout=9", &out)
              .code() == Code::kInvalid);  // the password twice does not parse
  REQUIRE(dlock::UrlWithoutPassword("jdbc:mysql://db1/app?user=app&password=s3cret&connectTimeout=9",
                                    &out).ok());
  CHECK(out == "jdbc:mysql://db1/app?user=app&connectTimeout=9");
  REQUIRE(dlock::UrlWithoutPassword("jdbc:mariadb://app:s3cret@db1/app?pass%77ord=x", &out).code() ==
          Code::kInvalid);
  REQUIRE(dlock::UrlWithoutPassword("jdbc:mariadb://app:s3cret@db1/app", &out).ok());
  CHECK(out == "jdbc:mariadb://app@db1/app");
  REQUIRE(dlock::UrlWithoutPassword("jdbc:mysql://db1/app?%70assword=s3cret", &out).ok());
  CHECK(out == "jdbc:mysql://db1/app");
  // Each parses to what the original does, without the password.
  for (const std::string& url :
       {std::string("u:pw@tcp(h:1)/d?pool=2"), std::string("jdbc:mysql://h:1/d?user=u&password=pw&pool=2")}) {
    ClientOptions a = Parsed(url), b;
    REQUIRE(dlock::UrlWithoutPassword(url, &out).ok());
    b = Parsed(out);
    CHECK(b.password.empty());
    CHECK(a.user == b.user);
    CHECK(a.Where() == b.Where());
    CHECK(a.pool == b.pool);
  }
}

namespace {

// A DSN or JDBC URL with a random password and one of the typos people make
// around it (the JDBC password in the authority or as password=).
struct Typo {
  std::string url, secret, typos;
};

Typo MakeTypo(std::mt19937& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  static const std::string kFirst = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  static const std::string kRest = kFirst + "0123456789!$*-_.~+,;=";
  std::string secret(1, kFirst[pick(kFirst.size())]);
  for (size_t n = 7 + pick(10); secret.size() < n;) secret.push_back(kRest[pick(kRest.size())]);
  static const char* const kUsers[] = {"app", "root", "svc_lock", "u"};
  static const char* const kHosts[] = {"127.0.0.1", "db.example.com", "localhost", "[::1]", "h"};
  static const char* const kPorts[] = {"", ":3306", ":13306"};
  static const char* const kDbs[] = {"/app", "/test", "/my_db"};
  std::string user = kUsers[pick(4)], host = kHosts[pick(5)], port = kPorts[pick(3)];
  std::string db = kDbs[pick(3)], pw = secret, typos;
  // An unencoded special byte inside the password.
  bool raw_at = false;
  if (pick(3) == 0) {
    static const char kSpecial[] = "/?#%@:()&= ";
    char c = kSpecial[pick(sizeof kSpecial - 1)];
    raw_at = c == '@';
    pw.insert(1 + pick(pw.size() - 1), 1, c);
    typos += std::string("raw '") + c + "' ";
  }
  if (pick(2) == 0) {  // a go-sql-driver DSN
    static const char* const kQueries[] = {"", "?parseTime=true", "?timeout=5s&pool=2"};
    std::string sep = ":", at = "@", addr = "tcp(" + host + port + ")", query = kQueries[pick(3)];
    switch (pick(9)) {
      case 0: typos += "none"; break;
      case 1: at = "", typos += "no '@'"; break;
      case 2: addr = host + port, typos += "no tcp()"; break;
      case 3: at = "", addr = "", typos += "no '@', no address"; break;
      case 4: sep = "@", typos += "'@' for ':'"; break;
      case 5: addr = "tcp(" + host + port, typos += "no ')'"; break;
      case 6: {
        static const char* const kQ[] = {"?password=", "?pwd:", "?Passwd=", "?", "?parseTime=true&"};
        size_t q = pick(5);
        return {user + "@" + addr + db + kQ[q] + pw, secret, typos + "password in the query " + kQ[q]};
      }
      case 7: db = db.substr(1), typos += "no '/' before the database"; break;
      case 8: query = "?ssl_ca=/etc/ca.pem", typos += "raw '/' in a value"; break;
    }
    return {user + sep + pw + at + addr + db + query, secret, "DSN: " + typos};
  }
  std::string scheme = pick(2) == 0 ? "jdbc:mysql://" : "jdbc:mariadb://";
  static const char* const kQueries[] = {"", "&useSSL=false", "&connectTimeout=2000&pool=2"};
  std::string query = kQueries[pick(3)];
  switch (pick(8)) {
    case 0: typos += "none"; break;
    case 1: {
      static const char* const kS[] = {"jdbc:mysql:/", "jdbc:mysql:", "jdbc:mysq://", "jdbc://",
                                       "jdbc:mysql:loadbalance://"};
      scheme = kS[pick(5)], typos += "scheme " + scheme;
      break;
    }
    case 2: {
      static const char* const kQ[] = {"&password", "&pass=", "&pwd=", "&", "&password1=", "&Password:"};
      size_t q = pick(6);
      return {scheme + host + port + db + "?user=" + user + kQ[q] + pw + query, secret,
              "JDBC: password in the query as " + std::string(kQ[q])};
    }
    case 3: db = db.substr(1), typos += "no '/' before the database"; break;
    case 4:  // in the authority, with a mysql:// typo (not both '@'s mixed up:
             // "pw@rest" + "host" is the host "resthost" to any parser)
      return {scheme + user + ":" + pw + (pick(2) || raw_at ? "@" : "") + host + port + db, secret,
              "JDBC: password in the authority " + typos};
    case 5: query += "&user=" + user, typos += "user twice"; break;
    case 6: host += ",h2", typos += "two hosts"; break;
    case 7: query += "&ssl_ca=/etc/ca.pem", typos += "raw '/' in a value"; break;
  }
  return {scheme + host + port + db + "?user=" + user + "&password=" + pw + query, secret,
          "JDBC: " + typos};
}

}  // namespace

TEST_CASE("DSN and JDBC: 20,000 typo'd settings never show their password") {
  NoEnvPassword env;
  std::mt19937 rng(20261203u);
  int refused = 0, leaks = 0;
  for (int i = 0; i < 20000; ++i) {
    Typo t = MakeTypo(rng);
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
  CHECK(refused > 5000);
}

TEST_CASE("dlock.h names every DSN and JDBC parameter dlock reads or ignores") {
  std::ifstream in(DLOCK_C_HEADER);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  const size_t from = header.find("a go-sql-driver DSN");
  const size_t to = header.find("DLOCK_EXPORT int dlock_client_open");
  REQUIRE(from != std::string::npos);
  REQUIRE(to > from);
  // As a word of the comment: spaces, or the line's " * ", around it.
  std::string doc = " " + header.substr(from, to - from) + " ";
  for (char& c : doc)
    if (c == '\n' || c == '*' || c == ',' || c == '(' || c == ')' || c == '.' || c == '=') c = ' ';
  for (bool jdbc : {false, true}) {
    for (const std::string& name : dlock::DriverParamNames(jdbc)) {
      const std::string what = std::string(jdbc ? "JDBC " : "DSN ") + name;
      INFO(what);
      CHECK(doc.find(" " + name + " ") != std::string::npos);
    }
  }
}
