// core_readonly: a read-only server (a replica) is refused with kReadOnly
// (A13). Sets the fixture server's global read_only, so it runs alone
// (RUN_SERIAL), only against a server of our own (else exit 77), and always
// puts read_only back.
#define DOCTEST_CONFIG_IMPLEMENT
#include "core_test_util.h"

using dlock::Code;
using namespace dtest;

namespace {

// SET GLOBAL read_only=1 for its scope; restored on every exit path.
class ReadOnlyGuard {
 public:
  explicit ReadOnlyGuard(Admin& admin) : admin_(admin) { admin_.Exec("SET GLOBAL read_only = 1"); }
  ~ReadOnlyGuard() {
    std::string err = admin_.TryExec("SET GLOBAL read_only = 0");
    if (!err.empty()) std::fprintf(stderr, "core_readonly: COULD NOT RESTORE read_only=0: %s\n", err.c_str());
  }

 private:
  Admin& admin_;
};

}  // namespace

TEST_CASE("readonly: Client::Open on a read-only server is kReadOnly") {
  Admin admin;
  REQUIRE(admin.Scalar("SELECT @@global.read_only") == "0");
  {
    ReadOnlyGuard guard(admin);
    REQUIRE(admin.Scalar("SELECT @@global.read_only") == "1");
    std::shared_ptr<dlock::Client> c;
    dlock::Status s = dlock::Client::Open(dlock_test_url(), dlock::Config(), &c);
    INFO(CodeStr(s.code()), ": ", s.message());
    CHECK(s.code() == Code::kReadOnly);
    CHECK(s.message().find("read-only") != std::string::npos);
    CHECK(c == nullptr);
  }
  CHECK(admin.Scalar("SELECT @@global.read_only") == "0");
  // Writable again: the same URL opens and locks.
  auto c = OpenClient();
  auto l = OpenLock(c, UniquePrefix("ro") + "k", "lease");
  DT_CHECK_CODE(l->Try(0), Code::kOk);
  DT_CHECK_CODE(l->Release(), Code::kOk);
}

// A replica as users meet it: read_only=ON, and a lock user without SUPER
// (or READ ONLY ADMIN), for whom the server itself refuses writes. The
// client refuses it at open, before creating anything, and a client opened
// while the server was writable that finds it read-only later writes
// nothing either.
TEST_CASE("readonly: a user without SUPER on a read-only server: refused at open, writes nothing") {
  Admin admin;
  const std::string tag = std::to_string(getpid() % 100000);
  const std::string user = "dlt_ro_" + tag, table = "dlt_ro_" + tag;
  const dlock::ClientOptions o = ServerOptions();
  REQUIRE(o.socket.empty());
  admin.TryExec("DROP USER IF EXISTS '" + user + "'@'%'");
  admin.Exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY 'ro-Pw-0'");
  admin.Exec("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, INDEX, ALTER ON `" + o.database +
             "`.* TO '" + user + "'@'%'");
  REQUIRE(admin.Int("SELECT COUNT(*) FROM mysql.user WHERE User = '" + user +
                    "' AND Super_priv = 'N'") == 1);
  const std::string url = "mysql://" + user + ":ro-Pw-0@" + o.host + ":" + std::to_string(o.port) +
                          "/" + o.database + "?table=" + table;
  auto tables = [&] {
    return admin.Int("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '" +
                     o.database + "' AND TABLE_NAME LIKE '" + table + "%'");
  };
  {
    ReadOnlyGuard guard(admin);
    std::shared_ptr<dlock::Client> c;
    dlock::Status s = dlock::Client::Open(url, dlock::Config(), &c);
    INFO(CodeStr(s.code()), ": ", s.message());
    CHECK(s.code() == Code::kReadOnly);
    CHECK(s.message().find("read-only") != std::string::npos);
    CHECK(s.message().find("ro-Pw-0") == std::string::npos);
    CHECK(c == nullptr);
    CHECK(tables() == 0);  // not even the lock tables were created
  }
  // Opened while writable; then the server turns read-only under it.
  std::shared_ptr<dlock::Client> c;
  DT_REQUIRE_CODE(dlock::Client::Open(url, dlock::Config(), &c), Code::kOk);
  const std::string k1 = UniquePrefix("ro") + "k1", k2 = UniquePrefix("ro") + "k2";
  {
    auto l = OpenLock(c, k1, "lease", 30000);
    DT_REQUIRE_CODE(l->Try(0), Code::kOk);
    DT_REQUIRE_CODE(l->Release(), Code::kOk);
  }
  SqlRow before = LeaseRow(admin, k1, table);
  REQUIRE(!before.empty());
  {
    ReadOnlyGuard guard(admin);
    auto l = OpenLock(c, k2, "lease", 30000);
    dlock::Status s = l->Try(0);
    INFO(CodeStr(s.code()), ": ", s.message());
    CHECK(s.code() == Code::kReadOnly);
    auto l1 = OpenLock(c, k1, "lease", 30000);
    CHECK(l1->Try(0).code() == Code::kReadOnly);
    CHECK(LeaseRow(admin, k2, table).empty());
    CHECK(LeaseRow(admin, k1, table) == before);
  }
  c.reset();
  admin.Exec("DROP USER '" + user + "'@'%'");
  admin.Exec("DROP TABLE IF EXISTS `" + table + "`, `" + table + "_fence`, `" + table + "_row`");
}

int main(int argc, char** argv) {
  if (!dlock_test_server_is_ours()) {
    std::printf("core_readonly: skipped: the test server is not a throwaway one of ours (DLOCK_URL set "
                "or no my.cnf in DLOCK_TEST_DB_DIR); its read_only will not be changed\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
