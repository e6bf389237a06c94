// dlock benchmark: figures and ratios against baselines measured in the same
// run, on the same server (never a timed unit test).
//
//   dlock_bench URL [--seconds S] [--procs P] [--threads T] [--iters N]
//
// (a) floor: the bare SQL of one acquire + release through Connector/C
//     (the article's INSERT + DELETE; BEGIN, SELECT .. FOR UPDATE, COMMIT)
// (b) dlock uncontended acquire + release, lease and row, as a ratio to (a)
// (c) one key, P*T contenders in P processes, 20 ms inside, 20 ms outside:
//     throughput vs the 1/0.020 s limit, handoff p50/p99, fairness,
//     statements per acquisition; the article's 100 ms-polling class first,
//     as the baseline
// (d) the same for the row lock; in (d) also a prototype that waits for
//     the wake-up name and acquires in one statement (WaitAcquireContender)
//     (on a throwaway server, DLOCK_BENCH_THROWAWAY=1, (d) also times the
//     lease with innodb_flush_log_at_trx_commit=2, set globally and put back:
//     the share of a handoff that is the redo log's flush)
// (e) a handoff in one durable commit (issue 22, goal 4): dlock's two-commit
//     handoff (its release, then the waiter's acquire, the core's statements
//     sent bare) against a prototype written here (the waiter's claim, the
//     release hands the row to the oldest live claim), in alternating rounds;
//     and a probe of waking the next holder before the release is durable
// (f) where an uncontended cycle's time goes (issue 22, goal 3): server time
//     per statement and in its Commit stage (performance_schema; skipped
//     when the server runs without it), client CPU per cycle (getrusage)
//
// --only LETTERS runs those sections, e.g. "ae" ((a) includes (b), (c)
// includes (d)); without --only: (a) to (e), and (f) when the server runs
// performance_schema. (f) needs performance_schema's stage and statement
// instruments on: with DLOCK_BENCH_THROWAWAY=1 (bench/run.sh, on its own
// server) it turns them on (a global setting, left so) and also times the
// cycles with innodb_flush_log_at_trx_commit=2, set globally and put back;
// on any other server it runs only if they are already on.
//
// Environment, for a closer look: DLOCK_BENCH_ROWS (rows whose name holds
// it), DLOCK_BENCH_SCENARIOS ("c1,dp": (c)/(d) in 1 process / P processes),
// DLOCK_BENCH_HOLDER (the dlock rows' `holder`, e.g. "lock": every thread's
// lock object its own holder, as the Go binding's are; they share the lock,
// and with it the line and the hand-over, as threads do), DLOCK_BENCH_DUMP
// (a file: every acquisition appended).
#include <dlock/dlock.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dialect.h"  // the core's statements, as its dialect builds them

namespace {

// What the core sends for the default tables (the MariaDB dialect), so that
// what runs bare here is what dlock runs, never a copy that drifts.
const dlock::Statements& CoreSql() {
  static const dlock::Statements s = dlock::OfflineStatements(dlock::ClientOptions{});
  return s;
}

using Clock = std::chrono::steady_clock;

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // same clock in every process
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// This process's CPU time (every thread), for where an uncontended cycle's
// time goes: on this side (the library, Connector/C) or waiting for the server.
double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void SleepMs(double ms) { std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1000))); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "dlock_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Url {
  std::string user, password, host = "127.0.0.1", db;
  unsigned port = 3306;
};

Url ParseUrl(const std::string& url) {
  // Enough for the bench's own raw connections: mysql://user[:pw]@host:port/db
  Url u;
  std::string rest = url.substr(url.find("://") + 3);
  size_t at = rest.find('@');
  if (at != std::string::npos) {
    std::string ui = rest.substr(0, at);
    size_t c = ui.find(':');
    u.user = ui.substr(0, c);
    if (c != std::string::npos) u.password = ui.substr(c + 1);
    rest = rest.substr(at + 1);
  }
  size_t slash = rest.find('/');
  std::string hp = rest.substr(0, slash);
  u.db = rest.substr(slash + 1);
  u.db = u.db.substr(0, u.db.find('?'));
  size_t c = hp.rfind(':');
  u.host = hp.substr(0, c);
  if (c != std::string::npos) u.port = static_cast<unsigned>(std::atoi(hp.c_str() + c + 1));
  return u;
}

// ---- raw Connector/C, for the floor and the article's class -------------

class Raw {
 public:
  explicit Raw(const Url& u) {
    m_ = mysql_init(nullptr);
    if (!mysql_real_connect(m_, u.host.c_str(), u.user.c_str(), u.password.c_str(), u.db.c_str(), u.port,
                            nullptr, 0))
      Die(std::string("connect: ") + mysql_error(m_));
  }
  ~Raw() {
    for (MYSQL_STMT* s : stmts_) mysql_stmt_close(s);
    mysql_close(m_);
  }
  void Query(const char* sql) {
    ++statements;
    if (mysql_query(m_, sql) != 0) Die(std::string(sql) + ": " + mysql_error(m_));
    MYSQL_RES* r = mysql_store_result(m_);
    if (r) mysql_free_result(r);
  }
  MYSQL_STMT* Prepare(const char* sql) {
    MYSQL_STMT* st = mysql_stmt_init(m_);
    if (mysql_stmt_prepare(st, sql, std::strlen(sql)) != 0) Die(std::string(sql) + ": " + mysql_stmt_error(st));
    stmts_.push_back(st);
    return st;
  }
  // Binds params to st's markers as strings; params and the returned binds
  // are kept until the execute.
  static std::vector<MYSQL_BIND> BindStrings(MYSQL_STMT* st, const std::vector<std::string>& params) {
    std::vector<MYSQL_BIND> b(params.size());
    if (params.empty()) return b;
    for (size_t i = 0; i < params.size(); ++i) {
      std::memset(&b[i], 0, sizeof b[i]);
      b[i].buffer_type = MYSQL_TYPE_STRING;
      b[i].buffer = const_cast<char*>(params[i].data());
      b[i].buffer_length = params[i].size();
    }
    mysql_stmt_bind_param(st, b.data());
    return b;
  }
  // Runs st with string params; returns errno (0 = ok). Fetches any result.
  unsigned Exec(MYSQL_STMT* st, const std::vector<std::string>& params, uint64_t* affected = nullptr) {
    ++statements;
    const std::vector<MYSQL_BIND> bound = BindStrings(st, params);
    if (mysql_stmt_execute(st) != 0) return mysql_stmt_errno(st);
    if (mysql_stmt_field_count(st) > 0) {
      mysql_stmt_store_result(st);
      mysql_stmt_free_result(st);
    }
    if (affected) *affected = mysql_stmt_affected_rows(st);
    return 0;
  }
  // Runs st and returns its first row's first column ("NULL" for NULL,
  // "" for no row); dies on an error.
  std::string Fetch(MYSQL_STMT* st, const std::vector<std::string>& params) {
    ++statements;
    const std::vector<MYSQL_BIND> bound = BindStrings(st, params);
    if (mysql_stmt_execute(st) != 0) Die(std::string("fetch: ") + mysql_stmt_error(st));
    char buf[512];
    unsigned long n = 0;
    my_bool is_null = 0;
    MYSQL_BIND out;
    std::memset(&out, 0, sizeof out);
    out.buffer_type = MYSQL_TYPE_STRING;
    out.buffer = buf;
    out.buffer_length = sizeof buf;
    out.length = &n;
    out.is_null = &is_null;
    mysql_stmt_bind_result(st, &out);
    mysql_stmt_store_result(st);
    std::string v;
    int rc = mysql_stmt_fetch(st);
    if (rc == 0 || rc == MYSQL_DATA_TRUNCATED) v = is_null ? "NULL" : std::string(buf, std::min<size_t>(n, sizeof buf));
    mysql_stmt_free_result(st);
    return v;
  }
  MYSQL* handle() { return m_; }
  uint64_t statements = 0;

 private:
  MYSQL* m_;
  std::vector<MYSQL_STMT*> stmts_;
};

void RawSetup(const Url& u) {
  Raw r(u);
  // The article's tables (section 3.1, 4.1), beside dlock's.
  r.Query("CREATE TABLE IF NOT EXISTS bench_article_lock (id BIGINT NOT NULL AUTO_INCREMENT, "
          "lock_key VARCHAR(192) NOT NULL, owner VARCHAR(128) NOT NULL, expire_time DATETIME NOT NULL, "
          "create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (id), "
          "UNIQUE KEY uk_lock_key (lock_key), KEY idx_expire_time (expire_time)) ENGINE=InnoDB");
  r.Query("CREATE TABLE IF NOT EXISTS bench_fixed_lock (id INT NOT NULL, lock_name VARCHAR(128) NOT NULL, "
          "updated_time DATETIME DEFAULT NULL, PRIMARY KEY (id)) ENGINE=InnoDB");
  r.Query("INSERT IGNORE INTO bench_fixed_lock (id, lock_name) VALUES (1, 'global_lock')");
  r.Query("DELETE FROM bench_article_lock");
  // (e)'s prototype: a waiter's short-lived claim on a key of dlock's table.
  r.Query("CREATE TABLE IF NOT EXISTS bench_handoff_claim (lock_key VARBINARY(255) NOT NULL, "
          "claimant VARBINARY(64) NOT NULL, claimed_at DATETIME(6) NOT NULL, expire_time DATETIME(6) NOT NULL, "
          "PRIMARY KEY (lock_key, claimant), KEY by_age (lock_key, claimed_at)) ENGINE=InnoDB");
  r.Query("DELETE FROM bench_handoff_claim");
}

// ---- (a)/(b): uncontended ----------------------------------------------

// Every single durable statement's time (one commit each), for the spread
// of a commit on this machine: the physical floor of a handoff's tail.
std::vector<double> g_commit_ms;

double FloorLease(const Url& u, int n) {
  Raw r(u);
  MYSQL_STMT* ins = r.Prepare("INSERT INTO bench_article_lock (lock_key, owner, expire_time) "
                              "VALUES (?, ?, DATE_ADD(NOW(), INTERVAL 30 SECOND))");
  MYSQL_STMT* del = r.Prepare("DELETE FROM bench_article_lock WHERE lock_key = ? AND owner = ?");
  double t0 = NowMs();
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> p = {"bench:floor", "owner-" + std::to_string(i)};
    double a = NowMs();
    if (r.Exec(ins, p) != 0) Die("floor insert failed");
    double b = NowMs();
    if (r.Exec(del, p) != 0) Die("floor delete failed");
    g_commit_ms.push_back(b - a);
    g_commit_ms.push_back(NowMs() - b);
  }
  return (NowMs() - t0) / n;
}

// dlock's own two lease statements (the core's dialect builds them, for the
// default table), sent bare through Connector/C: what the statements cost
// without the library around them.
double FloorDlockStatements(const Url& u, int n) {
  Raw r(u);
  MYSQL_STMT* acq = r.Prepare(CoreSql().lease.acquire.c_str());
  MYSQL_STMT* rel = r.Prepare(CoreSql().lease.release.c_str());
  double t0 = NowMs();
  for (int i = 0; i < n; ++i) {
    const std::string key = "bench:floor:dlock", owner = "owner-" + std::to_string(i);
    uint64_t a = 0;
    if (r.Exec(acq, {key, owner, "30000000"}, &a) != 0 || a == 0) Die("bare dlock acquire failed");
    if (r.Exec(rel, {key, owner}, &a) != 0 || a != 1) Die("bare dlock release failed");
  }
  return (NowMs() - t0) / n;
}

double FloorRow(const Url& u, int n) {
  Raw r(u);
  MYSQL_STMT* sel = r.Prepare("SELECT id FROM bench_fixed_lock WHERE id = 1 FOR UPDATE");
  double t0 = NowMs();
  for (int i = 0; i < n; ++i) {
    r.Query("BEGIN");
    if (r.Exec(sel, {}) != 0) Die("floor select failed");
    r.Query("COMMIT");
  }
  return (NowMs() - t0) / n;
}

double DlockUncontended(dlock_client* c, const char* mode, int n) {
  dlock_error e;
  dlock_config* cfg;
  dlock_config_new(&cfg, &e);
  dlock_config_set(cfg, "mode", mode, &e);
  dlock_lock* l;
  std::string key = std::string("bench:uncontended:") + mode;
  if (dlock_open(&l, c, key.data(), key.size(), cfg, &e) != DLOCK_OK) Die(e.message);
  // One warm-up round: prepares the statements and creates the row.
  if (dlock_try(l, 0, &e) != DLOCK_OK || dlock_release(l, &e) != DLOCK_OK) Die(e.message);
  double t0 = NowMs();
  for (int i = 0; i < n; ++i) {
    if (dlock_try(l, 0, &e) != DLOCK_OK) Die(std::string("try: ") + e.message);
    if (dlock_release(l, &e) != DLOCK_OK) Die(std::string("release: ") + e.message);
  }
  double per = (NowMs() - t0) / n;
  dlock_close(l);
  dlock_config_free(cfg);
  return per;
}

// ---- (c)/(d): contention ---------------------------------------------------

struct Rec {
  double try_start, acquired, release_start;
  int contender, proc;
};

struct ProcResult {
  std::vector<Rec> recs;
  uint64_t statements = 0;
};

enum class Kind { kArticle, kGetLock, kForUpdate, kLease, kRow, kTwoCommit, kWaitAcquire, kOneCommit, kOneCommitEarly };

// Scenario knobs shared by every contender.
struct Scenario {
  double inside_ms = 20, outside_ms = 20;
  const char* fair = nullptr;  // dlock's fair option, when set
};

// One contender of the article's class: INSERT, on a duplicate sleep
// retry_interval (100 ms) and retry; DELETE by key and owner.
void ArticleContender(const Url& u, const Scenario& sc, int id, int proc, double end, std::vector<Rec>* out,
                      uint64_t* stmts) {
  Raw r(u);
  MYSQL_STMT* ins = r.Prepare("INSERT INTO bench_article_lock (lock_key, owner, expire_time) "
                              "VALUES (?, ?, DATE_ADD(NOW(), INTERVAL 30 SECOND))");
  MYSQL_STMT* del = r.Prepare("DELETE FROM bench_article_lock WHERE lock_key = ? AND owner = ?");
  std::mt19937_64 rng(std::random_device{}());
  while (NowMs() < end) {
    std::vector<std::string> p = {"bench:contended", "o" + std::to_string(id) + "-" + std::to_string(rng())};
    bool got = false;
    const double t0 = NowMs();
    double deadline = NowMs() + 10000;
    while (NowMs() < deadline && NowMs() < end + 1000) {
      unsigned err = r.Exec(ins, p);
      if (err == 0) { got = true; break; }
      // The class catches the duplicate-key error; under this much contention
      // InnoDB also reports deadlocks (1213) on the unique index: same retry.
      if (err != ER_DUP_ENTRY && err != ER_LOCK_DEADLOCK) Die("article insert failed: " + std::to_string(err));
      SleepMs(100);
    }
    if (!got) continue;
    double acq = NowMs();
    SleepMs(sc.inside_ms);
    double rs = NowMs();
    r.Exec(del, p);
    out->push_back(Rec{t0, acq, rs, id, proc});
    if (sc.outside_ms > 0) SleepMs(sc.outside_ms);
  }
  *stmts += r.statements;
}

// The server's own primitives, for reference: GET_LOCK (no durability, a
// FIFO queue on the server) and a row lock (BEGIN; SELECT .. FOR UPDATE;
// COMMIT).
void RawContender(const Url& u, Kind kind, const Scenario& sc, int id, int proc, double end,
                  std::vector<Rec>* out, uint64_t* stmts) {
  Raw r(u);
  MYSQL_STMT* sel = kind == Kind::kForUpdate
                        ? r.Prepare("SELECT id FROM bench_fixed_lock WHERE id = 1 FOR UPDATE")
                        : r.Prepare("SELECT GET_LOCK('bench:contended', 10)");
  while (NowMs() < end) {
    const double t0 = NowMs();
    if (kind == Kind::kForUpdate) r.Query("BEGIN");
    if (r.Exec(sel, {}) != 0) continue;
    double acq = NowMs();
    SleepMs(sc.inside_ms);
    double rs = NowMs();
    r.Query(kind == Kind::kForUpdate ? "COMMIT" : "DO RELEASE_LOCK('bench:contended')");
    out->push_back(Rec{t0, acq, rs, id, proc});
    if (sc.outside_ms > 0) SleepMs(sc.outside_ms);
  }
  *stmts += r.statements;
}

// ---- (e): a handoff in one durable commit, against dlock's two ------------

// The wake-up name both handoffs use: GET_LOCK, as dlock uses it (a hint
// for waiters; the lease row decides).
const char* const kHandoffWake = "bench:handoff:wake";
const char* const kTtlUs = "30000000";
const char* const kClaimUs = "2000000";  // the claim window

// The loop of the bare contenders: acquire(owner) takes the key (false: it
// gave up at the end of the run), the key is held sc.inside_ms, release(owner)
// gives it back, then sc.outside_ms outside.
template <class Acquire, class Release>
void BareLoop(const Scenario& sc, int id, int proc, double end, std::vector<Rec>* out, Acquire acquire,
              Release release) {
  uint64_t n = 0;
  while (NowMs() < end) {
    const std::string owner = "t" + std::to_string(id) + "-" + std::to_string(n++);
    const double t0 = NowMs();
    if (!acquire(owner)) break;
    const double acquired = NowMs();
    if (sc.inside_ms > 0) SleepMs(sc.inside_ms);
    const double rs = NowMs();
    release(owner);
    out->push_back(Rec{t0, acquired, rs, id, proc});
    if (sc.outside_ms > 0) SleepMs(sc.outside_ms);
  }
}

// dlock's two-commit handoff, its statements sent bare and driven as
// lease_scheme.cc drives them: try the acquire; when busy, wait for the
// holder's wake-up name (GET_LOCK) and try again; a holder that came
// through the name gives it up inside its release statement
// (release_and_wake), so the next waiter is woken while that commit is
// flushed and its acquire (the second commit) queues on the row.
void TwoCommitContender(const Url& u, const Scenario& sc, int id, int proc, double end, std::vector<Rec>* out,
                        uint64_t* stmts) {
  Raw r(u);
  const dlock::LeaseSql& q = CoreSql().lease;
  MYSQL_STMT* acq = r.Prepare(q.acquire.c_str());
  MYSQL_STMT* rel = r.Prepare(q.release.c_str());
  MYSQL_STMT* rel_wake = r.Prepare(q.release_and_wake.c_str());
  MYSQL_STMT* get_name = r.Prepare(q.get_name.c_str());
  const std::string key = "bench:handoff:two";
  bool has_name = false;
  auto acquire = [&](const std::string& owner) {
    while (NowMs() < end + 1000) {
      uint64_t a = 0;
      if (r.Exec(acq, {key, owner, kTtlUs}, &a) != 0) Die("two-commit acquire failed");
      if (a > 0) return true;
      if (!has_name) has_name = r.Fetch(get_name, {kHandoffWake, "2000000"}) == "1";
      else SleepMs(1);  // holding the name while busy: the holder did not come through it; poll
    }
    return false;
  };
  auto release = [&](const std::string& owner) {
    uint64_t a = 0;
    if (has_name) {
      if (r.Exec(rel_wake, {kHandoffWake, key, owner}, &a) != 0 || a != 1) Die("two-commit release failed");
      has_name = false;
    } else if (r.Exec(rel, {key, owner}, &a) != 0 || a != 1) {
      Die("two-commit release failed");
    }
  };
  BareLoop(sc, id, proc, end, out, acquire, release);
  *stmts += r.statements;
}

// A prototype (not in the core): the wake-up wait and the acquire in one
// statement. The waiter's upsert evaluates GET_LOCK on the wake-up name
// while it builds its row, before it touches the lock row, so once the
// holder's release gives the name up the same statement goes on to the row
// (queued on its lock until the release commits) with no reply and no new
// statement in between: one client round trip less per handoff than
// TwoCommitContender. Not safe as it stands: the statement's UTC_TIMESTAMP
// is its start, so the expiry it writes and compares with is as old as the
// wait was long (harmless here: waits of ~20 ms against a 30 s ttl).
std::string WaitAcquireSql() {
  const std::string& a = CoreSql().lease.acquire;
  const std::string at = " + INTERVAL ? MICROSECOND, ";
  const size_t i = a.find(at);
  if (i == std::string::npos) Die("wait+acquire prototype: the acquire statement changed shape");
  // params: key, owner, ttl_us, name, timeout_us, then the acquire's own rest (none)
  return a.substr(0, i) + " + INTERVAL ? MICROSECOND + INTERVAL 0 * IFNULL(GET_LOCK(?, ? / 1000000), 0) MICROSECOND, " +
         a.substr(i + at.size());
}

void WaitAcquireContender(const Url& u, const Scenario& sc, int id, int proc, double end, std::vector<Rec>* out,
                          uint64_t* stmts) {
  Raw r(u);
  const dlock::LeaseSql& q = CoreSql().lease;
  MYSQL_STMT* acq = r.Prepare(q.acquire.c_str());
  MYSQL_STMT* wait_acq = r.Prepare(WaitAcquireSql().c_str());
  MYSQL_STMT* rel_wake = r.Prepare(q.release_and_wake.c_str());
  MYSQL_STMT* mine = r.Prepare("SELECT IS_USED_LOCK(?) = CONNECTION_ID()");
  const std::string key = "bench:handoff:waitacq";
  const char* const name = "bench:handoff:waitacq-wake";
  bool has_name = false;  // known to hold the name while the key is busy: poll, do not wait on it
  auto acquire = [&](const std::string& owner) {
    uint64_t a = 0;
    if (r.Exec(acq, {key, owner, kTtlUs}, &a) != 0) Die("wait+acquire: acquire failed");
    while (a == 0 && NowMs() < end + 1000) {
      if (!has_name) {
        if (r.Exec(wait_acq, {key, owner, kTtlUs, name, "2000000"}, &a) != 0) Die("wait+acquire failed");
        // Asked only when it did not win: a winner's release gives the name
        // up anyway (RELEASE_LOCK of a name not held is a no-op), and asking
        // then would put a round trip into the handoff.
        if (a == 0) has_name = r.Fetch(mine, {name}) == "1";
      } else {
        SleepMs(1);  // holding the name while busy: the holder did not come through it; poll
        if (r.Exec(acq, {key, owner, kTtlUs}, &a) != 0) Die("wait+acquire: acquire failed");
      }
    }
    return a > 0;
  };
  auto release = [&](const std::string& owner) {
    uint64_t a = 0;
    if (r.Exec(rel_wake, {name, key, owner}, &a) != 0 || a != 1) Die("wait+acquire: release failed");
    has_name = false;
  };
  BareLoop(sc, id, proc, end, out, acquire, release);
  *stmts += r.statements;
}

// The prototype of a one-commit handoff (not in the core): a waiter
// registers a short-lived claim (its extra commit per contended
// acquisition), and the release hands the lease to the oldest live claim
// in the same statement, so the handoff's path holds one durable commit.
// The waiter learns it from its wake-up and one read. `early`: the wake-up
// is given inside the release statement (before its commit is durable) and
// the waiter reads with a share lock, which returns once the release has
// committed in memory; otherwise (safe) the releaser gives the name up
// after the release's reply, i.e. after the flush.
// Its simplifications all favour it: the handed lease gets the full ttl (a
// real one would grant the claim window and renew: one more commit), a
// claim outlives its acquisition until its window ends, and fencing is a
// plain +1.
void OneCommitContender(const Url& u, const Scenario& sc, bool early, int id, int proc, double end,
                        std::vector<Rec>* out, uint64_t* stmts) {
  Raw r(u);
  const dlock::LeaseSql& q = CoreSql().lease;
  const std::string now = "UTC_TIMESTAMP(6)";
  MYSQL_STMT* acq = r.Prepare(q.acquire.c_str());
  MYSQL_STMT* claim = r.Prepare(("INSERT INTO bench_handoff_claim (lock_key, claimant, claimed_at, expire_time) "
                                 "VALUES (?, ?, " + now + ", " + now + " + INTERVAL ? MICROSECOND) ON DUPLICATE KEY "
                                 "UPDATE claimed_at = VALUES(claimed_at), expire_time = VALUES(expire_time)").c_str());
  const std::string next = "(SELECT claimant FROM bench_handoff_claim WHERE lock_key = ? AND claimant <> ? AND "
                           "expire_time >= " + now + " ORDER BY claimed_at LIMIT 1)";
  const std::string wake = early ? " + 0 * IFNULL(RELEASE_LOCK(?), 0)" : "";
  // Assignment order: owner first; fence and expiry read the new owner.
  MYSQL_STMT* hand = r.Prepare(("UPDATE `distributed_lock` SET owner = COALESCE(" + next + ", ''), "
                                "fence = IF(owner <> '', fence + 1, fence), expire_time = IF((owner <> '')" + wake +
                                ", " + now + " + INTERVAL ? MICROSECOND, '1970-01-01 00:00:00') "
                                "WHERE lock_key = ? AND owner = ?").c_str());
  MYSQL_STMT* read = r.Prepare(early ? "SELECT CONCAT(owner, ':', fence) FROM `distributed_lock` WHERE lock_key = ? "
                                       "LOCK IN SHARE MODE"
                                     : "SELECT CONCAT(owner, ':', fence) FROM `distributed_lock` WHERE lock_key = ?");
  MYSQL_STMT* get_name = r.Prepare(CoreSql().lease.get_name.c_str());
  MYSQL_STMT* drop_name = r.Prepare(CoreSql().lease.release_name.c_str());
  const std::string key = early ? "bench:handoff:one-early" : "bench:handoff:one";
  // The claimant is the owner id of the lease it is handed: one per
  // contender (a fresh one per acquisition would leave claims to skip).
  const std::string me = "c" + std::to_string(id);
  bool has_name = false;
  while (NowMs() < end) {
    const double t0 = NowMs();
    bool got = false, claimed = false;
    std::string passed_for;  // the grant (owner:fence) we last passed the name on for
    while (!got && NowMs() < end + 1000) {
      uint64_t a = 0;
      if (r.Exec(acq, {key, me, kTtlUs}, &a) != 0) Die("one-commit acquire failed");
      if (a > 0) { got = true; break; }
      if (!claimed) {  // the extra commit of a contended acquisition
        if (r.Exec(claim, {key, me, kClaimUs}) != 0) Die("claim failed");
        claimed = true;
      }
      if (!has_name && !(has_name = r.Fetch(get_name, {kHandoffWake, "2000000"}) == "1")) continue;
      // owner:fence, so that one holder's next grant is told from this one
      const std::string grant = r.Fetch(read, {key});
      const std::string owner = grant.substr(0, grant.rfind(':'));
      if (owner == me) { got = true; break; }  // handed to us
      if (owner.empty()) continue;             // free: the acquire takes it
      // Woken for a lease handed to another claim, or given the name by
      // no one (the holder came in without it): pass the name on along the
      // queue, since the new holder may be waiting for it; seeing the same
      // grant again, poll without holding the name.
      r.Exec(drop_name, {kHandoffWake});
      has_name = false;
      if (grant == passed_for) SleepMs(1);
      passed_for = grant;
    }
    if (!got) break;
    const double acquired = NowMs();
    if (sc.inside_ms > 0) SleepMs(sc.inside_ms);
    const double rs = NowMs();
    uint64_t a = 0;
    // Parameters: next's key and releaser, [the name to wake], ttl, key, owner.
    std::vector<std::string> p = {key, me};
    if (early) p.push_back(has_name ? kHandoffWake : "bench:handoff:none");  // a name no one holds: no wake-up
    p.insert(p.end(), {kTtlUs, key, me});
    if (r.Exec(hand, p, &a) != 0 || a != 1) Die("one-commit release failed");
    if (has_name) {
      if (!early) r.Exec(drop_name, {kHandoffWake});  // after the reply: the handoff is durable
      has_name = false;
    }
    out->push_back(Rec{t0, acquired, rs, id, proc});
    if (sc.outside_ms > 0) SleepMs(sc.outside_ms);
  }
  *stmts += r.statements;
}

void DlockContender(dlock_client* c, Kind kind, const Scenario& sc, int id, int proc, double end,
                    std::vector<Rec>* out) {
  dlock_error e;
  dlock_config* cfg;
  dlock_config_new(&cfg, &e);
  dlock_config_set(cfg, "mode", kind == Kind::kRow ? "row" : "lease", &e);
  if (sc.fair != nullptr && dlock_config_set(cfg, "fair", sc.fair, &e) != DLOCK_OK) Die(e.message);
  if (std::getenv("DLOCK_BENCH_HOLDER") != nullptr &&
      dlock_config_set(cfg, "holder", std::getenv("DLOCK_BENCH_HOLDER"), &e) != DLOCK_OK)
    Die(e.message);
  dlock_lock* l;
  const std::string key = "bench:contended";
  if (dlock_open(&l, c, key.data(), key.size(), cfg, &e) != DLOCK_OK) Die(e.message);
  while (NowMs() < end) {
    const double t0 = NowMs();
    int rc = dlock_try(l, 10000, &e);
    if (rc == DLOCK_BUSY) continue;
    if (rc != DLOCK_OK) Die(std::string("try: ") + e.message);
    double acq = NowMs();
    SleepMs(sc.inside_ms);
    double rs = NowMs();
    if (dlock_release(l, &e) != DLOCK_OK) Die(std::string("release: ") + e.message);
    out->push_back(Rec{t0, acq, rs, id, proc});
    if (sc.outside_ms > 0) SleepMs(sc.outside_ms);
  }
  dlock_close(l);
  dlock_config_free(cfg);
}

ProcResult RunProcess(const std::string& url, Kind kind, const Scenario& sc, int proc, int threads, double start,
                      double end) {
  ProcResult res;
  dlock_client* c = nullptr;
  dlock_error e;
  if (kind == Kind::kLease || kind == Kind::kRow) {
    dlock_config* cfg;
    dlock_config_new(&cfg, &e);
    dlock_config_set(cfg, "pool", std::to_string(threads + 4).c_str(), &e);
    if (dlock_client_open(&c, url.c_str(), cfg, &e) != DLOCK_OK) Die(e.message);
    dlock_config_free(cfg);
  }
  std::vector<std::vector<Rec>> per(threads);
  std::vector<uint64_t> stmts(threads, 0);
  while (NowMs() < start) SleepMs(1);
  uint64_t before = 0;
  if (c) dlock_client_counter(c, "statements", &before, &e);
  std::vector<std::thread> ts;
  Url u = ParseUrl(url);
  for (int t = 0; t < threads; ++t) {
    int id = proc * threads + t;
    ts.emplace_back([&, t, id] {
      if (kind == Kind::kArticle) ArticleContender(u, sc, id, proc, end, &per[t], &stmts[t]);
      else if (kind == Kind::kGetLock || kind == Kind::kForUpdate) RawContender(u, kind, sc, id, proc, end, &per[t], &stmts[t]);
      else if (kind == Kind::kTwoCommit) TwoCommitContender(u, sc, id, proc, end, &per[t], &stmts[t]);
      else if (kind == Kind::kWaitAcquire) WaitAcquireContender(u, sc, id, proc, end, &per[t], &stmts[t]);
      else if (kind == Kind::kOneCommit || kind == Kind::kOneCommitEarly)
        OneCommitContender(u, sc, kind == Kind::kOneCommitEarly, id, proc, end, &per[t], &stmts[t]);
      else DlockContender(c, kind, sc, id, proc, end, &per[t]);
    });
  }
  for (auto& t : ts) t.join();
  for (auto& v : per) res.recs.insert(res.recs.end(), v.begin(), v.end());
  if (c) {
    uint64_t after = 0;
    dlock_client_counter(c, "statements", &after, &e);
    res.statements = after - before;
    dlock_client_close(c);
  } else {
    for (uint64_t s : stmts) res.statements += s;
  }
  return res;
}

struct ContendedFigures {
  double throughput_fraction, p50, p99;
  int most, fewest;          // acquisitions per contender
  int proc_most, proc_fewest;  // per process
  double retake;             // next holder == last holder, of all handoffs
  double stmts_per_acq;
  double acq_per_s;          // acquisitions in the window, per second
  int overlaps;
  size_t acquisitions;
  int slow;                  // handoffs > 3x p50
};

ContendedFigures Contend(const std::string& url, Kind kind, const Scenario& sc, int procs, int threads,
                         double seconds) {
  const double start = NowMs() + 1500;  // everyone connected first
  const double end = start + seconds * 1000;
  std::vector<int> fds;
  std::vector<pid_t> pids;
  for (int p = 0; p < procs; ++p) {
    int fd[2];
    if (pipe(fd) != 0) Die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      ProcResult r = RunProcess(url, kind, sc, p, threads, start, end);
      size_t n = r.recs.size();
      if (write(fd[1], &r.statements, sizeof r.statements) < 0 || write(fd[1], &n, sizeof n) < 0 ||
          (n && write(fd[1], r.recs.data(), n * sizeof(Rec)) < 0))
        _exit(3);
      _exit(0);
    }
    close(fd[1]);
    fds.push_back(fd[0]);
    pids.push_back(pid);
  }
  std::vector<Rec> all;
  uint64_t statements = 0;
  auto read_all = [](int fd, void* buf, size_t len) {
    char* p = static_cast<char*>(buf);
    while (len > 0) {
      ssize_t k = read(fd, p, len);
      if (k <= 0) Die("short read from a contender process");
      p += k;
      len -= static_cast<size_t>(k);
    }
  };
  for (int fd : fds) {
    uint64_t s = 0;
    size_t n = 0;
    read_all(fd, &s, sizeof s);
    read_all(fd, &n, sizeof n);
    std::vector<Rec> v(n);
    if (n) read_all(fd, v.data(), n * sizeof(Rec));
    statements += s;
    all.insert(all.end(), v.begin(), v.end());
    close(fd);
  }
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) Die("a contender process failed");
  }
  std::sort(all.begin(), all.end(), [](const Rec& a, const Rec& b) { return a.acquired < b.acquired; });
  ContendedFigures f{};
  std::vector<double> handoff;
  int retakes = 0;
  for (size_t i = 1; i < all.size(); ++i) {
    double h = all[i].acquired - all[i - 1].release_start;
    if (h < 0) ++f.overlaps;  // acquired before the previous holder began to release
    else handoff.push_back(h);
    if (all[i].contender == all[i - 1].contender) ++retakes;
  }
  f.retake = all.size() > 1 ? static_cast<double>(retakes) / (all.size() - 1) : 0;
  std::sort(handoff.begin(), handoff.end());
  auto pct = [&](double q) { return handoff.empty() ? 0.0 : handoff[std::min(handoff.size() - 1, static_cast<size_t>(q * handoff.size()))]; };
  f.p50 = pct(0.50);
  f.p99 = pct(0.99);
  for (double h : handoff)
    if (h > 3 * f.p50) ++f.slow;
  std::vector<int> count(static_cast<size_t>(procs * threads), 0), pcount(static_cast<size_t>(procs), 0);
  size_t in_window = 0;
  for (const Rec& r : all) {
    ++count[static_cast<size_t>(r.contender)];
    ++pcount[static_cast<size_t>(r.proc)];
    if (r.acquired >= start && r.acquired < end) ++in_window;
  }
  f.most = *std::max_element(count.begin(), count.end());
  f.fewest = *std::min_element(count.begin(), count.end());
  f.proc_most = *std::max_element(pcount.begin(), pcount.end());
  f.proc_fewest = *std::min_element(pcount.begin(), pcount.end());
  f.throughput_fraction = sc.inside_ms > 0 ? in_window / seconds / (1000.0 / sc.inside_ms) : 0;
  f.acq_per_s = in_window / seconds;
  f.stmts_per_acq = all.empty() ? 0 : static_cast<double>(statements) / all.size();
  f.acquisitions = all.size();
  if (std::getenv("DLOCK_BENCH_DUMP") != nullptr) {
    // Every acquisition, for a closer look at the slow handoffs.
    FILE* d = std::fopen(std::getenv("DLOCK_BENCH_DUMP"), "a");
    if (d != nullptr) {
      std::fprintf(d, "# kind %d procs %d threads %d outside %.0f start %.3f\n", static_cast<int>(kind), procs, threads,
                   sc.outside_ms, start);
      for (const Rec& r : all)
        std::fprintf(d, "%.3f %.3f %.3f %d %d\n", r.try_start - start, r.acquired - start, r.release_start - start,
                     r.contender, r.proc);
      std::fclose(d);
    }
  }
  return f;
}

// Waking the next holder inside the release statement, before its commit
// is durable: does the waiter see the handover before the flush? A holder
// hands the lease to a probe's claim with the wake-up inside the statement;
// the probe, woken, reads the row with a share lock. Counted: the probe saw
// itself as the holder before the release's reply came back (the server
// replies after the flush: innodb_flush_log_at_trx_commit=1).
void DurabilityProbe(const Url& u, int tries) {
  Raw h(u), pr(u), admin(u);
  const dlock::LeaseSql& q = CoreSql().lease;
  const std::string now = "UTC_TIMESTAMP(6)", key = "bench:handoff:probe", name = "bench:handoff:probe-wake";
  MYSQL_STMT* acq = h.Prepare(q.acquire.c_str());
  MYSQL_STMT* h_name = h.Prepare(q.get_name.c_str());
  MYSQL_STMT* hand = h.Prepare(("UPDATE `distributed_lock` SET owner = COALESCE((SELECT claimant FROM "
                                "bench_handoff_claim WHERE lock_key = ? AND claimant <> ? AND expire_time >= " + now +
                                " ORDER BY claimed_at LIMIT 1), ''), fence = IF(owner <> '', fence + 1, fence), "
                                "expire_time = IF((owner <> '') + 0 * IFNULL(RELEASE_LOCK(?), 0), " + now +
                                " + INTERVAL ? MICROSECOND, '1970-01-01 00:00:00') WHERE lock_key = ? AND owner = ?").c_str());
  MYSQL_STMT* claim = pr.Prepare(("INSERT INTO bench_handoff_claim (lock_key, claimant, claimed_at, expire_time) "
                                  "VALUES (?, ?, " + now + ", " + now + " + INTERVAL ? MICROSECOND) ON DUPLICATE KEY "
                                  "UPDATE claimed_at = VALUES(claimed_at), expire_time = VALUES(expire_time)").c_str());
  MYSQL_STMT* p_name = pr.Prepare(q.get_name.c_str());
  MYSQL_STMT* p_drop = pr.Prepare(q.release_name.c_str());
  MYSQL_STMT* p_read = pr.Prepare("SELECT owner FROM `distributed_lock` WHERE lock_key = ? LOCK IN SHARE MODE");
  MYSQL_STMT* p_rel = pr.Prepare(q.release.c_str());
  MYSQL_STMT* p_unclaim = pr.Prepare("DELETE FROM bench_handoff_claim WHERE lock_key = ? AND claimant = ?");
  MYSQL_STMT* waiting = admin.Prepare("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE 'User lock%'");
  int seen_early = 0, handed = 0;
  std::vector<double> lead, release_ms;
  for (int i = 0; i < tries; ++i) {
    const std::string holder = "probe-holder-" + std::to_string(i), me = "probe-" + std::to_string(i);
    uint64_t a = 0;
    if (h.Exec(acq, {key, holder, kTtlUs}, &a) != 0 || a == 0) Die("probe: holder's acquire failed");
    if (h.Fetch(h_name, {name, "1000000"}) != "1") Die("probe: holder could not take the wake-up name");
    if (pr.Exec(claim, {key, me, kClaimUs}) != 0) Die("probe: claim failed");
    double seen_at = 0;
    std::string seen;
    std::thread t([&] {
      if (pr.Fetch(p_name, {name, "5000000"}) != "1") return;
      seen = pr.Fetch(p_read, {key});
      seen_at = NowMs();
    });
    const double deadline = NowMs() + 5000;  // until the probe waits on the name
    while (admin.Fetch(waiting, {}) == "0" && NowMs() < deadline) SleepMs(0.2);
    const double r0 = NowMs();
    if (h.Exec(hand, {key, holder, name, kTtlUs, key, holder}, &a) != 0 || a != 1) Die("probe: release failed");
    const double ack = NowMs();
    t.join();
    release_ms.push_back(ack - r0);
    if (seen == me) {
      ++handed;
      if (seen_at < ack) ++seen_early;
      lead.push_back(ack - seen_at);
      if (pr.Exec(p_rel, {key, me}, &a) != 0 || a != 1) Die("probe: release by the new holder failed");
    }
    pr.Exec(p_drop, {name});
    pr.Exec(p_unclaim, {key, me});  // a claim left live would be handed the next try's lease
  }
  std::sort(lead.begin(), lead.end());
  std::sort(release_ms.begin(), release_ms.end());
  std::printf("  waking inside the release (before its commit is durable), %d tries: handed over %d, the new\n"
              "  holder saw the handover before the release's reply (sent after the flush) in %d; by %.3f ms\n"
              "  (median; the release took %.3f ms): the wake-up must follow the flush\n",
              tries, handed, seen_early, lead.empty() ? 0.0 : lead[lead.size() / 2],
              release_ms.empty() ? 0.0 : release_ms[release_ms.size() / 2]);
}

void HandoffSection(const std::string& url, double seconds) {
  struct Layout {
    int procs, threads;
  };
  const Layout layouts[] = {{1, 3}, {3, 1}};
  struct Row {
    const char* name;
    Kind kind;
  };
  const Row rows[] = {{"two commits (dlock's statements)", Kind::kTwoCommit},
                      {"one commit (prototype, safe)", Kind::kOneCommit},
                      {"one commit, early wake (unsafe)", Kind::kOneCommitEarly},
                      {"dlock lease (C API)", Kind::kLease}};
  const int nrows = sizeof rows / sizeof rows[0];
  const int rounds = 3;
  const double per = std::max(2.0, seconds / rounds);
  Scenario sc;
  sc.inside_ms = 1;  // long enough that the others wait; 0 outside: always contended
  sc.outside_ms = 0;
  std::printf("\n(e) a handoff in one durable commit (prototype) against two (dlock's), 3 contenders on one key,\n"
              "    1 ms inside, 0 outside, %d alternating rounds of %.0f s; bar: one/two <= 0.80\n", rounds, per);
  for (const Layout& lay : layouts) {
    std::printf("  %d thread%s in %d process%s, each its own connection:\n", lay.procs * lay.threads,
                lay.procs * lay.threads == 1 ? "" : "s", lay.procs, lay.procs == 1 ? "" : "es");
    std::vector<std::vector<ContendedFigures>> f(nrows);
    for (int round = 0; round < rounds; ++round) {
      for (int i = 0; i < nrows; ++i) {
        f[i].push_back(Contend(url, rows[i].kind, sc, lay.procs, lay.threads, per));
        const ContendedFigures& x = f[i].back();
        std::printf("    round %d  %-34s handoff p50 %6.3f ms  p99 %6.2f ms  %6.0f acq/s (cycle - inside %.3f ms)  "
                    "%4.1f stmts/acq  overlaps %d\n",
                    round + 1, rows[i].name, x.p50, x.p99, x.acq_per_s, x.acq_per_s > 0 ? 1000 / x.acq_per_s - sc.inside_ms : 0.0,
                    x.stmts_per_acq, x.overlaps);
        std::fflush(stdout);
      }
      const ContendedFigures &two = f[0].back(), &one = f[1].back(), &early = f[2].back();
      std::printf("    round %d  one/two: handoff p50 %.2fx, p99 %.2fx, time per acquisition %.2fx; early wake/two: p50 %.2fx\n",
                  round + 1, one.p50 / two.p50, one.p99 / two.p99, two.acq_per_s / one.acq_per_s, early.p50 / two.p50);
    }
    // Each round's ratio, then their median: drift between rounds hits both alike.
    auto median_ratio = [&](int a, int b, auto fig) {
      std::vector<double> v;
      for (int r = 0; r < rounds; ++r) v.push_back(fig(f[a][r]) / fig(f[b][r]));
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    auto p50 = [](const ContendedFigures& x) { return x.p50; };
    auto p99 = [](const ContendedFigures& x) { return x.p99; };
    auto per_acq = [](const ContendedFigures& x) { return x.acq_per_s > 0 ? 1 / x.acq_per_s : 0.0; };
    std::printf("    median of the rounds' ratios: one/two handoff p50 %.2fx, p99 %.2fx, time per acquisition %.2fx "
                "(bar <= 0.80); early wake/two p50 %.2fx; dlock (C API)/two p50 %.2fx\n",
                median_ratio(1, 0, p50), median_ratio(1, 0, p99), median_ratio(1, 0, per_acq), median_ratio(2, 0, p50),
                median_ratio(3, 0, p50));
  }
  Url u = ParseUrl(url);
  DurabilityProbe(u, 100);
  std::fflush(stdout);
}

// ---- (f): where an uncontended cycle's time goes ----------------------------

// The rows of a text query, every column as text.
std::vector<std::vector<std::string>> Rows(MYSQL* m, const std::string& sql) {
  if (mysql_query(m, sql.c_str()) != 0) Die(sql + ": " + mysql_error(m));
  std::vector<std::vector<std::string>> out;
  MYSQL_RES* r = mysql_store_result(m);
  if (r == nullptr) return out;
  const unsigned nf = mysql_num_fields(r);
  while (MYSQL_ROW row = mysql_fetch_row(r)) {
    out.emplace_back();
    for (unsigned i = 0; i < nf; ++i) out.back().push_back(row[i] ? row[i] : "NULL");
  }
  mysql_free_result(r);
  return out;
}

// Server time of the statements of some connections, from performance_schema's
// per-thread summaries: statements, time in them, and time in the Commit
// stage (InnoDB's commit: the redo log written and flushed, as the default
// innodb_flush_log_at_trx_commit=1 asks) and in each other stage.
struct ServerTime {
  double count = 0, ms = 0, commit_ms = 0;
  std::vector<std::pair<std::string, double>> stages;  // stage name, ms
};

ServerTime Snapshot(Raw& admin, const std::string& threads) {
  ServerTime t;
  for (const auto& r : Rows(admin.handle(), "SELECT SUM(COUNT_STAR), SUM(SUM_TIMER_WAIT) FROM "
                                            "performance_schema.events_statements_summary_by_thread_by_event_name "
                                            "WHERE " + threads)) {
    t.count = std::atof(r[0].c_str());
    t.ms = std::atof(r[1].c_str()) / 1e9;  // picoseconds
  }
  for (const auto& r : Rows(admin.handle(), "SELECT EVENT_NAME, SUM(SUM_TIMER_WAIT) FROM "
                                            "performance_schema.events_stages_summary_by_thread_by_event_name "
                                            "WHERE " + threads + " GROUP BY EVENT_NAME")) {
    const double ms = std::atof(r[1].c_str()) / 1e9;
    t.stages.emplace_back(r[0], ms);
    if (r[0].rfind("stage/sql/Commit", 0) == 0) t.commit_ms += ms;
  }
  return t;
}

ServerTime Minus(const ServerTime& b, const ServerTime& a) {
  ServerTime d;
  d.count = b.count - a.count;
  d.ms = b.ms - a.ms;
  d.commit_ms = b.commit_ms - a.commit_ms;
  for (const auto& s : b.stages) {
    double before = 0;
    for (const auto& x : a.stages)
      if (x.first == s.first) before = x.second;
    d.stages.emplace_back(s.first, s.second - before);
  }
  return d;
}

void Add(ServerTime* sum, const ServerTime& d) {
  sum->count += d.count;
  sum->ms += d.ms;
  sum->commit_ms += d.commit_ms;
  for (const auto& s : d.stages) {
    bool found = false;
    for (auto& x : sum->stages)
      if (x.first == s.first) x.second += s.second, found = true;
    if (!found) sum->stages.push_back(s);
  }
}

double ProcessCpuMs() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

std::string ThreadIdOf(Raw& r) {
  return Rows(r.handle(), "SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()")
      .at(0)
      .at(0);
}

void PrintServer(const char* name, const ServerTime& t, int cycles) {
  // The largest stage besides Commit, for where the execution goes.
  std::pair<std::string, double> top{"-", 0};
  for (const auto& s : t.stages)
    if (s.first.rfind("stage/sql/Commit", 0) != 0 && s.second > top.second) top = s;
  std::printf("    %-34s %4.1f stmts  server %6.3f ms: Commit stage %6.3f ms (%3.0f%%), the rest %6.3f ms "
              "(most: %s %.3f ms)\n",
              name, t.count / cycles, t.ms / cycles, t.commit_ms / cycles, t.ms > 0 ? 100 * t.commit_ms / t.ms : 0.0,
              (t.ms - t.commit_ms) / cycles, top.first.c_str() + (top.first.rfind("stage/sql/", 0) == 0 ? 10 : 0),
              top.second / cycles);
  // Every stage that takes a visible share, largest first.
  std::vector<std::pair<std::string, double>> st = t.stages;
  std::sort(st.begin(), st.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string line = "      stages:";
  for (const auto& x : st) {
    if (x.second / cycles < 0.002) break;
    char b[96];
    std::snprintf(b, sizeof b, " %s %.3f;", x.first.c_str() + (x.first.rfind("stage/sql/", 0) == 0 ? 10 : 0),
                  x.second / cycles);
    line += b;
  }
  std::printf("%s\n", line.c_str());
}

void ProfileSection(const Url& u, const std::string& url, int iters) {
  Raw admin(u);
  if (Rows(admin.handle(), "SELECT @@performance_schema").at(0).at(0) != "1") {
    std::printf("\n(f) profile: skipped, the server runs without performance_schema (start it with\n"
                "    performance_schema=ON; bench/run.sh restarts its throwaway server so for this section)\n");
    return;
  }
  const std::string instruments = "performance_schema.setup_instruments";
  const std::string which_instruments = " WHERE (NAME LIKE 'stage/%' OR NAME LIKE 'statement/%')";
  const std::string consumers = "performance_schema.setup_consumers";
  const std::string which_consumers = " WHERE NAME IN ('global_instrumentation', 'thread_instrumentation', "
                                      "'events_stages_current', 'events_statements_current')";
  if (std::getenv("DLOCK_BENCH_THROWAWAY") != nullptr) {
    admin.Query(("UPDATE " + instruments + " SET ENABLED = 'YES', TIMED = 'YES'" + which_instruments).c_str());
    admin.Query(("UPDATE " + consumers + " SET ENABLED = 'YES'" + which_consumers).c_str());
  } else if (Rows(admin.handle(), "SELECT (SELECT COUNT(*) FROM " + instruments + which_instruments +
                                      " AND NOT (ENABLED = 'YES' AND TIMED = 'YES')) + (SELECT COUNT(*) FROM " +
                                      consumers + which_consumers + " AND ENABLED <> 'YES')")
                 .at(0).at(0) != "0") {
    // Someone's server: its instruments are its operator's to set, not ours.
    std::printf("\n(f) profile: skipped, the server's stage and statement instruments or their consumers\n"
                "    are off; this section turns them on only on a throwaway server (bench/run.sh\n"
                "    without DLOCK_URL, which sets DLOCK_BENCH_THROWAWAY=1)\n");
    return;
  }
  const std::string admin_thread = ThreadIdOf(admin);

  // Each statement of a pair on a connection of its own, so that the
  // per-thread summaries tell them apart; a cycle is one of each, in turn.
  const dlock::LeaseSql& q = CoreSql().lease;
  Raw fi(u), fd(u), da(u), dr(u);
  MYSQL_STMT* ins = fi.Prepare("INSERT INTO bench_article_lock (lock_key, owner, expire_time) "
                               "VALUES (?, ?, DATE_ADD(NOW(), INTERVAL 30 SECOND))");
  MYSQL_STMT* del = fd.Prepare("DELETE FROM bench_article_lock WHERE lock_key = ? AND owner = ?");
  MYSQL_STMT* acq = da.Prepare(q.acquire.c_str());
  MYSQL_STMT* rel = dr.Prepare(q.release.c_str());
  const std::string t_fi = ThreadIdOf(fi), t_fd = ThreadIdOf(fd), t_da = ThreadIdOf(da), t_dr = ThreadIdOf(dr);
  // The same pairs on one connection each, for the client's CPU and wall
  // time per cycle (as an application sends them).
  Raw f1(u), d1(u);
  MYSQL_STMT* ins1 = f1.Prepare("INSERT INTO bench_article_lock (lock_key, owner, expire_time) "
                                "VALUES (?, ?, DATE_ADD(NOW(), INTERVAL 30 SECOND))");
  MYSQL_STMT* del1 = f1.Prepare("DELETE FROM bench_article_lock WHERE lock_key = ? AND owner = ?");
  MYSQL_STMT* acq1 = d1.Prepare(q.acquire.c_str());
  MYSQL_STMT* rel1 = d1.Prepare(q.release.c_str());
  const std::string t_f1 = ThreadIdOf(f1), t_d1 = ThreadIdOf(d1);

  dlock_client* c;
  dlock_error e;
  if (dlock_client_open(&c, url.c_str(), nullptr, &e) != DLOCK_OK) Die(e.message);
  dlock_lock* l;
  const std::string lkey = "bench:profile:dlock";
  if (dlock_open(&l, c, lkey.data(), lkey.size(), nullptr, &e) != DLOCK_OK) Die(e.message);

  uint64_t seq = 0;
  auto floor_cycle = [&](MYSQL_STMT* i, Raw& ri, MYSQL_STMT* d, Raw& rd) {
    const std::vector<std::string> p = {"bench:profile:floor", "o" + std::to_string(seq++)};
    if (ri.Exec(i, p) != 0 || rd.Exec(d, p) != 0) Die("profile: floor pair failed");
  };
  auto dlock_bare_cycle = [&](MYSQL_STMT* a, Raw& ra, MYSQL_STMT* r, Raw& rr) {
    const std::string key = "bench:profile:bare", owner = "o" + std::to_string(seq++);
    uint64_t n = 0;
    if (ra.Exec(a, {key, owner, kTtlUs}, &n) != 0 || n == 0) Die("profile: bare acquire failed");
    if (rr.Exec(r, {key, owner}, &n) != 0 || n != 1) Die("profile: bare release failed");
  };
  auto dlock_cycle = [&] {
    if (dlock_try(l, 0, &e) != DLOCK_OK) Die(std::string("profile: try: ") + e.message);
    if (dlock_release(l, &e) != DLOCK_OK) Die(std::string("profile: release: ") + e.message);
  };
  for (int i = 0; i < 20; ++i) {  // warm-up: tables open, statements prepared, rows there
    floor_cycle(ins, fi, del, fd);
    dlock_bare_cycle(acq, da, rel, dr);
    floor_cycle(ins1, f1, del1, f1);
    dlock_bare_cycle(acq1, d1, rel1, d1);
    dlock_cycle();
  }
  const std::string not_admin = "THREAD_ID <> " + admin_thread;
  ServerTime s_fi, s_fd, s_da, s_dr, s_lib, s_f1, s_d1;
  std::vector<double> wall(8, 0), cpu(8, 0);
  // On a throwaway server (bench/run.sh says so), also without the flush at commit.
  const bool noflush = std::getenv("DLOCK_BENCH_THROWAWAY") != nullptr;
  const std::string flush_setting = Rows(admin.handle(), "SELECT @@global.innodb_flush_log_at_trx_commit").at(0).at(0);
  const int rounds = 5, n = std::max(1, iters / rounds);
  auto timed = [&](int slot, const std::function<void()>& cycle) {
    const double w0 = NowMs(), c0 = ProcessCpuMs();
    for (int i = 0; i < n; ++i) cycle();
    wall[slot] += NowMs() - w0;
    cpu[slot] += ProcessCpuMs() - c0;
  };
  for (int round = 0; round < rounds; ++round) {
    ServerTime a_fi = Snapshot(admin, "THREAD_ID = " + t_fi), a_fd = Snapshot(admin, "THREAD_ID = " + t_fd);
    timed(0, [&] { floor_cycle(ins, fi, del, fd); });
    Add(&s_fi, Minus(Snapshot(admin, "THREAD_ID = " + t_fi), a_fi));
    Add(&s_fd, Minus(Snapshot(admin, "THREAD_ID = " + t_fd), a_fd));
    ServerTime a_da = Snapshot(admin, "THREAD_ID = " + t_da), a_dr = Snapshot(admin, "THREAD_ID = " + t_dr);
    timed(1, [&] { dlock_bare_cycle(acq, da, rel, dr); });
    Add(&s_da, Minus(Snapshot(admin, "THREAD_ID = " + t_da), a_da));
    Add(&s_dr, Minus(Snapshot(admin, "THREAD_ID = " + t_dr), a_dr));
    ServerTime a_lib = Snapshot(admin, not_admin);
    timed(2, dlock_cycle);
    Add(&s_lib, Minus(Snapshot(admin, not_admin), a_lib));
    ServerTime a_f1 = Snapshot(admin, "THREAD_ID = " + t_f1);
    timed(3, [&] { floor_cycle(ins1, f1, del1, f1); });
    Add(&s_f1, Minus(Snapshot(admin, "THREAD_ID = " + t_f1), a_f1));
    ServerTime a_d1 = Snapshot(admin, "THREAD_ID = " + t_d1);
    timed(4, [&] { dlock_bare_cycle(acq1, d1, rel1, d1); });
    Add(&s_d1, Minus(Snapshot(admin, "THREAD_ID = " + t_d1), a_d1));
    if (noflush) {
      // The same cycles with commits written but not flushed: what the flush costs them.
      admin.Query("SET GLOBAL innodb_flush_log_at_trx_commit = 2");
      timed(5, [&] { floor_cycle(ins1, f1, del1, f1); });
      timed(6, [&] { dlock_bare_cycle(acq1, d1, rel1, d1); });
      timed(7, dlock_cycle);
      admin.Query(("SET GLOBAL innodb_flush_log_at_trx_commit = " + flush_setting).c_str());
    }
  }
  dlock_close(l);
  dlock_client_close(c);
  const int cycles = rounds * n;
  std::printf("\n(f) where an uncontended cycle's time goes: %d cycles each, %d alternating rounds\n", cycles, rounds);
  std::printf("  server (performance_schema, per statement: time in statements; the Commit stage is InnoDB's\n"
              "  commit, the redo log written and flushed):\n");
  PrintServer("floor INSERT (article 3.2)", s_fi, cycles);
  PrintServer("floor DELETE (article 3.3)", s_fd, cycles);
  PrintServer("dlock acquire, bare", s_da, cycles);
  PrintServer("dlock release, bare", s_dr, cycles);
  PrintServer("dlock C API, try + release", s_lib, cycles);
  PrintServer("floor pair, one connection", s_f1, cycles);
  PrintServer("dlock's pair bare, one connection", s_d1, cycles);
  const double srv_floor = (s_fi.ms + s_fd.ms) / cycles, srv_dlock = (s_da.ms + s_dr.ms) / cycles;
  std::printf("    pair: floor %.3f ms (Commit %.0f%%), dlock's %.3f ms (Commit %.0f%%): dlock's acquire does %.3f ms more\n"
              "    work outside Commit than the floor's INSERT, its release %.3f ms more than the DELETE\n",
              srv_floor, 100 * (s_fi.commit_ms + s_fd.commit_ms) / (s_fi.ms + s_fd.ms), srv_dlock,
              100 * (s_da.commit_ms + s_dr.commit_ms) / (s_da.ms + s_dr.ms),
              ((s_da.ms - s_da.commit_ms) - (s_fi.ms - s_fi.commit_ms)) / cycles,
              ((s_dr.ms - s_dr.commit_ms) - (s_fd.ms - s_fd.commit_ms)) / cycles);
  std::printf("  client (this process: wall and CPU, getrusage user + system, per cycle):\n");
  const char* names[] = {"floor pair, two connections", "dlock's pair bare, two connections", "dlock C API",
                         "floor pair, one connection", "dlock's pair bare, one connection"};
  const double server[] = {srv_floor, srv_dlock, s_lib.ms / cycles, s_f1.ms / cycles, s_d1.ms / cycles};
  for (int i : {3, 4, 2, 0, 1})
    std::printf("    %-36s wall %6.3f ms  client CPU %6.3f ms  server %6.3f ms  rest %6.3f ms\n", names[i],
                wall[i] / cycles, cpu[i] / cycles, server[i], (wall[i] - cpu[i]) / cycles - server[i]);
  std::printf("    (rest: the wall time neither in the server's statements nor on this process's CPU: the\n"
              "    network stack, scheduling, the server's reading and writing of packets; a statement's\n"
              "    server time runs on past its reply (its clean-up), so the rest can come out negative)\n");
  if (noflush) {
    std::printf("  the same, innodb_flush_log_at_trx_commit=2 (written at commit, not flushed), alternating:\n");
    const int with[] = {3, 4, 2};
    for (int k = 0; k < 3; ++k) {
      const int i = with[k], j = 5 + k;
      std::printf("    %-36s wall %6.3f ms (flushed: %6.3f ms; the flush costs %3.0f%% of the cycle)\n", names[i],
                  wall[j] / cycles, wall[i] / cycles, 100 * (wall[i] - wall[j]) / wall[i]);
    }
  }
  std::fflush(stdout);
}

std::string Ratio(int most, int fewest) {
  char b[32];
  if (fewest > 0) std::snprintf(b, sizeof b, "%.1f:1", static_cast<double>(most) / fewest);
  else std::snprintf(b, sizeof b, "%d:0", most);
  return b;
}

// The article's loop (release, then at once acquire again): who gets it.
void PrintLoop(const char* name, const ContendedFigures& f) {
  std::printf("  %-30s %6zu acq  %4.0f%% of limit  per thread max:min %-8s per process %-7s re-take %4.0f%%  overlaps %d\n",
              name, f.acquisitions, f.throughput_fraction * 100, Ratio(f.most, f.fewest).c_str(),
              Ratio(f.proc_most, f.proc_fewest).c_str(), f.retake * 100, f.overlaps);
}

// Every handoff to a waiter (20 ms outside after each release).
void PrintHandoff(const char* name, const ContendedFigures& f) {
  std::printf("  %-30s %6zu acq  %4.0f%% of limit  handoff p50 %6.2f ms  p99 %6.2f ms (%4.1fx)  >3x p50 %3d  "
              "per thread %-7s %4.1f stmts/acq  overlaps %d\n",
              name, f.acquisitions, f.throughput_fraction * 100, f.p50, f.p99, f.p50 > 0 ? f.p99 / f.p50 : 0.0,
              f.slow, Ratio(f.most, f.fewest).c_str(), f.stmts_per_acq, f.overlaps);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s URL [--seconds S] [--procs P] [--threads T] [--iters N] [--only LETTERS, of acef]\n", argv[0]);
    return 2;
  }
  std::string url = argv[1];
  double seconds = 10;
  int procs = 5, threads = 10, iters = 1000;
  std::string only;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (a == "--procs") procs = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else if (a == "--only") only = argv[i + 1];
    else Die("unknown option " + a);
  }
  auto want = [&](char section) { return only.empty() || only.find(section) != std::string::npos; };
  Url u = ParseUrl(url);
  RawSetup(u);
  {
    // dlock's tables, made by the library (the bare statements of (a), (e) and (f) need them).
    dlock_client* c;
    dlock_lock* l;
    dlock_error e;
    const std::string key = "bench:setup";
    if (dlock_client_open(&c, url.c_str(), nullptr, &e) != DLOCK_OK ||
        dlock_open(&l, c, key.data(), key.size(), nullptr, &e) != DLOCK_OK || dlock_try(l, 0, &e) != DLOCK_OK ||
        dlock_release(l, &e) != DLOCK_OK)
      Die(std::string("setup: ") + e.message);
    dlock_close(l);
    dlock_client_close(c);
  }
  std::printf("dlock %s benchmark (%d cores on this machine)\n", dlock_version(),
              static_cast<int>(std::thread::hardware_concurrency()));

  if (want('a')) {
  // (a)/(b): alternate floor and dlock runs so drift hits both alike; medians.
  dlock_client* c;
  dlock_error e;
  if (dlock_client_open(&c, url.c_str(), nullptr, &e) != DLOCK_OK) Die(e.message);
  std::vector<double> fl, fr, dl, dr, fd;
  double cpu_fd = 0, cpu_dl = 0, cpu_fr = 0, cpu_dr = 0;  // CPU ms per cycle, summed over rounds
  // A row lock cycle is ~0.2 ms, so it gets 5x the iterations of a lease
  // cycle (which flushes the log twice) for a comparable share of the time.
  // Many short rounds: a disk stall on this shared machine spoils a few rounds,
  // not the median.
  const int rounds = 35;
  for (int round = 0; round < rounds; ++round) {
    fl.push_back(FloorLease(u, iters / rounds));
    double c0 = CpuMs();
    fd.push_back(FloorDlockStatements(u, iters / rounds));
    double c1 = CpuMs();
    dl.push_back(DlockUncontended(c, "lease", iters / rounds));
    double c2 = CpuMs();
    fr.push_back(FloorRow(u, 5 * iters / rounds));
    double c3 = CpuMs();
    dr.push_back(DlockUncontended(c, "row", 5 * iters / rounds));
    double c4 = CpuMs();
    cpu_fd += (c1 - c0) / (iters / rounds) / rounds;
    cpu_dl += (c2 - c1) / (iters / rounds) / rounds;
    cpu_fr += (c3 - c2) / (5 * iters / rounds) / rounds;
    cpu_dr += (c4 - c3) / (5 * iters / rounds) / rounds;
  }
  dlock_client_close(c);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double mfl = median(fl), mfr = median(fr), mdl = median(dl), mdr = median(dr), mfd = median(fd);
  std::sort(g_commit_ms.begin(), g_commit_ms.end());
  auto cpct = [](double q) { return g_commit_ms[std::min(g_commit_ms.size() - 1, static_cast<size_t>(q * g_commit_ms.size()))]; };
  std::printf("\n(a) floor, bare SQL through Connector/C, one acquire + release (median of %d rounds,\n"
              "    alternating with (b); %d lease / %d row cycles each):\n",
              rounds, iters / rounds, 5 * iters / rounds);
  std::printf("  lease  INSERT + DELETE (article 3.2/3.3)                 %7.3f ms\n", mfl);
  std::printf("  row    BEGIN; SELECT .. FOR UPDATE; COMMIT (article 4.2) %7.3f ms\n", mfr);
  std::printf("  lease  dlock's own INSERT .. ON DUPLICATE KEY UPDATE + UPDATE, bare  %7.3f ms (%.2fx the article's pair)\n",
              mfd, mfd / mfl);
  std::printf("  one durable statement (a commit each): p50 %.3f ms, p99 %.3f ms (%.1fx): a lease handoff\n"
              "  needs two, so its p99/p50 cannot beat this spread on this machine\n",
              cpct(0.5), cpct(0.99), cpct(0.99) / cpct(0.5));
  std::printf("(b) dlock, uncontended acquire + release:\n");
  std::printf("  lease  %7.3f ms  = %.2fx the floor (target <= 1.15x), %.2fx its own statements sent bare\n", mdl,
              mdl / mfl, mdl / mfd);
  std::printf("  row    %7.3f ms  = %.2fx the floor (target <= 1.15x)\n", mdr, mdr / mfr);
  std::printf("  client CPU per cycle (library + Connector/C; the rest is the server and the network):\n"
              "    lease %.3f ms (its statements bare %.3f ms), row %.3f ms (the floor's %.3f ms)\n",
              cpu_dl, cpu_fd, cpu_dr, cpu_fr);
  std::fflush(stdout);

  }
  if (want('c')) {

  // (c) the article's loop: release, then at once acquire again; (d) every
  // handoff to a waiter: 20 ms outside after each release. Both with
  // procs*threads contenders in `procs` processes and with all of them in
  // one process, 20 ms inside, against the server's own primitives.
  struct Layout {
    int procs, threads;
  };
  const Layout layouts[] = {{1, procs * threads}, {procs, threads}};
  struct Row {
    const char* name;
    Kind kind;
    const char* fair;
  };
  const Row rows[] = {{"article class (100 ms poll)", Kind::kArticle, nullptr},
                      {"GET_LOCK (reference)", Kind::kGetLock, nullptr},
                      {"FOR UPDATE (reference)", Kind::kForUpdate, nullptr},
                      {"lease statements bare (floor)", Kind::kTwoCommit, nullptr},
                      {"lease bare, wait+acquire in one", Kind::kWaitAcquire, nullptr},
                      {"dlock lease", Kind::kLease, nullptr},
                      {"dlock lease fair=0", Kind::kLease, "0"},
                      {"dlock row", Kind::kRow, nullptr},
                      {"dlock row fair=0", Kind::kRow, "0"}};
  const char* want = std::getenv("DLOCK_BENCH_ROWS");  // e.g. "lease" to run only matching rows
  const char* scen = std::getenv("DLOCK_BENCH_SCENARIOS");  // e.g. "c1,d5": only those
  for (int loop = 1; loop >= 0; --loop) {
    for (const Layout& lay : layouts) {
      const std::string tag = std::string(loop ? "c" : "d") + (lay.procs == 1 ? "1" : "p");
      if (scen != nullptr && std::strstr(scen, tag.c_str()) == nullptr) continue;
      std::printf(loop ? "\n(c) the article's loop (release, then at once acquire again), %d threads in %d process%s, "
                         "20 ms inside, %.0f s\n    targets: per thread <= 2:1, re-take <= 10%%\n"
                       : "\n(d) every handoff to a waiter (20 ms outside), %d threads in %d process%s, 20 ms inside, "
                         "%.0f s\n    targets: >= 95%% of the 50/s limit, p99 <= 3x p50\n",
                  lay.procs * lay.threads, lay.procs, lay.procs == 1 ? "" : "es", seconds);
      std::fflush(stdout);
      for (const Row& r : rows) {
        if (want != nullptr && std::strstr(r.name, want) == nullptr) continue;
        if (loop && r.kind == Kind::kWaitAcquire) continue;  // a handoff experiment: (d) only
        Scenario sc;
        sc.outside_ms = loop ? 0 : 20;
        sc.fair = r.fair;
        ContendedFigures f = Contend(url, r.kind, sc, lay.procs, lay.threads, seconds);
        if (loop) PrintLoop(r.name, f);
        else PrintHandoff(r.name, f);
        std::fflush(stdout);
      }
      // (d) again for the lease with commits written but not flushed, on a
      // throwaway server only (a global setting, put back): how much of a
      // lease handoff, and of the limit it misses, is the redo log's flush.
      if (!loop && std::getenv("DLOCK_BENCH_THROWAWAY") != nullptr) {
        Raw admin(u);
        const std::string flush_setting =
            Rows(admin.handle(), "SELECT @@global.innodb_flush_log_at_trx_commit").at(0).at(0);
        const Row unflushed[] = {{"lease bare, commits not flushed", Kind::kTwoCommit, nullptr},
                                 {"dlock lease, not flushed", Kind::kLease, nullptr}};
        for (const Row& r : unflushed) {
          if (want != nullptr && std::strstr(r.name, want) == nullptr) continue;
          Scenario sc;
          sc.outside_ms = 20;
          admin.Query("SET GLOBAL innodb_flush_log_at_trx_commit = 2");
          ContendedFigures f = Contend(url, r.kind, sc, lay.procs, lay.threads, seconds);
          admin.Query(("SET GLOBAL innodb_flush_log_at_trx_commit = " + flush_setting).c_str());
          PrintHandoff(r.name, f);
          std::fflush(stdout);
        }
      }
    }
  }
  }
  if (want('e')) HandoffSection(url, seconds);
  if (want('f')) ProfileSection(u, url, iters);
  return 0;
}
