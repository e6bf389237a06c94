// core_retry: RunIdempotent (core/src/retry.h) over fake connections with
// scripted faults. No database: every path a dropped connection, a deadlock
// or a cancel can take is driven on cue, as LevelDB tests recovery through
// an Env that fails when told to.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <errmsg.h>
#include <mysqld_error.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "retry.h"

using dlock::Clock;
using dlock::Code;
using dlock::ExecResult;
using dlock::Param;
using dlock::SqlConn;
using dlock::Status;

namespace {

// A connection whose statements fail as scripted: each Exec takes the next
// errno (0 = success). A connection error breaks it, as with Conn, and a
// broken one fails every later statement with 2006 before sending. A galera
// one is also broken by a node error (1047/1180), as Conn is on Galera.
class FakeConn : public SqlConn {
 public:
  FakeConn(std::string name, std::vector<unsigned> script, bool galera = false)
      : name_(std::move(name)), script_(script.begin(), script.end()), galera_(galera) {}
  Status Exec(const std::string& sql, const std::vector<Param>&, ExecResult* out) override {
    sent_.push_back(sql);
    if (broken_) return Fail(CR_SERVER_GONE_ERROR);
    unsigned err = script_.empty() ? 0 : script_.front();
    if (!script_.empty()) script_.pop_front();
    if (err != 0) return Fail(err);
    out->affected = 1;
    return Status::OK();
  }
  Status Query(const std::string& sql) override {
    ExecResult r;
    return Exec(sql, {}, &r);
  }
  bool broken() const override { return broken_; }
  void Break() { broken_ = true; }
  const std::string& name() const { return name_; }
  int execs() const { return static_cast<int>(sent_.size()); }

 private:
  Status Fail(unsigned err) {
    if (dlock::IsConnectionError(err) || (galera_ && dlock::IsNodeError(err))) broken_ = true;
    return Status(dlock::ClassifyError(err), name_ + " failed (" + std::to_string(err) + ")",
                  static_cast<int>(err));
  }
  std::string name_;
  std::deque<unsigned> script_;
  std::vector<std::string> sent_;
  bool galera_;
  bool broken_ = false;
};

// Hands out the given connections in turn; fails with kPool when none is
// left (as the pool does when its wait runs out).
class FakeSource : public dlock::ConnSource {
 public:
  explicit FakeSource(std::vector<FakeConn*> conns) : conns_(conns.begin(), conns.end()) {}
  Status Fresh(SqlConn** out) override {
    ++calls;
    if (conns_.empty()) return none_left;
    *out = conns_.front();
    conns_.pop_front();
    return Status::OK();
  }
  int calls = 0;
  Status none_left = Status(Code::kPool, "no connection left");

 private:
  std::deque<FakeConn*> conns_;
};

// One call of RunIdempotent, with what every attempt saw.
struct Run {
  dlock::RetryPolicy policy;
  std::vector<std::string> used;  // the connection of each attempt
  std::vector<bool> reruns;       // its rerun flag
  std::vector<int> sleeps;        // the sleep(n) calls after 1213

  Run() : policy("test", Clock::now() + std::chrono::hours(1)) {
    policy.sleep = [this](int n) { sleeps.push_back(n); };
  }
  Status Go(SqlConn* preferred, dlock::ConnSource* fresh) {
    return dlock::RunIdempotent(preferred, fresh, policy, [this](SqlConn& c, bool rerun) {
      used.push_back(static_cast<FakeConn&>(c).name());
      reruns.push_back(rerun);
      ExecResult r;
      return c.Exec("UPDATE t SET x = 1", {}, &r);
    });
  }
};

using Names = std::vector<std::string>;
using Flags = std::vector<bool>;

}  // namespace

TEST_CASE("drop before send (2006): re-run on a fresh connection, flagged as a re-run") {
  FakeConn own("own", {CR_SERVER_GONE_ERROR});
  FakeConn f1("f1", {});
  FakeSource src({&f1});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.ok());
  CHECK(run.used == Names{"own", "f1"});
  CHECK(run.reruns == Flags{false, true});
  CHECK(src.calls == 1);
  CHECK(own.broken());
  CHECK(run.sleeps.empty());
}

TEST_CASE("drop after send (2013): re-run on a fresh connection, flagged as a re-run") {
  FakeConn f1("f1", {CR_SERVER_LOST});
  FakeConn f2("f2", {});
  FakeSource src({&f1, &f2});
  Run run;
  Status s = run.Go(nullptr, &src);
  CHECK(s.ok());
  CHECK(run.used == Names{"f1", "f2"});
  CHECK(run.reruns == Flags{false, true});
  CHECK(src.calls == 2);
}

TEST_CASE("1213 then success: same connection, one jittered sleep, not a re-run after a drop") {
  FakeConn own("own", {ER_LOCK_DEADLOCK});
  FakeSource src({});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.ok());
  CHECK(run.used == Names{"own", "own"});
  CHECK(run.reruns == Flags{false, false});
  CHECK(run.sleeps == std::vector<int>{0});
  CHECK(src.calls == 0);
}

TEST_CASE("1213 on a pool connection: kept for the re-run, not borrowed again") {
  FakeConn f1("f1", {ER_LOCK_DEADLOCK, ER_LOCK_DEADLOCK});
  FakeSource src({&f1});
  Run run;
  Status s = run.Go(nullptr, &src);
  CHECK(s.ok());
  CHECK(run.used == Names{"f1", "f1", "f1"});
  CHECK(run.sleeps == std::vector<int>{0, 1});
  CHECK(src.calls == 1);
}

TEST_CASE("1213 kMaxDeadlocks + 1 times: kMaxDeadlocks re-runs, then the 1213 itself") {
  static_assert(dlock::kMaxDeadlocks == 20, "Galera's certification conflicts need room");
  FakeConn own("own", std::vector<unsigned>(dlock::kMaxDeadlocks + 1, ER_LOCK_DEADLOCK));
  FakeSource src({});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kDb);
  CHECK(s.server_errno() == ER_LOCK_DEADLOCK);
  CHECK(own.execs() == dlock::kMaxDeadlocks + 1);
  std::vector<int> want;
  for (int i = 0; i < dlock::kMaxDeadlocks; ++i) want.push_back(i);
  CHECK(run.sleeps == want);
  CHECK(src.calls == 0);
}

TEST_CASE("drop past the deadline: kUnknown for 2013 (it may have run), the error for 2006") {
  SUBCASE("2013") {
    FakeConn own("own", {CR_SERVER_LOST});
    FakeSource src({});
    Run run;
    run.policy.retry_until = Clock::now() - std::chrono::milliseconds(1);
    Status s = run.Go(&own, &src);
    CHECK(s.code() == Code::kUnknown);
    CHECK(s.server_errno() == CR_SERVER_LOST);
    CHECK(s.message().find("test: ") == 0);
    CHECK(own.execs() == 1);
    CHECK(src.calls == 0);
  }
  SUBCASE("2006") {
    FakeConn own("own", {CR_SERVER_GONE_ERROR});
    FakeSource src({});
    Run run;
    run.policy.retry_until = Clock::now() - std::chrono::milliseconds(1);
    Status s = run.Go(&own, &src);
    CHECK(s.code() == Code::kConnect);
    CHECK(s.server_errno() == CR_SERVER_GONE_ERROR);
    CHECK(own.execs() == 1);
    CHECK(src.calls == 0);
  }
}

TEST_CASE("the third dropped connection ends the call") {
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", {CR_SERVER_LOST});
  FakeConn f2("f2", {CR_SERVER_LOST});
  FakeConn f3("f3", {});
  FakeSource src({&f1, &f2, &f3});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kUnknown);
  CHECK(run.used == Names{"own", "f1", "f2"});
  CHECK(run.reruns == Flags{false, true, true});
  CHECK(src.calls == 2);
  CHECK(f3.execs() == 0);
}

TEST_CASE("a broken preferred connection is skipped: a fresh one runs the first attempt") {
  FakeConn own("own", {});
  own.Break();
  FakeConn f1("f1", {});
  FakeSource src({&f1});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.ok());
  CHECK(run.used == Names{"f1"});
  CHECK(run.reruns == Flags{false});
  CHECK(own.execs() == 0);
  CHECK(src.calls == 1);
}

TEST_CASE("a re-run after a drop can re-check what the dropped attempt left (release's path)") {
  // As LeaseRelease: the dropped first attempt freed the row; the re-run
  // finds it not ours (0 rows) and, knowing it is a re-run, reads the row.
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", {});
  FakeSource src({&f1});
  dlock::RetryPolicy p("release", Clock::now() + std::chrono::hours(1));
  int rechecks = 0;
  Status s = dlock::RunIdempotent(&own, &src, p, [&](SqlConn& c, bool rerun) {
    ExecResult r;
    Status st = c.Exec("UPDATE t SET owner = '' WHERE owner = ?", {}, &r);
    if (!st.ok() || !rerun) return st;
    ++rechecks;
    return c.Exec("SELECT owner FROM t", {}, &r);
  });
  CHECK(s.ok());
  CHECK(rechecks == 1);
  CHECK(own.execs() == 1);
  CHECK(f1.execs() == 2);
}

TEST_CASE("stop ends the call before a re-run") {
  Run run;
  int asked = 0;
  run.policy.stop = [&] { return ++asked > 0; };
  SUBCASE("after 1213: kCancelled, no sleep") {
    FakeConn own("own", {ER_LOCK_DEADLOCK});
    FakeSource src({});
    Status s = run.Go(&own, &src);
    CHECK(s.code() == Code::kCancelled);
    CHECK(own.execs() == 1);
    CHECK(run.sleeps.empty());
  }
  SUBCASE("after a drop in flight: kUnknown, no fresh connection") {
    FakeConn own("own", {CR_SERVER_LOST});
    FakeConn f1("f1", {});
    FakeSource src({&f1});
    Status s = run.Go(&own, &src);
    CHECK(s.code() == Code::kUnknown);
    CHECK(src.calls == 0);
    CHECK(f1.execs() == 0);
  }
  SUBCASE("after a drop before send: kCancelled") {
    FakeConn own("own", {CR_SERVER_GONE_ERROR});
    FakeSource src({});
    Status s = run.Go(&own, &src);
    CHECK(s.code() == Code::kCancelled);
    CHECK(src.calls == 0);
  }
  CHECK(asked == 1);
}

TEST_CASE("stop is not asked when the first attempt succeeds or fails for good") {
  Run run;
  int asked = 0;
  run.policy.stop = [&] { return ++asked > 0; };
  FakeConn own("own", {ER_DUP_ENTRY});
  FakeSource src({});
  Status s = run.Go(&own, &src);
  CHECK(s.server_errno() == ER_DUP_ENTRY);
  CHECK(asked == 0);
}

TEST_CASE("a non-retryable error comes back at once") {
  FakeConn own("own", {ER_NO_SUCH_TABLE});
  FakeConn f1("f1", {});
  FakeSource src({&f1});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kDb);
  CHECK(s.server_errno() == ER_NO_SUCH_TABLE);
  CHECK(run.used == Names{"own"});
  CHECK(run.sleeps.empty());
  CHECK(src.calls == 0);
  CHECK(!own.broken());
}

TEST_CASE("no connection for a re-run: the source's status comes back") {
  FakeConn own("own", {CR_SERVER_GONE_ERROR});  // never sent
  FakeSource src({});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kPool);
  CHECK(run.used == Names{"own"});
  CHECK(src.calls == 1);
}

TEST_CASE("no connection for a re-run after a drop in flight: kUnknown") {
  FakeConn own("own", {CR_SERVER_LOST});  // may have run
  FakeSource src({});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kUnknown);
  CHECK(s.server_errno() == CR_SERVER_LOST);
  CHECK(run.used == Names{"own"});
  CHECK(src.calls == 1);
}

TEST_CASE("GaveUp: only errors that leave the outcome open become kUnknown") {
  Status lost(Code::kConnect, "lost", CR_SERVER_LOST);
  Status gone(Code::kConnect, "gone", CR_SERVER_GONE_ERROR);
  Status dup(Code::kDb, "dup", ER_DUP_ENTRY);
  CHECK(dlock::GaveUp(lost, "renew").code() == Code::kUnknown);
  CHECK(dlock::GaveUp(lost, "renew").message().find("renew: ") == 0);
  CHECK(dlock::GaveUp(gone, "renew").code() == Code::kConnect);
  CHECK(dlock::GaveUp(dup, "renew").code() == Code::kDb);
}

// Once an attempt was cut off in flight (2013), it may have run: however the
// call ends without a later attempt answering, the outcome is unknown.
TEST_CASE("a drop in flight, then a drop before send, then no connection: kUnknown") {
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", {CR_SERVER_GONE_ERROR});
  FakeSource src({&f1});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kUnknown);
  CHECK(run.used == Names{"own", "f1"});
  CHECK(src.calls == 2);
}

TEST_CASE("a drop in flight, then drops before send up to the limit: kUnknown") {
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", {CR_SERVER_GONE_ERROR});
  FakeConn f2("f2", {CR_SERVER_GONE_ERROR});
  FakeSource src({&f1, &f2});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kUnknown);
  CHECK(s.server_errno() == CR_SERVER_GONE_ERROR);
  CHECK(run.used == Names{"own", "f1", "f2"});
}

TEST_CASE("a drop in flight, then a drop before send, then stop: kUnknown, not kCancelled") {
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", {CR_SERVER_GONE_ERROR});
  FakeSource src({&f1});
  Run run;
  int asked = 0;
  run.policy.stop = [&] { return ++asked > 1; };  // lets the first re-run go
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kUnknown);
  CHECK(asked == 2);
  CHECK(run.used == Names{"own", "f1"});
}

TEST_CASE("a drop in flight, then a re-run that answers: its answer stands") {
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", {0});
  FakeSource src({&f1});
  Run run;
  CHECK(run.Go(&own, &src).ok());
  CHECK(run.reruns == Flags{false, true});
}

TEST_CASE("a drop in flight, then a re-run refused by the server: kUnknown") {
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", {ER_LOCK_WAIT_TIMEOUT});
  FakeSource src({&f1});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kUnknown);
  CHECK(s.server_errno() == ER_LOCK_WAIT_TIMEOUT);
}

TEST_CASE("drops and deadlocks interleaved: a deadlock does not reset the drop count") {
  FakeConn own("own", {CR_SERVER_GONE_ERROR});
  FakeConn f1("f1", {ER_LOCK_DEADLOCK, CR_SERVER_GONE_ERROR});
  FakeConn f2("f2", {CR_SERVER_GONE_ERROR});
  FakeConn f3("f3", {0});
  FakeSource src({&f1, &f2, &f3});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kConnect);  // the third drop ends it; never sent: not unknown
  CHECK(run.used == Names{"own", "f1", "f1", "f2"});
  CHECK(run.sleeps == std::vector<int>{0});
}

// Galera node errors (1047: the node is not in the primary component; 1180:
// it lost it with the commit in flight). Conn gives such a session up, so the
// re-run goes to a fresh connection, which the pool opens on another node of
// a multi-node URL. Past the window of re-runs after drops, a node error still
// gets one, so the outcome is asked of a healthy node rather than left open.
constexpr bool kGalera = true;

TEST_CASE("1180 past the window: one re-run on a fresh connection (another node), which answers") {
  FakeConn own("node3", {ER_ERROR_DURING_COMMIT}, kGalera);
  FakeConn f1("node1", {0}, kGalera);
  FakeSource src({&f1});
  Run run;
  run.policy.retry_until = Clock::now() - std::chrono::milliseconds(1);
  Status s = run.Go(&own, &src);
  CHECK(s.ok());
  CHECK(run.used == Names{"node3", "node1"});
  CHECK(run.reruns == Flags{false, true});  // it may have run: the re-run may look (release's path)
  CHECK(own.broken());
  CHECK(src.calls == 1);
}

TEST_CASE("1180 at the kMaxDrops-th drop: one re-run more, which answers") {
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", {CR_SERVER_GONE_ERROR});
  FakeConn f2("node3", {ER_ERROR_DURING_COMMIT}, kGalera);
  FakeConn f3("node1", {0}, kGalera);
  FakeSource src({&f1, &f2, &f3});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.ok());
  CHECK(run.used == Names{"own", "f1", "node3", "node1"});
}

TEST_CASE("a second node error past the window ends kUnknown, saying the primary component was lost") {
  SUBCASE("1180 then 1180") {
    FakeConn own("node3", {ER_ERROR_DURING_COMMIT}, kGalera);
    FakeConn f1("node1", {ER_ERROR_DURING_COMMIT}, kGalera);
    FakeConn f2("node2", {0}, kGalera);
    FakeSource src({&f1, &f2});
    Run run;
    run.policy.retry_until = Clock::now() - std::chrono::milliseconds(1);
    Status s = run.Go(&own, &src);
    CHECK(s.code() == Code::kUnknown);
    CHECK(s.server_errno() == ER_ERROR_DURING_COMMIT);
    CHECK(s.message().find("test: ") == 0);
    CHECK(s.message().find("primary component (quorum lost) with the statement in flight, too late to "
                           "re-check") != std::string::npos);
    CHECK(run.used == Names{"node3", "node1"});
    CHECK(f2.execs() == 0);  // one re-run past the window, not more
  }
  SUBCASE("1180 then 1047: the first may have run, so still kUnknown") {
    FakeConn own("node3", {ER_ERROR_DURING_COMMIT}, kGalera);
    FakeConn f1("node1", {ER_UNKNOWN_COM_ERROR}, kGalera);
    FakeSource src({&f1});
    Run run;
    run.policy.retry_until = Clock::now() - std::chrono::milliseconds(1);
    Status s = run.Go(&own, &src);
    CHECK(s.code() == Code::kUnknown);
    CHECK(s.server_errno() == ER_UNKNOWN_COM_ERROR);
    CHECK(s.message().find("primary component (quorum lost)") != std::string::npos);
    CHECK(s.message().find("may have run") != std::string::npos);
    CHECK(s.message().find("no later one could re-check") != std::string::npos);
    CHECK(run.used == Names{"node3", "node1"});
  }
}

TEST_CASE("1047 (never ran) is not in doubt: re-run once past the window, then its own error") {
  SUBCASE("the re-run answers") {
    FakeConn own("node3", {ER_UNKNOWN_COM_ERROR}, kGalera);
    FakeConn f1("node1", {0}, kGalera);
    FakeSource src({&f1});
    Run run;
    run.policy.retry_until = Clock::now() - std::chrono::milliseconds(1);
    CHECK(run.Go(&own, &src).ok());
    CHECK(run.used == Names{"node3", "node1"});
  }
  SUBCASE("1047 again: that error, not kUnknown") {
    FakeConn own("node3", {ER_UNKNOWN_COM_ERROR}, kGalera);
    FakeConn f1("node3", {ER_UNKNOWN_COM_ERROR}, kGalera);
    FakeSource src({&f1});
    Run run;
    run.policy.retry_until = Clock::now() - std::chrono::milliseconds(1);
    Status s = run.Go(&own, &src);
    CHECK(s.code() != Code::kUnknown);
    CHECK(s.server_errno() == ER_UNKNOWN_COM_ERROR);
    CHECK(src.calls == 1);
  }
  SUBCASE("no other node to go to: the source's error, not kUnknown") {
    FakeConn own("node3", {ER_UNKNOWN_COM_ERROR}, kGalera);
    FakeSource src({});
    Run run;
    run.policy.retry_until = Clock::now() - std::chrono::milliseconds(1);
    Status s = run.Go(&own, &src);
    CHECK(s.code() == Code::kPool);
    CHECK(src.calls == 1);
  }
}

TEST_CASE("1047 from a server that is not Galera: a plain error, no re-run") {
  FakeConn own("own", {ER_UNKNOWN_COM_ERROR});
  FakeConn f1("f1", {0});
  FakeSource src({&f1});
  Run run;
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kDb);
  CHECK(s.server_errno() == ER_UNKNOWN_COM_ERROR);
  CHECK(src.calls == 0);
  CHECK(!own.broken());
}

// The caller's wait (RetryPolicy::deadline, set by acquire only): past it,
// 1213 is re-run kFreeDeadlocks times, then the call ends with kBusy.
TEST_CASE("1213 past the deadline: the free re-runs, then kBusy (not acquired within the wait)") {
  static_assert(dlock::kFreeDeadlocks == 3, "a brief conflict must not fail a try");
  FakeConn own("own", std::vector<unsigned>(dlock::kMaxDeadlocks + 1, ER_LOCK_DEADLOCK));
  FakeSource src({});
  Run run;
  run.policy.what = "acquire";
  run.policy.deadline = Clock::now() - std::chrono::milliseconds(1);
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kBusy);
  CHECK(s.server_errno() == ER_LOCK_DEADLOCK);
  CHECK_MESSAGE(s.message().find("acquire: not acquired within the wait") == 0, s.message());
  CHECK_MESSAGE(s.message().find("4 attempts") != std::string::npos, s.message());
  CHECK(own.execs() == dlock::kFreeDeadlocks + 1);
  CHECK(run.sleeps == std::vector<int>{0, 1, 2});
  CHECK(src.calls == 0);
}

TEST_CASE("1213 past the deadline: a conflict that ends within the free re-runs still wins") {
  FakeConn own("own", {ER_LOCK_DEADLOCK, ER_LOCK_DEADLOCK, ER_LOCK_DEADLOCK, 0});
  FakeSource src({});
  Run run;
  run.policy.deadline = Clock::now() - std::chrono::milliseconds(1);
  CHECK(run.Go(&own, &src).ok());
  CHECK(own.execs() == 4);
  CHECK(run.sleeps == std::vector<int>{0, 1, 2});
}

TEST_CASE("1213: the deadline passing between re-runs stops the next one") {
  FakeConn own("own", std::vector<unsigned>(dlock::kMaxDeadlocks + 1, ER_LOCK_DEADLOCK));
  FakeSource src({});
  Run run;
  // Time runs out during the sleep before re-run 7 (the policy is read on
  // every re-run): that re-run is made, the next is not.
  run.policy.deadline = Clock::now() + std::chrono::hours(1);
  run.policy.sleep = [&run](int n) {
    run.sleeps.push_back(n);
    if (n == 6) run.policy.deadline = Clock::now() - std::chrono::milliseconds(1);
  };
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kBusy);
  CHECK(own.execs() == 8);
  CHECK(run.sleeps == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
}

TEST_CASE("1213 past the deadline after a drop in flight: kUnknown, not kBusy") {
  FakeConn own("own", {CR_SERVER_LOST});
  FakeConn f1("f1", std::vector<unsigned>(dlock::kMaxDeadlocks + 1, ER_LOCK_DEADLOCK));
  FakeSource src({&f1});
  Run run;
  run.policy.deadline = Clock::now() - std::chrono::milliseconds(1);
  Status s = run.Go(&own, &src);
  CHECK(s.code() == Code::kUnknown);
  CHECK(f1.execs() == dlock::kFreeDeadlocks + 1);
}

TEST_CASE("1213 with no deadline (release, renew, cleanup): every re-run is made") {
  FakeConn own("own", std::vector<unsigned>(dlock::kMaxDeadlocks, ER_LOCK_DEADLOCK));
  FakeSource src({});
  dlock::RetryPolicy p("release", Clock::now() - std::chrono::milliseconds(1));
  CHECK(p.deadline == Clock::time_point::max());
  p.sleep = [](int) {};
  Status s = dlock::RunIdempotent(&own, &src, p, [](SqlConn& c, bool) {
    ExecResult r;
    return c.Exec("DELETE FROM t WHERE owner = ?", {}, &r);
  });
  CHECK(s.ok());
  CHECK(own.execs() == dlock::kMaxDeadlocks + 1);
}

TEST_CASE("1213 past the deadline with the real sleeps: a try with no wait ends in ms, not ~1 s") {
  FakeConn own("own", std::vector<unsigned>(dlock::kMaxDeadlocks + 1, ER_LOCK_DEADLOCK));
  FakeSource src({});
  dlock::RetryPolicy p("acquire", Clock::now());
  p.deadline = Clock::now();  // Try(0)
  const auto t0 = Clock::now();
  Status s = dlock::RunIdempotent(&own, &src, p, [](SqlConn& c, bool) {
    ExecResult r;
    return c.Exec("INSERT", {}, &r);
  });
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  CHECK(s.code() == Code::kBusy);
  // 3 sleeps of at most 2 + 4 + 8 ms; the 20 of before slept ~0.8 s.
  CHECK_MESSAGE(ms < 300, "took " << ms << " ms");
}

TEST_CASE("no connection to be had, its connect lost in the handshake (2013): the connect's error, not an unknown outcome") {
  // A multi-host URL's nodes that accept and never greet: the connect fails
  // with 2013, which after a statement would mean "may have run"; here no
  // statement was sent.
  FakeSource src({});
  src.none_left = Status(Code::kConnect,
                         "cannot connect: reading initial communication packet (2013)",
                         CR_SERVER_LOST);
  Run run;
  Status s = run.Go(nullptr, &src);
  CHECK(s.code() == Code::kConnect);
  CHECK(s.server_errno() == static_cast<int>(CR_SERVER_LOST));
  CHECK(run.used.empty());
  // After an attempt cut off in flight, the same failure leaves the outcome
  // unknown: that attempt may have run.
  FakeConn own("own", {CR_SERVER_LOST});
  FakeSource src2({});
  src2.none_left = src.none_left;
  Run run2;
  s = run2.Go(&own, &src2);
  CHECK(s.code() == Code::kUnknown);
  CHECK(run2.used == Names{"own"});
}

TEST_CASE("the sleeps between re-runs after 1213: the plain schedule, and an acquire's, whose first re-run is at once") {
  // The plain schedule doubles from 1-2 ms up to 32-64 ms.
  CHECK(dlock::JitterRangeMs(0) == std::pair<int, int>{1, 2});
  CHECK(dlock::JitterRangeMs(1) == std::pair<int, int>{2, 4});
  CHECK(dlock::JitterRangeMs(5) == std::pair<int, int>{32, 64});
  CHECK(dlock::JitterRangeMs(19) == std::pair<int, int>{32, 64});
  // An acquire's first re-run is at once (a Galera certification conflict
  // with the release it saw: retry.h), then the plain schedule from its start.
  CHECK(dlock::AcquireRerunRangeMs(0) == std::pair<int, int>{0, 0});
  CHECK(dlock::AcquireRerunRangeMs(1) == std::pair<int, int>{1, 2});
  CHECK(dlock::AcquireRerunRangeMs(2) == std::pair<int, int>{2, 4});
  CHECK(dlock::AcquireRerunRangeMs(6) == std::pair<int, int>{32, 64});
}
