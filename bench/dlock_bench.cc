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

double FloorLease(const Url& u, int n) {
  Raw r(u);
  MYSQL_STMT* ins = r.Prepare("INSERT INTO bench_article_lock (lock_key, owner, expire_time) "
                              "VALUES (?, ?, DATE_ADD(NOW(), INTERVAL 30 SECOND))");
  MYSQL_STMT* del = r.Prepare("DELETE FROM bench_article_lock WHERE lock_key = ? AND owner = ?");
  double t0 = NowMs();
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> p = {"bench:floor", "owner-" + std::to_string(i)};
    if (r.Exec(ins, p) != 0) Die("floor insert failed");
    if (r.Exec(del, p) != 0) Die("floor delete failed");
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
  double acquired, release_start;
  int contender;
};

struct ProcResult {
  std::vector<Rec> recs;
  uint64_t statements = 0;
};

enum class Kind { kArticle, kLease, kRow };

// One contender of the article's class: INSERT, on a duplicate sleep
// retry_interval (100 ms) and retry; DELETE by key and owner.
void ArticleContender(const Url& u, int id, double end, std::vector<Rec>* out, uint64_t* stmts) {
  Raw r(u);
  MYSQL_STMT* ins = r.Prepare("INSERT INTO bench_article_lock (lock_key, owner, expire_time) "
                              "VALUES (?, ?, DATE_ADD(NOW(), INTERVAL 30 SECOND))");
  MYSQL_STMT* del = r.Prepare("DELETE FROM bench_article_lock WHERE lock_key = ? AND owner = ?");
  std::mt19937_64 rng(std::random_device{}());
  while (NowMs() < end) {
    std::vector<std::string> p = {"bench:contended", "o" + std::to_string(id) + "-" + std::to_string(rng())};
    bool got = false;
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
    SleepMs(20);
    double rs = NowMs();
    r.Exec(del, p);
    out->push_back(Rec{acq, rs, id});
    SleepMs(20);
  }
  *stmts += r.statements;
}

void DlockContender(dlock_client* c, Kind kind, int id, double end, std::vector<Rec>* out) {
  dlock_error e;
  dlock_config* cfg;
  dlock_config_new(&cfg, &e);
  dlock_config_set(cfg, "mode", kind == Kind::kRow ? "row" : "lease", &e);
  dlock_lock* l;
  const std::string key = "bench:contended";
  if (dlock_open(&l, c, key.data(), key.size(), cfg, &e) != DLOCK_OK) Die(e.message);
  while (NowMs() < end) {
    int rc = dlock_try(l, 10000, &e);
    if (rc == DLOCK_BUSY) continue;
    if (rc != DLOCK_OK) Die(std::string("try: ") + e.message);
    double acq = NowMs();
    SleepMs(20);
    double rs = NowMs();
    if (dlock_release(l, &e) != DLOCK_OK) Die(std::string("release: ") + e.message);
    out->push_back(Rec{acq, rs, id});
    SleepMs(20);
  }
  dlock_close(l);
  dlock_config_free(cfg);
}

ProcResult RunProcess(const std::string& url, Kind kind, int proc, int threads, double start, double end) {
  ProcResult res;
  dlock_client* c = nullptr;
  dlock_error e;
  if (kind != Kind::kArticle) {
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
      if (kind == Kind::kArticle) ArticleContender(u, id, end, &per[t], &stmts[t]);
      else DlockContender(c, kind, id, end, &per[t]);
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
  int most, fewest;
  double stmts_per_acq;
  int overlaps;
  size_t acquisitions;
};

ContendedFigures Contend(const std::string& url, Kind kind, int procs, int threads, double seconds) {
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
      ProcResult r = RunProcess(url, kind, p, threads, start, end);
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
  for (size_t i = 1; i < all.size(); ++i) {
    double h = all[i].acquired - all[i - 1].release_start;
    if (h < 0) ++f.overlaps;  // acquired before the previous holder began to release
    else handoff.push_back(h);
  }
  std::sort(handoff.begin(), handoff.end());
  auto pct = [&](double q) { return handoff.empty() ? 0.0 : handoff[std::min(handoff.size() - 1, static_cast<size_t>(q * handoff.size()))]; };
  f.p50 = pct(0.50);
  f.p99 = pct(0.99);
  std::vector<int> count(static_cast<size_t>(procs * threads), 0);
  size_t in_window = 0;
  for (const Rec& r : all) {
    ++count[static_cast<size_t>(r.contender)];
    if (r.acquired >= start && r.acquired < end) ++in_window;
  }
  f.most = *std::max_element(count.begin(), count.end());
  f.fewest = *std::min_element(count.begin(), count.end());
  f.throughput_fraction = in_window / seconds / (1000.0 / 20.0);
  f.stmts_per_acq = all.empty() ? 0 : static_cast<double>(statements) / all.size();
  f.acquisitions = all.size();
  return f;
}

void PrintContended(const char* name, const ContendedFigures& f) {
  char fair[32];
  if (f.fewest > 0) std::snprintf(fair, sizeof fair, "%.1f:1", static_cast<double>(f.most) / f.fewest);
  else std::snprintf(fair, sizeof fair, "%d:0 (starved)", f.most);
  std::printf("  %-26s %6zu acq  %5.0f%% of limit  handoff p50 %6.2f ms  p99 %7.2f ms  fairness %-13s %5.1f stmts/acq  overlaps %d\n",
              name, f.acquisitions, f.throughput_fraction * 100, f.p50, f.p99, fair, f.stmts_per_acq, f.overlaps);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s URL [--seconds S] [--procs P] [--threads T] [--iters N]\n", argv[0]);
    return 2;
  }
  std::string url = argv[1];
  double seconds = 10;
  int procs = 5, threads = 10, iters = 1000;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (a == "--procs") procs = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else Die("unknown option " + a);
  }
  Url u = ParseUrl(url);
  RawSetup(u);
  std::printf("dlock %s benchmark (%d cores on this machine)\n", dlock_version(),
              static_cast<int>(std::thread::hardware_concurrency()));

  // (a)/(b): alternate floor and dlock runs so drift hits both alike; medians.
  dlock_client* c;
  dlock_error e;
  if (dlock_client_open(&c, url.c_str(), nullptr, &e) != DLOCK_OK) Die(e.message);
  std::vector<double> fl, fr, dl, dr;
  // A row lock cycle is ~0.2 ms, so it gets 5x the iterations of a lease
  // cycle (which flushes the log twice) for a comparable share of the time.
  const int rounds = 7;
  for (int round = 0; round < rounds; ++round) {
    fl.push_back(FloorLease(u, iters / rounds));
    dl.push_back(DlockUncontended(c, "lease", iters / rounds));
    fr.push_back(FloorRow(u, 5 * iters / rounds));
    dr.push_back(DlockUncontended(c, "row", 5 * iters / rounds));
  }
  dlock_client_close(c);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double mfl = median(fl), mfr = median(fr), mdl = median(dl), mdr = median(dr);
  std::printf("\n(a) floor, bare SQL through Connector/C, one acquire + release (median of %d rounds,\n"
              "    alternating with (b); %d lease / %d row cycles each):\n",
              rounds, iters / rounds, 5 * iters / rounds);
  std::printf("  lease  INSERT + DELETE (article 3.2/3.3)                 %7.3f ms\n", mfl);
  std::printf("  row    BEGIN; SELECT .. FOR UPDATE; COMMIT (article 4.2) %7.3f ms\n", mfr);
  std::printf("  (a lease handoff needs two durable commits: the release and the next acquire;\n"
              "   one durable commit costs about %.3f ms on this server right now)\n", mfl / 2);
  std::printf("(b) dlock, uncontended acquire + release:\n");
  std::printf("  lease  %7.3f ms  = %.2fx the floor (target <= 1.15x)\n", mdl, mdl / mfl);
  std::printf("  row    %7.3f ms  = %.2fx the floor (target <= 1.15x)\n", mdr, mdr / mfr);
  std::fflush(stdout);

  std::printf("\n(c)/(d) one key, %d contenders in %d processes, 20 ms inside, 20 ms outside, %.0f s each\n",
              procs * threads, procs, seconds);
  std::printf("  targets: >= 90%% of the 50/s limit, handoff p50 <= 2 ms, fairness <= 3:1, <= 5 stmts/acq\n");
  std::fflush(stdout);
  PrintContended("article class (100 ms poll)", Contend(url, Kind::kArticle, procs, threads, seconds));
  std::fflush(stdout);
  PrintContended("(c) dlock lease", Contend(url, Kind::kLease, procs, threads, seconds));
  std::fflush(stdout);
  PrintContended("(d) dlock row lock", Contend(url, Kind::kRow, procs, threads, seconds));
  return 0;
}
