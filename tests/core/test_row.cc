// core_row: the row lock (scheme 2, SELECT ... FOR UPDATE style) against the
// fixture server: release on COMMIT/ROLLBACK, on the holder's connection
// dying, Exec in the lock's transaction, no gap locks, bounded waits, and no
// token (row locks have none).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "core_test_util.h"
#include "client_impl.h"

using dlock::Code;
using dlock::LockState;
using namespace dtest;

namespace {

const std::string kPrefix = UniquePrefix("row");

// The connection id of a held row lock's session: the lock's transaction
// takes a named user lock through Exec, and the server says who holds it.
// (Robust even when other tests have transactions open at the same time.)
int64_t HolderConnectionId(Admin& admin, dlock::Lock& lock, const std::string& marker) {
  int64_t affected = -1;
  dlock::Status s = lock.Exec("DO GET_LOCK(?, 0)", {&marker}, &affected);
  REQUIRE_MESSAGE(s.ok(), "Exec(GET_LOCK) on the row lock's connection: " << s.message());
  std::string id = admin.Scalar("SELECT IS_USED_LOCK(" + Lit(marker) + ")");
  REQUIRE_MESSAGE((!id.empty() && id[0] != '<'), "IS_USED_LOCK gave " << id);
  const int64_t conn_id = std::stoll(id);
  // That session has an open InnoDB transaction (the one holding the row).
  // INNODB_TRX is a cache, refreshed only when it has not been read for
  // 0.1 s: poll slower than that, or it never refreshes.
  CHECK(PollUntil(Clock::now() + std::chrono::seconds(3), [&] {
    return admin.Int("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = " +
                     std::to_string(conn_id)) == 1;
  }, std::chrono::milliseconds(150)));
  return conn_id;
}

// A business table for Exec, dropped at the end of the test.
struct BizTable {
  Admin& admin;
  std::string name;
  BizTable(Admin& a, const std::string& n) : admin(a), name(n) {
    admin.Exec("CREATE TABLE `" + name + "` (id INT PRIMARY KEY, v VARCHAR(64) NULL) ENGINE=InnoDB");
  }
  ~BizTable() { admin.TryExec("DROP TABLE IF EXISTS `" + name + "`"); }
};

}  // namespace

TEST_CASE("row: acquire, busy for others, released on COMMIT and on ROLLBACK") {
  Admin admin;
  auto c1 = OpenClient();
  auto c2 = OpenClient();
  const std::string key = kPrefix + "basic";
  auto a = OpenLock(c1, key, "row");
  auto b = OpenLock(c2, key, "row");

  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  CHECK(a->held());
  CHECK(a->token() == 0);  // row locks have no fencing token (dlock.h)
  CHECK(!a->owner().empty());
  CHECK(a->remaining_ms() == -1);
  DT_CHECK_CODE(a->Renew(), Code::kOk);  // row lock: checks the session is alive
  // Reentrant by default: counts up, same transaction.
  const std::string first_owner = a->owner();
  DT_CHECK_CODE(a->Try(0), Code::kOk);
  CHECK(a->hold_count() == 2);
  CHECK(a->owner() == first_owner);
  DT_CHECK_CODE(a->Release(), Code::kOk);  // inner hold: nothing committed yet
  CHECK(a->held());
  DT_CHECK_CODE(b->Try(0), Code::kBusy);
  CHECK(b->state() == LockState::kIdle);

  auto t = Clock::now();
  DT_REQUIRE_CODE(a->Release(), Code::kOk);  // COMMIT
  CHECK(a->state() == LockState::kIdle);
  DT_CHECK_CODE(a->Release(), Code::kState);
  DT_CHECK_CODE(a->Rollback(), Code::kState);
  DT_REQUIRE_CODE(b->Try(0), Code::kOk);
  CHECK(MsSince(t) < 1000);
  CHECK(b->owner() != first_owner);
  DT_CHECK_CODE(a->Try(0), Code::kBusy);

  t = Clock::now();
  DT_REQUIRE_CODE(b->Rollback(), Code::kOk);  // ROLLBACK also releases
  CHECK(b->state() == LockState::kIdle);
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  CHECK(MsSince(t) < 1000);
  DT_CHECK_CODE(a->Release(), Code::kOk);
}

TEST_CASE("row: a waiter is let in as soon as the holder commits") {
  auto c1 = OpenClient();
  auto c2 = OpenClient();
  const std::string key = kPrefix + "handoff";
  auto a = OpenLock(c1, key, "row");
  auto b = OpenLock(c2, key, "row");
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  std::atomic<int> got{-100};
  std::atomic<int64_t> got_at_ms{0};
  const auto start = Clock::now();
  std::atomic<int> released{-100};
  std::thread waiter([&] {
    dlock::Status s = b->Try(10000);
    got_at_ms = MsSince(start);
    got = static_cast<int>(s.code());
    if (s.ok()) released = static_cast<int>(b->Release().code());  // holder=thread: this thread
  });
  CHECK_FALSE(PollUntil(Clock::now() + std::chrono::milliseconds(400), [&] { return got != -100; }));
  const int64_t released_at = MsSince(start);
  DT_CHECK_CODE(a->Release(), Code::kOk);
  waiter.join();
  CHECK(got == static_cast<int>(Code::kOk));
  CHECK(got_at_ms >= released_at);
  CHECK(got_at_ms - released_at < 500);  // InnoDB grants the row at once
  CHECK(released == static_cast<int>(Code::kOk));
}

TEST_CASE("row: the wait times out within wait + 1 s") {
  auto c1 = OpenClient();
  auto c2 = OpenClient();
  const std::string key = kPrefix + "timeout";
  auto a = OpenLock(c1, key, "row");
  auto b = OpenLock(c2, key, "row");
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  for (int64_t wait : {int64_t{1500}, int64_t{120}}) {
    const auto t = Clock::now();
    DT_CHECK_CODE(b->Try(wait), Code::kBusy);
    const int64_t took = MsSince(t);
    INFO("Try(", wait, ") returned after ", took, " ms");
    CHECK(took >= wait);
    CHECK(took < wait + 1000);
  }
  const auto t = Clock::now();
  DT_CHECK_CODE(b->Try(0), Code::kBusy);
  CHECK(MsSince(t) < 1000);
  CHECK(b->state() == LockState::kIdle);
  // The holder is undisturbed.
  DT_CHECK_CODE(a->Renew(), Code::kOk);
  DT_CHECK_CODE(a->Release(), Code::kOk);
}

TEST_CASE("row: two never-seen names locked at once from two clients do not block each other") {
  Admin admin;
  auto c1 = OpenClient();
  auto c2 = OpenClient();
  for (int round = 0; round < 5; ++round) {
    // Adjacent names: a gap lock on one would cover the other.
    const std::string k1 = kPrefix + "fresh" + std::to_string(round) + "a";
    const std::string k2 = kPrefix + "fresh" + std::to_string(round) + "b";
    REQUIRE(admin.Int("SELECT COUNT(*) FROM fixed_lock WHERE lock_name IN (" + Lit(k1) + ", " + Lit(k2) +
                      ")") == 0);
    auto a = OpenLock(c1, k1, "row");
    auto b = OpenLock(c2, k2, "row");
    auto t = Clock::now();
    DT_REQUIRE_CODE(a->Try(0), Code::kOk);
    DT_REQUIRE_CODE(b->Try(0), Code::kOk);
    CHECK(MsSince(t) < 1500);
    CHECK(a->held());
    CHECK(b->held());
    // And a third name in between, from a's client, while both are held.
    auto m = OpenLock(c1, kPrefix + "fresh" + std::to_string(round) + "ab", "row");
    DT_CHECK_CODE(m->Try(0), Code::kOk);
    DT_CHECK_CODE(m->Release(), Code::kOk);
    DT_CHECK_CODE(a->Release(), Code::kOk);
    DT_CHECK_CODE(b->Release(), Code::kOk);
  }
}

TEST_CASE("row: Exec runs in the lock's transaction: committed by Release, undone by Rollback") {
  Admin admin;
  auto c = OpenClient();
  const std::string table =
      "dlt_biz_" + std::to_string(getpid()) + "_" + std::to_string(std::random_device{}() % 1000000);
  BizTable biz(admin, table);
  admin.Exec("DELETE FROM `" + table + "`");
  const std::string key = kPrefix + "exec";
  auto a = OpenLock(c, key, "row");

  // Commit: the business row appears with the release, not before.
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  const std::string id1 = "1", v1 = "committed 'with' quotes";
  int64_t affected = -1;
  DT_REQUIRE_CODE(a->Exec("INSERT INTO `" + table + "` (id, v) VALUES (?, ?)", {&id1, &v1}, &affected),
                  Code::kOk);
  CHECK(affected == 1);
  const std::string id2 = "2";
  DT_REQUIRE_CODE(a->Exec("INSERT INTO `" + table + "` (id, v) VALUES (?, ?)", {&id2, nullptr}, nullptr),
                  Code::kOk);
  CHECK(admin.Int("SELECT COUNT(*) FROM `" + table + "`") == 0);  // not yet committed
  // A failing statement reports the server error and keeps the lock.
  dlock::Status s = a->Exec("INSERT INTO `" + table + "` (id, v) VALUES (?, ?)", {&id1, &v1}, &affected);
  CHECK(s.code() == Code::kDb);
  CHECK(s.server_errno() == 1062);
  CHECK(a->held());
  DT_REQUIRE_CODE(a->Release(), Code::kOk);
  CHECK(admin.Int("SELECT COUNT(*) FROM `" + table + "`") == 2);
  CHECK(admin.Scalar("SELECT v FROM `" + table + "` WHERE id = 1") == v1);
  CHECK(admin.Scalar("SELECT v FROM `" + table + "` WHERE id = 2") == "<NULL>");

  // Rollback: nothing of the transaction stays.
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  const std::string id3 = "3", v3 = "rolled back";
  DT_REQUIRE_CODE(a->Exec("INSERT INTO `" + table + "` (id, v) VALUES (?, ?)", {&id3, &v3}, &affected),
                  Code::kOk);
  DT_REQUIRE_CODE(a->Exec("UPDATE `" + table + "` SET v = ? WHERE id = ?", {&v3, &id1}, &affected),
                  Code::kOk);
  CHECK(affected == 1);
  DT_REQUIRE_CODE(a->Rollback(), Code::kOk);
  CHECK(admin.Int("SELECT COUNT(*) FROM `" + table + "`") == 2);
  CHECK(admin.Int("SELECT COUNT(*) FROM `" + table + "` WHERE id = 3") == 0);
  CHECK(admin.Scalar("SELECT v FROM `" + table + "` WHERE id = 1") == v1);

  // Exec needs a held row lock.
  DT_CHECK_CODE(a->Exec("DELETE FROM `" + table + "`", {}, &affected), Code::kState);
  auto lease = OpenLock(c, kPrefix + "exec_lease", "lease");
  DT_REQUIRE_CODE(lease->Try(0), Code::kOk);
  // A lease needs Begin() first.
  DT_CHECK_CODE(lease->Exec("DELETE FROM `" + table + "`", {}, &affected), Code::kState);
  DT_CHECK_CODE(lease->Rollback(), Code::kState);
  DT_CHECK_CODE(lease->Release(), Code::kOk);
  CHECK(admin.Int("SELECT COUNT(*) FROM `" + table + "`") == 2);
}

TEST_CASE("row: released at once when the holder's connection dies") {
  Admin admin;
  auto c1 = OpenClient();
  auto c2 = OpenClient();

  SUBCASE("renew, then release, after the kill") {
    const std::string key = kPrefix + "kill1";
    auto holder = OpenLock(c1, key, "row");
    auto other = OpenLock(c2, key, "row");
    DT_REQUIRE_CODE(holder->Try(0), Code::kOk);
    const int64_t id = HolderConnectionId(admin, *holder, kPrefix + "marker1");
    DT_CHECK_CODE(other->Try(0), Code::kBusy);
    admin.Exec("KILL " + std::to_string(id));
    const auto t = Clock::now();
    DT_REQUIRE_CODE(other->Try(3000), Code::kOk);
    CHECK(MsSince(t) < 1500);
    dlock::Status s = holder->Renew();
    CHECK_MESSAGE(s.code() == Code::kLost,
                  "Renew after kill: " << CodeStr(s.code()) << ": " << s.message());
    CHECK(holder->state() == LockState::kLost);
    s = holder->Release();
    CHECK_MESSAGE(s.code() == Code::kLost,
                  "Release after kill: " << CodeStr(s.code()) << ": " << s.message());
    const std::string v = "x";
    DT_CHECK_CODE(holder->Exec("DO ?", {&v}, nullptr), Code::kLost);
    CHECK(other->held());
    DT_CHECK_CODE(other->Release(), Code::kOk);
    // The lost object can lock again (on a fresh connection).
    DT_CHECK_CODE(holder->Try(1000), Code::kOk);
    DT_CHECK_CODE(holder->Release(), Code::kOk);
  }

  SUBCASE("release right after the kill") {
    const std::string key = kPrefix + "kill2";
    auto holder = OpenLock(c1, key, "row");
    auto other = OpenLock(c2, key, "row");
    DT_REQUIRE_CODE(holder->Try(0), Code::kOk);
    const int64_t id = HolderConnectionId(admin, *holder, kPrefix + "marker2");
    admin.Exec("KILL " + std::to_string(id));
    DT_REQUIRE_CODE(other->Try(3000), Code::kOk);
    // COMMIT on a dead session: kLost, or kUnknown when the connector saw the
    // connection drop while the COMMIT was in flight. Observed: see MESSAGE.
    dlock::Status s = holder->Release();
    MESSAGE("Release() right after KILL gave ", CodeStr(s.code()), " (errno ", s.server_errno(), "): ",
            s.message());
    CHECK((s.code() == Code::kLost || s.code() == Code::kUnknown));
    CHECK(holder->state() == LockState::kLost);
    DT_CHECK_CODE(other->Release(), Code::kOk);
  }

  SUBCASE("exec right after the kill") {
    const std::string key = kPrefix + "kill3";
    auto holder = OpenLock(c1, key, "row");
    auto other = OpenLock(c2, key, "row");
    DT_REQUIRE_CODE(holder->Try(0), Code::kOk);
    const int64_t id = HolderConnectionId(admin, *holder, kPrefix + "marker3");
    admin.Exec("KILL " + std::to_string(id));
    const std::string v = "x";
    DT_CHECK_CODE(holder->Exec("DO ?", {&v}, nullptr), Code::kLost);
    CHECK(holder->state() == LockState::kLost);
    DT_CHECK_CODE(holder->Release(), Code::kLost);
    // The server may close the killed session's socket before its rollback
    // has freed the row: a NOWAIT attempt right now can still find it taken.
    DT_CHECK_CODE(other->Try(3000), Code::kOk);
    DT_CHECK_CODE(other->Release(), Code::kOk);
  }
}

// dlock.h: "Row locks: always 0" -- a counter bumped inside the lock's
// transaction would be undone by the rollback it should survive (measured:
// an earlier fence=1 option handed the same token out again after Rollback
// and after the holder's connection died). Use a lease for a token.
TEST_CASE("row: the token is always 0; every acquisition has a new owner") {
  auto c1 = OpenClient();
  auto c2 = OpenClient();
  const std::string key = kPrefix + "token";
  auto a = OpenLock(c1, key, "row");
  auto b = OpenLock(c2, key, "row");
  std::vector<std::string> owners;
  for (int i = 0; i < 3; ++i) {
    DT_REQUIRE_CODE(a->Try(0), Code::kOk);
    CHECK(a->token() == 0);
    owners.push_back(a->owner());
    DT_REQUIRE_CODE(i == 1 ? a->Rollback() : a->Release(), Code::kOk);
    DT_REQUIRE_CODE(b->Try(0), Code::kOk);
    CHECK(b->token() == 0);
    owners.push_back(b->owner());
    DT_REQUIRE_CODE(b->Release(), Code::kOk);
  }
  for (size_t i = 0; i < owners.size(); ++i)
    for (size_t j = i + 1; j < owners.size(); ++j) CHECK(owners[i] != owners[j]);
  // A lease on the same name is a different lock, with tokens.
  auto lease = OpenLock(c1, key, "lease");
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  DT_REQUIRE_CODE(lease->Try(0), Code::kOk);
  CHECK(lease->token() > 0);
  DT_CHECK_CODE(lease->Release(), Code::kOk);
  DT_CHECK_CODE(a->Release(), Code::kOk);
}

TEST_CASE("row: the suite runs in the dialect it was asked for; a waiter holds with the session's own lock wait") {
  // DLOCK_TEST_DIALECT forces one (ctest's *_mysql variants); otherwise the
  // server's version picks it.
  const char* forced = getenv("DLOCK_TEST_DIALECT");
  auto c1 = OpenClient();
  auto c2 = OpenClient();
  CHECK(std::string(c1->impl()->sql().dialect) ==
        (forced != nullptr && forced[0] != '\0' ? forced : "mariadb"));
  Admin admin;
  BizTable biz(admin, kPrefix + "biz_wait");
  const std::string key = kPrefix + "session_wait";
  auto a = OpenLock(c1, key, "row");
  auto b = OpenLock(c2, key, "row");
  DT_REQUIRE_CODE(a->Try(0), Code::kOk);
  std::atomic<int> got{-100}, done{-100};
  std::thread waiter([&] {
    // Long enough that the MySQL dialect waits by the session's
    // innodb_lock_wait_timeout, which must be given back before the
    // caller's statements run on that session.
    dlock::Status s = b->Try(5000);
    got = static_cast<int>(s.code());
    if (!s.ok()) return;
    int64_t affected = -1;
    const std::string sql = "INSERT INTO `" + biz.name +
                            "` (id, v) VALUES (1, @@session.innodb_lock_wait_timeout)";
    dlock::Status e = b->Exec(sql, {}, &affected);
    done = e.ok() ? static_cast<int>(b->Release().code()) : -1;
  });
  // The waiter is past its first (NOWAIT) attempt and waits on the server.
  CHECK_FALSE(PollUntil(Clock::now() + std::chrono::milliseconds(1300), [&] { return got != -100; }));
  DT_CHECK_CODE(a->Release(), Code::kOk);
  waiter.join();
  CHECK(got == static_cast<int>(Code::kOk));
  CHECK(done == static_cast<int>(Code::kOk));
  CHECK(admin.Scalar("SELECT v FROM `" + biz.name + "` WHERE id = 1") ==
        admin.Scalar("SELECT @@global.innodb_lock_wait_timeout"));
}
