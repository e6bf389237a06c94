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
// (d) the same for the row lock
#include <dlock/dlock.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

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
  // Runs st with string params; returns errno (0 = ok). Fetches any result.
  unsigned Exec(MYSQL_STMT* st, const std::vector<std::string>& params, uint64_t* affected = nullptr) {
    ++statements;
    std::vector<MYSQL_BIND> b(params.size());
    std::vector<unsigned long> len(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      std::memset(&b[i], 0, sizeof b[i]);
      len[i] = params[i].size();
      b[i].buffer_type = MYSQL_TYPE_STRING;
      b[i].buffer = const_cast<char*>(params[i].data());
      b[i].buffer_length = len[i];
      b[i].length = &len[i];
    }
    if (!params.empty()) mysql_stmt_bind_param(st, b.data());
    if (mysql_stmt_execute(st) != 0) return mysql_stmt_errno(st);
    if (mysql_stmt_field_count(st) > 0) {
      mysql_stmt_store_result(st);
      mysql_stmt_free_result(st);
    }
    if (affected) *affected = mysql_stmt_affected_rows(st);
    return 0;
  }
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

// dlock's own two lease statements (as dialect_mariadb.cc / dialect.cc build them for the
// default table), sent bare through Connector/C: what the statements cost
// without the library around them.
double FloorDlockStatements(const Url& u, int n) {
  Raw r(u);
  const std::string now = "UTC_TIMESTAMP(6)";
  const std::string acquire =
      "INSERT INTO `distributed_lock` (lock_key, owner, expire_time, create_time, fence) VALUES (?, ?, " + now +
      " + INTERVAL 30000000 MICROSECOND, " + now +
      ", LAST_INSERT_ID(COALESCE((SELECT fence_floor FROM `distributed_lock_fence` WHERE id = 1 LOCK IN SHARE "
      "MODE), 0) + 1)) ON DUPLICATE KEY UPDATE fence = IF(expire_time < " + now +
      ", LAST_INSERT_ID(fence + 1), IF(owner = VALUES(owner), LAST_INSERT_ID(fence), fence + 0 * "
      "LAST_INSERT_ID(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, " + now + ", expire_time))))), create_time = "
      "IF(expire_time < " + now + ", " + now + ", create_time), owner = IF(expire_time < " + now +
      " OR owner = VALUES(owner), VALUES(owner), owner), expire_time = IF(owner = VALUES(owner), "
      "VALUES(expire_time), expire_time)";
  const std::string release = "UPDATE `distributed_lock` SET owner = '', expire_time = IF(LAST_INSERT_ID(expire_time >= " +
                              now + "), '1970-01-01 00:00:00', '1970-01-01 00:00:00') WHERE lock_key = ? AND owner = ?";
  MYSQL_STMT* acq = r.Prepare(acquire.c_str());
  MYSQL_STMT* rel = r.Prepare(release.c_str());
  double t0 = NowMs();
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> p = {"bench:floor:dlock", "owner-" + std::to_string(i)};
    uint64_t a = 0;
    if (r.Exec(acq, p, &a) != 0 || a == 0) Die("bare dlock acquire failed");
    if (r.Exec(rel, p, &a) != 0 || a != 1) Die("bare dlock release failed");
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

enum class Kind { kArticle, kGetLock, kForUpdate, kLease, kRow };

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

void DlockContender(dlock_client* c, Kind kind, const Scenario& sc, int id, int proc, double end,
                    std::vector<Rec>* out) {
  dlock_error e;
  dlock_config* cfg;
  dlock_config_new(&cfg, &e);
  dlock_config_set(cfg, "mode", kind == Kind::kRow ? "row" : "lease", &e);
  if (sc.fair != nullptr && dlock_config_set(cfg, "fair", sc.fair, &e) != DLOCK_OK) Die(e.message);
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
  f.throughput_fraction = in_window / seconds / (1000.0 / sc.inside_ms);
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
    std::fprintf(stderr, "usage: %s URL [--seconds S] [--procs P] [--threads T] [--iters N] [--only a|c]\n", argv[0]);
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
  Url u = ParseUrl(url);
  RawSetup(u);
  std::printf("dlock %s benchmark (%d cores on this machine)\n", dlock_version(),
              static_cast<int>(std::thread::hardware_concurrency()));

  if (only.empty() || only == "a") {
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
  if (!only.empty() && only != "c") return 0;

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
        Scenario sc;
        sc.outside_ms = loop ? 0 : 20;
        sc.fair = r.fair;
        ContendedFigures f = Contend(url, r.kind, sc, lay.procs, lay.threads, seconds);
        if (loop) PrintLoop(r.name, f);
        else PrintHandoff(r.name, f);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
