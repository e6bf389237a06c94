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

int main(int argc, char** argv) {
  if (!dlock_test_server_is_ours()) {
    std::printf("core_readonly: skipped: the test server is not a throwaway one of ours (DLOCK_URL set "
                "or no my.cnf in DLOCK_TEST_DB_DIR); its read_only will not be changed\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
