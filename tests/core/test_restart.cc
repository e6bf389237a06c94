// core_restart: lease fencing tokens and live leases survive a server
// restart, row locks held across it are lost; clients opened before the
// restart recover. Restarts the fixture server, so it runs
// alone (RUN_SERIAL) and only against a server of our own (else exit 77).
#define DOCTEST_CONFIG_IMPLEMENT
#include "core_test_util.h"

using dlock::Code;
using dlock::LockState;
using namespace dtest;

namespace {

const std::string kPrefix = UniquePrefix("restart");

void RestartServer() {
  const std::string cmd = std::string("'") + dlock_test_source_dir() + "/scripts/db.sh' restart '" +
                          dlock_test_db_dir() + "' >/dev/null";
  const auto t = Clock::now();
  int rc = std::system(cmd.c_str());
  REQUIRE_MESSAGE(rc == 0, "server restart failed (" << rc << "): " << cmd);
  MESSAGE("server restarted in ", MsSince(t), " ms");
}

}  // namespace

TEST_CASE("restart: tokens keep growing and leases persist across a server restart") {
  auto old_client = OpenClient();
  const std::string lease_key = kPrefix + "lease", held_key = kPrefix + "held", row_key = kPrefix + "row",
                    row_held_key = kPrefix + "rowheld";

  auto a = OpenLock(old_client, lease_key, "lease");
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  const uint64_t lease_before = a->token();
  DT_REQUIRE_CODE(a->Release(), Code::kOk);

  auto h = OpenLock(old_client, held_key, "lease", 120000);  // live across the restart
  DT_REQUIRE_CODE(h->Try(0), Code::kOk);
  const uint64_t held_token = h->token();
  const std::string held_owner = h->owner();

  auto r = OpenLock(old_client, row_key, "row");
  DT_REQUIRE_CODE(r->Try(0), Code::kOk);
  DT_REQUIRE_CODE(r->Release(), Code::kOk);

  auto rh = OpenLock(old_client, row_held_key, "row");
  DT_REQUIRE_CODE(rh->Try(0), Code::kOk);  // a row lock held across the restart

  RestartServer();

  // A new client after the restart.
  Admin admin;
  auto fresh = OpenClient();
  auto a2 = OpenLock(fresh, lease_key, "lease");
  DT_REQUIRE_CODE(a2->Try(0), Code::kOk);
  CHECK(a2->token() > lease_before);
  DT_CHECK_CODE(a2->Release(), Code::kOk);

  auto r2 = OpenLock(fresh, row_key, "row");
  DT_REQUIRE_CODE(r2->Try(0), Code::kOk);
  DT_CHECK_CODE(r2->Release(), Code::kOk);

  // The live lease is still there (stored, with its DB-clock expiry).
  SqlRow held_row = LeaseRow(admin, held_key);
  REQUIRE(held_row.size() == 3);
  CHECK(*held_row[0] == held_owner);
  CHECK(std::stoull(*held_row[2]) == held_token);
  auto h2 = OpenLock(fresh, held_key, "lease");
  DT_CHECK_CODE(h2->Try(0), Code::kBusy);

  // The row lock held across the restart is gone (the server rolled it back).
  DT_CHECK_CODE(rh->Renew(), Code::kLost);
  CHECK(rh->state() == LockState::kLost);
  auto rh2 = OpenLock(fresh, row_held_key, "row");
  DT_REQUIRE_CODE(rh2->Try(0), Code::kOk);
  DT_CHECK_CODE(rh2->Release(), Code::kOk);

  // The old client recovers: its pooled connections died with the server.
  // A lease statement is re-run on a fresh connection after a drop.
  DT_CHECK_CODE(h->Renew(), Code::kOk);
  CHECK(*LeaseRow(admin, held_key)[0] == held_owner);
  DT_CHECK_CODE(h->Release(), Code::kOk);
  DT_CHECK_CODE(h2->Try(0), Code::kOk);
  CHECK(h2->token() > held_token);
  DT_CHECK_CODE(h2->Release(), Code::kOk);

  // A row lock on the old client: its first statement may meet a dead pooled
  // connection (no retry inside a transaction); it must work within a few tries.
  dlock::Status s;
  int attempts = 0;
  for (; attempts < 4; ++attempts) {
    s = r->Try(1000);
    if (s.ok()) break;
    MESSAGE("old client's row lock after restart, attempt ", attempts + 1, ": ", CodeStr(s.code()), ": ",
            s.message());
    CHECK(s.code() == Code::kConnect);
  }
  REQUIRE(s.ok());
  DT_CHECK_CODE(r->Release(), Code::kOk);
  auto a3 = OpenLock(old_client, lease_key, "lease");
  DT_REQUIRE_CODE(a3->Try(0), Code::kOk);
  CHECK(a3->token() > lease_before + 1);
  DT_CHECK_CODE(a3->Release(), Code::kOk);
}

int main(int argc, char** argv) {
  if (!dlock_test_server_is_ours()) {
    std::printf("core_restart: skipped: the test server is not a throwaway one of ours (DLOCK_URL set "
                "or no my.cnf in DLOCK_TEST_DB_DIR); it will not be restarted\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
