// A client over two real servers (fixtures db and db2): each key's lease
// row is on its key's server only, exclusion and fencing hold per key
// between clients that list the servers in another order, client-wide
// calls reach both, and a dead server fails only its keys, saying which.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <cstdlib>
#include <string>

#include "core_test_util.h"

using namespace dtest;

namespace {

}  // namespace

TEST_CASE("two servers: keys on their own server, exclusion and tokens per key") {
  const std::string u1 = dlock_test_url(), u2 = Url2();
  auto a = OpenUrl(u1 + ";" + u2);
  auto b = OpenUrl(u2 + ";" + u1);  // the same servers in the other order
  REQUIRE(a->server_count() == 2);
  REQUIRE(b->server_count() == 2);
  CHECK(a->server_id(0) == b->server_id(1));
  Admin s1(u1.c_str()), s2(Url2());
  const std::string p = UniquePrefix("servers");
  const std::string k1 = KeyOn(*a, p, 0), k2 = KeyOn(*a, p, 1);
  size_t at = 9;
  REQUIRE(b->ServerOf(k1, &at).ok());
  CHECK(at == 1);  // b lists server 1 second

  auto l1 = OpenLock(a, k1), l2 = OpenLock(a, k2);
  REQUIRE(l1->Try(0).ok());
  REQUIRE(l2->Try(0).ok());
  // Each row on its key's server only.
  CHECK(LeaseRow(s1, k1).size() == 3);
  CHECK(LeaseRow(s2, k1).empty());
  CHECK(LeaseRow(s2, k2).size() == 3);
  CHECK(LeaseRow(s1, k2).empty());
  CHECK(*LeaseRow(s1, k1)[0] == l1->owner());
  CHECK(*LeaseRow(s2, k2)[0] == l2->owner());
  // Tokens come from the key's server: the row's fence there.
  CHECK(std::to_string(l1->token()) == *LeaseRow(s1, k1)[2]);
  CHECK(std::to_string(l2->token()) == *LeaseRow(s2, k2)[2]);

  // The other client, servers listed the other way round, is excluded on
  // both keys, and gets them (with larger tokens) once released.
  auto m1 = OpenLock(b, k1), m2 = OpenLock(b, k2);
  CHECK(m1->Try(0).code() == Code::kBusy);
  CHECK(m2->Try(0).code() == Code::kBusy);
  const uint64_t t1 = l1->token(), t2 = l2->token();
  REQUIRE(l1->Release().ok());
  REQUIRE(m1->Try(0).ok());
  CHECK(m1->token() > t1);
  CHECK(m2->Try(0).code() == Code::kBusy);  // k2 is still held
  REQUIRE(l2->Release().ok());
  REQUIRE(m2->Try(0).ok());
  CHECK(m2->token() > t2);
  CHECK(*LeaseRow(s1, k1)[0] == m1->owner());
  CHECK(*LeaseRow(s2, k2)[0] == m2->owner());
  REQUIRE(m1->Release().ok());
  REQUIRE(m2->Release().ok());

  // Client-wide calls reach both servers.
  uint64_t deleted = 0;
  CHECK(a->Cleanup(&deleted).ok());
  CHECK(a->EnsureSchema().ok());
  uint64_t acquired = 0;
  REQUIRE(a->Counter("acquisitions", &acquired).ok());
  CHECK(acquired == 2);
}

TEST_CASE("two servers: a row lock goes to its key's server too") {
  const std::string u1 = dlock_test_url(), u2 = Url2();
  auto a = OpenUrl(u1 + ";" + u2);
  auto b = OpenUrl(u2 + ";" + u1);
  const std::string p = UniquePrefix("srvrow");
  for (size_t want : {0, 1}) {
    const std::string k = KeyOn(*a, p, want);
    auto l = OpenLock(a, k, "row");
    auto m = OpenLock(b, k, "row");
    REQUIRE(l->Try(0).ok());
    CHECK(m->Try(0).code() == Code::kBusy);
    REQUIRE(l->Release().ok());
    REQUIRE(m->Try(0).ok());
    REQUIRE(m->Release().ok());
    Admin on(want == 0 ? u1.c_str() : u2.c_str()), off(want == 0 ? u2.c_str() : u1.c_str());
    CHECK(on.Int("SELECT COUNT(*) FROM fixed_lock WHERE lock_name = " + Lit(k)) == 1);
    CHECK(off.Int("SELECT COUNT(*) FROM fixed_lock WHERE lock_name = " + Lit(k)) == 0);
  }
}

TEST_CASE("two servers: the same server twice, or a bad one, is refused at open") {
  const std::string u1 = dlock_test_url();
  std::shared_ptr<dlock::Client> c;
  dlock::Status s = dlock::Client::Open(u1 + ";" + u1, dlock::Config(), &c);
  CHECK(s.code() == Code::kInvalid);
  CHECK(s.message().find("same server") != std::string::npos);
  // A server that cannot be reached: open fails, naming it.
  s = dlock::Client::Open(u1 + ";mysql://root@127.0.0.1:1/test", dlock::Config(), &c);
  CHECK(s.code() == Code::kConnect);
  CHECK(s.message().find("server 2 of 2 (127.0.0.1:1/test") != std::string::npos);
}

TEST_CASE("two servers: a dead server fails only its keys, with a clear error") {
  const char* dir = std::getenv("DLOCK_TEST_DB2_DIR");
  const std::string u1 = dlock_test_url(), u2 = Url2();
  if (std::getenv("DLOCK_URL2") != nullptr || dir == nullptr) {
    MESSAGE("SKIP: the second server is not ours to stop");
    return;
  }
  dlock::Config cfg;
  REQUIRE(cfg.Set("connect_timeout", "2").ok());
  std::shared_ptr<dlock::Client> a;
  REQUIRE(dlock::Client::Open(u1 + ";" + u2, cfg, &a).ok());
  const std::string p = UniquePrefix("srvdead");
  const std::string k1 = KeyOn(*a, p, 0), k2 = KeyOn(*a, p, 1);
  auto l1 = OpenLock(a, k1), l2 = OpenLock(a, k2);
  const std::string db_sh = std::string(dlock_test_source_dir()) + "/scripts/db.sh";
  REQUIRE(std::system((db_sh + " stop " + dir + " >/dev/null").c_str()) == 0);
  struct Restart {
    std::string cmd;
    ~Restart() { (void)std::system(cmd.c_str()); }
  } restart{db_sh + " restart " + dir + " >/dev/null"};
  // The live server's keys work as before.
  REQUIRE(l1->Try(0).ok());
  REQUIRE(l1->Release().ok());
  // The dead one's fail, naming the server.
  dlock::Status s = l2->Try(0);
  CHECK(s.code() == Code::kConnect);
  const dlock::ClientOptions o2 = ServerOptions(u2.c_str());
  CHECK_MESSAGE(s.message().find(std::to_string(o2.port)) != std::string::npos, s.message());
  // Client-wide calls still do the live server's part and name the dead one.
  s = a->EnsureSchema();
  CHECK(s.code() == Code::kConnect);
  CHECK_MESSAGE(s.message().find("server 2 of 2") != std::string::npos, s.message());
}
