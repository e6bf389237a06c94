// Several servers in one client, without a server: the URL's split, each
// server's identity, and the rendezvous hash (pinned values, spread, and
// how few keys move when a server is added).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/core.hpp"
#include "options.h"

namespace {

const char* const kTables = "?table=distributed_lock&row_table=fixed_lock";

std::vector<std::string> Ids(int n) {
  std::vector<std::string> ids;
  for (int i = 1; i <= n; ++i) ids.push_back("db" + std::to_string(i) + ":3306/app" + kTables);
  return ids;
}

std::string Key(int i) { return "job:" + std::to_string(i); }

}  // namespace

TEST_CASE("rendezvous score: pinned values (any language must compute the same)") {
  // Computed independently (a few lines of Python: FNV-1a-64 over id, NUL,
  // key, then SplitMix64's finalizer); the bindings' tests pin the same.
  CHECK(dlock::RendezvousScore("", "a") == 0x16bc26fa3458bfadULL);
  CHECK(dlock::RendezvousScore(std::string("127.0.0.1:3306/app") + kTables, "job:42") ==
        0xa4735ba980518465ULL);
  CHECK(dlock::RendezvousScore(std::string("db1:3306/app") + kTables, "\xff\x01key") ==
        0xeec2693eb2ae024bULL);
  CHECK(dlock::RendezvousScore(std::string("db2:3306/app") + kTables, std::string(512, 'x')) ==
        0x191676c2c5eb1f82ULL);
}

TEST_CASE("rendezvous pick: independent of the list's order") {
  std::vector<std::string> ids = Ids(4);
  std::vector<std::string> rev(ids.rbegin(), ids.rend());
  for (int i = 0; i < 2000; ++i) {
    const std::string k = Key(i);
    CHECK(ids[dlock::RendezvousPick(ids, k)] == rev[dlock::RendezvousPick(rev, k)]);
  }
  CHECK(dlock::RendezvousPick({}, "k") == 0);
  CHECK(dlock::RendezvousPick({"only"}, "k") == 0);
}

TEST_CASE("rendezvous pick: 10,000 keys spread evenly over 2 and 4 servers") {
  for (int n : {2, 4}) {
    const std::vector<std::string> ids = Ids(n);
    std::vector<int> count(n, 0);
    for (int i = 0; i < 10000; ++i) ++count[dlock::RendezvousPick(ids, Key(i))];
    const double fair = 10000.0 / n;
    for (int c : count) {
      INFO("n=" << n << " count=" << c);
      // Binomial sd is 50 (n=2) and 43 (n=4): 3% of 10,000 is > 6 sd.
      CHECK(std::abs(c - fair) < 300);
    }
  }
}

TEST_CASE("rendezvous pick: adding a server moves about 1/n of the keys, all to it") {
  for (int n : {1, 2, 3}) {
    const std::vector<std::string> before = Ids(n);
    const std::vector<std::string> after = Ids(n + 1);
    int moved = 0;
    for (int i = 0; i < 10000; ++i) {
      const std::string& a = before[dlock::RendezvousPick(before, Key(i))];
      const std::string& b = after[dlock::RendezvousPick(after, Key(i))];
      if (a != b) {
        ++moved;
        CHECK(b == after.back());  // only to the new server, never between old ones
      }
    }
    INFO("n+1=" << n + 1 << " moved=" << moved);
    CHECK(std::abs(moved - 10000.0 / (n + 1)) < 300);
  }
}

TEST_CASE("server URLs: split only where a new URL begins") {
  using V = std::vector<std::string>;
  CHECK(dlock::SplitServerUrls("mysql://u@h/db") == V{"mysql://u@h/db"});
  CHECK(dlock::SplitServerUrls("mysql://u@h1/db;mysql://u@h2/db") ==
        V{"mysql://u@h1/db", "mysql://u@h2/db"});
  CHECK(dlock::SplitServerUrls("mysql://u@h1/db;mariadb://u@h2:1,h3:2/db;JDBC:MySQL://h4/db") ==
        V{"mysql://u@h1/db", "mariadb://u@h2:1,h3:2/db", "JDBC:MySQL://h4/db"});
  // A ';' not followed by a URL is part of its server's URL (a password).
  CHECK(dlock::SplitServerUrls("mysql://u:p;w@h1/db;mysql://u@h2/db") ==
        V{"mysql://u:p;w@h1/db", "mysql://u@h2/db"});
  CHECK(dlock::SplitServerUrls("u:p;mysql@tcp(h)/db") == V{"u:p;mysql@tcp(h)/db"});
  // A DSN is never split, whatever its raw password holds (fuzz_url: the
  // password must not change how the string is read).
  CHECK(dlock::SplitServerUrls("u:p;mysql://x@tcp(h)/db") == V{"u:p;mysql://x@tcp(h)/db"});
  // In a URL, such a ';' separates; %3B is the password's own.
  CHECK(dlock::SplitServerUrls("mysql://u:p%3Bmysql://x@h/db") == V{"mysql://u:p%3Bmysql://x@h/db"});
}

TEST_CASE("server identities: canonical, no password, duplicates refused") {
  dlock::Config none;
  std::vector<std::string> ids;
  REQUIRE(dlock::ServerIds("mysql://u:secret@DB1:3306/app;mysql://u@db2:3307,Db3/app?table=t1",
                           none, &ids)
              .ok());
  REQUIRE(ids.size() == 2);
  CHECK(ids[0] == "db1:3306/app?table=distributed_lock&row_table=fixed_lock");
  CHECK(ids[1] == "db2:3307,db3:3306/app?table=t1&row_table=fixed_lock");
  // The nodes of one cluster in another order are the same server.
  std::vector<std::string> again;
  REQUIRE(dlock::ServerIds("mysql://v@db3:3306,db2:3307/app?table=t1", none, &again).ok());
  CHECK(again[0] == ids[1]);
  // cfg's table wins over the URL's, as in a client.
  dlock::Config cfg;
  REQUIRE(cfg.Set("table", "t2").ok());
  REQUIRE(dlock::ServerIds("mysql://u@h/app?table=t1", cfg, &again).ok());
  CHECK(again[0] == "h:3306/app?table=t2&row_table=fixed_lock");
  // A server twice (another user, another password, case): refused.
  dlock::Status s = dlock::ServerIds("mysql://a:pw1@h:3306/app;mysql://b:pw2@H/app", none, &again);
  CHECK(s.code() == dlock::Code::kInvalid);
  CHECK(s.message().find("servers 1 and 2 are the same server") != std::string::npos);
  CHECK(s.message().find("pw") == std::string::npos);
  // Another database on one server is another lock space.
  CHECK(dlock::ServerIds("mysql://u@h/app;mysql://u@h/app2", none, &again).ok());
  // A bad server is named by its place.
  s = dlock::ServerIds("mysql://u@h/app;mysql://u@h2", none, &again);
  CHECK(s.code() == dlock::Code::kInvalid);
  CHECK(s.message().find("server 2 of 2") != std::string::npos);
  // One server's URL parser refuses a list: only a client spreads keys.
  dlock::ClientOptions o;
  s = dlock::ParseUrl("mysql://u@h1/db;mysql://u@h2/db", &o);
  CHECK(s.code() == dlock::Code::kInvalid);
  CHECK(s.message().find("2 servers") != std::string::npos);
}

TEST_CASE("a URL of several servers without its passwords") {
  std::string out;
  REQUIRE(dlock::UrlWithoutPassword("mysql://u:s1@h1/db;mysql://v:s2@h2:3307/db?pool=2", &out).ok());
  CHECK(out == "mysql://u@h1/db;mysql://v@h2:3307/db?pool=2");
}

TEST_CASE("servers: localhost:PORT in a list is 127.0.0.1:PORT; a port-less localhost is refused") {
  std::vector<std::string> ids;
  dlock::Config none;
  // With a port, localhost is TCP: the server 127.0.0.1:PORT, one identity
  // for both spellings.
  REQUIRE(dlock::ServerIds("mysql://u@localhost:3307/app;mysql://u@127.0.0.1:3308/app", none, &ids)
              .ok());
  REQUIRE(ids.size() == 2u);
  CHECK(ids[0] == "127.0.0.1:3307/app?table=distributed_lock&row_table=fixed_lock");
  std::vector<std::string> plain;
  REQUIRE(dlock::ServerIds("mysql://u@127.0.0.1:3307/app", none, &plain).ok());
  REQUIRE(dlock::ServerIds("mysql://u@LOCALHOST:3307/app", none, &ids).ok());
  CHECK(ids == plain);
  dlock::Status s = dlock::ServerIds("mysql://u@localhost:3307/app;mysql://u@127.0.0.1:3307/app",
                                     none, &ids);
  CHECK(s.code() == dlock::Code::kInvalid);
  CHECK(s.message().find("servers 1 and 2 are the same server") != std::string::npos);
  // Without a port it is the default unix socket: refused in a list.
  s = dlock::ServerIds("mysql://u@localhost/app;mysql://u@127.0.0.1:3308/app", none, &ids);
  CHECK(s.code() == dlock::Code::kInvalid);
  CHECK(s.message().find("server 1 of 2") != std::string::npos);
  CHECK(s.message().find("localhost without a port is the default unix socket") !=
        std::string::npos);
  CHECK(s.message().find("127.0.0.1:PORT") != std::string::npos);
  // Alone it keeps Connector/C's meaning; with socket= it is that socket.
  CHECK(dlock::ServerIds("mysql://u@localhost/app", none, &ids).ok());
  REQUIRE(dlock::ServerIds("mysql://u@localhost:3307/app?socket=/tmp/a.sock;"
                           "mysql://u@127.0.0.1:3307/app",
                           none, &ids)
              .ok());
  CHECK(ids[0].rfind("unix:/tmp/a.sock/", 0) == 0);
}

TEST_CASE("server URLs: mysql+DRIVER:// and schemes in any case; a DSN's raw password never splits") {
  using V = std::vector<std::string>;
  dlock::ClientOptions o;
  // A go-sql-driver DSN whose raw password holds ";mysql+pymysql://": one
  // string, one meaning, in every language (the core splits for all of them).
  const std::string dsn = "u:p;mysql+pymysql://x@tcp(h:1)/db";
  CHECK(dlock::SplitServerUrls(dsn) == V{dsn});
  REQUIRE(dlock::ParseUrl(dsn, &o).ok());
  CHECK(o.user == "u");
  CHECK(o.password == "p;mysql+pymysql://x");
  CHECK(o.host == "h");
  CHECK(o.port == 1);
  std::string shown;
  REQUIRE(dlock::UrlWithoutPassword(dsn, &shown).ok());
  CHECK(shown == "u@tcp(h:1)/db");

  // SQLAlchemy's driver suffix and any case: the same server's URL.
  REQUIRE(dlock::ParseUrl("mysql+pymysql://u:pw@db1:3307/app", &o).ok());
  CHECK(o.user == "u");
  CHECK(o.password == "pw");
  CHECK(o.host == "db1");
  CHECK(o.port == 3307);
  CHECK(o.database == "app");
  for (const char* url : {"mysql+mysqldb://u@h/app", "mariadb+mariadbconnector://u@h/app",
                          "MySQL://u@h/app", "MARIADB+PyMySQL://u@h/app", "JDBC:MariaDB://h/app",
                          "Jdbc:MYSQL://h/app"}) {
    INFO(url);
    dlock::Status s = dlock::ParseUrl(url, &o);
    CHECK_MESSAGE(s.ok(), s.message());
    CHECK(o.host == "h");
    CHECK(o.database == "app");
  }
  for (const char* url : {"mysql+://h/app", "mysql+py-mysql://h/app", "jdbc:mysql+x://h/app",
                          "postgres+psycopg://h/app", "mysqlx://h/app"}) {
    INFO(url);
    CHECK(dlock::ParseUrl(url, &o).code() == dlock::Code::kInvalid);
  }
  REQUIRE(dlock::UrlWithoutPassword("mysql+pymysql://u:secret@h/app", &shown).ok());
  CHECK(shown == "mysql+pymysql://u@h/app");

  // Lists: a new server's URL may start with any of these forms.
  CHECK(dlock::SplitServerUrls("mysql+pymysql://u:pw@h1/db;MARIADB+mariadbconnector://u@h2/db;"
                               "Mysql://u@h3/db") ==
        V{"mysql+pymysql://u:pw@h1/db", "MARIADB+mariadbconnector://u@h2/db", "Mysql://u@h3/db"});
  std::vector<std::string> ids;
  dlock::Config none;
  REQUIRE(dlock::ServerIds("mysql+pymysql://u:pw@h1/db;MARIADB+mariadbconnector://u@h2/db", none,
                           &ids)
              .ok());
  CHECK(ids == V{"h1:3306/db?table=distributed_lock&row_table=fixed_lock",
                 "h2:3306/db?table=distributed_lock&row_table=fixed_lock"});
  // The driver is no part of a server's identity.
  dlock::Status s = dlock::ServerIds("mysql+pymysql://u@h/app;MYSQL://v@h/app", none, &ids);
  CHECK(s.code() == dlock::Code::kInvalid);
  CHECK(s.message().find("same server") != std::string::npos);
}

TEST_CASE("servers: a client-wide option (events) that differs between servers is refused") {
  dlock::Config none;
  std::vector<std::string> ids;
  dlock::Status s =
      dlock::ServerIds("mysql://u@h1/app?events=64;mysql://u@h2/app", none, &ids);
  CHECK(s.code() == dlock::Code::kInvalid);
  CHECK_MESSAGE(s.message() ==
                    "server 2 of 2 in the URL: events=1024, but server 1 has events=64: a client "
                    "over several servers has one event queue; give every server the same "
                    "events=, or set events once in the client's options",
                s.message());
  CHECK(dlock::ServerIds("mysql://u@h1/app?events=64;mysql://u@h2/app?events=64", none, &ids).ok());
  // The client's options win over every server's URL: then they agree.
  dlock::Config cfg;
  REQUIRE(cfg.Set("events", "8").ok());
  CHECK(dlock::ServerIds("mysql://u@h1/app?events=64;mysql://u@h2/app", cfg, &ids).ok());
  // Per-server options may differ.
  CHECK(dlock::ServerIds("mysql://u@h1/app?pool=2&read_timeout=9;mysql://u@h2/app", none, &ids)
            .ok());
}

TEST_CASE("KeyServerUrl: the server the caller's clients pick, with the caller's options") {
  const std::string a = "mysql://u:pw@h1/app", b = "mysql://u@h2/app";
  const std::string url = a + ";" + b;
  dlock::Config none, cfg;
  REQUIRE(cfg.Set("table", "t2").ok());  // part of each server's identity
  std::vector<std::string> ids_none, ids_cfg;
  REQUIRE(dlock::ServerIds(url, none, &ids_none).ok());
  REQUIRE(dlock::ServerIds(url, cfg, &ids_cfg).ok());
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string k = Key(i);
    const std::string want_none = dlock::RendezvousPick(ids_none, k) == 0 ? a : b;
    const std::string want_cfg = dlock::RendezvousPick(ids_cfg, k) == 0 ? a : b;
    differ += want_none != want_cfg;
    std::string got;
    REQUIRE(dlock::KeyServerUrl(url, none, k, &got).ok());
    CHECK(got == want_none);
    REQUIRE(dlock::KeyServerUrl(url, cfg, k, &got).ok());
    CHECK(got == want_cfg);
  }
  CHECK(differ > 0);  // the options did change where some keys live
  std::string got;
  REQUIRE(dlock::KeyServerUrl(a, cfg, "k", &got).ok());
  CHECK(got == a);
  CHECK(dlock::KeyServerUrl(url, none, "", &got).code() == dlock::Code::kInvalid);
  CHECK(got.empty());
}
