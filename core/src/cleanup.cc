// A8: the janitor that deletes long-expired lease rows, and the fencing
// floor that keeps tokens growing across it.
#include <algorithm>
#include <cstdlib>
#include <random>

#include "client_impl.h"
#include "lease_ops.h"

namespace dlock {

void ClientImpl::StartJanitor() {
  if (opts_.cleanup_interval_ms <= 0) return;
  janitor_ = std::thread([this] { JanitorLoop(); });
}

void ClientImpl::JanitorLoop() {
  mysql_thread_init();
  RelockableMutexLock g(janitor_mu_);
  while (!janitor_stop_) {
    // Spread the clients of a fleet: +-10% jitter on the interval.
    thread_local std::minstd_rand rng(std::random_device{}());
    int64_t iv = opts_.cleanup_interval_ms;
    std::uniform_int_distribution<int64_t> d(iv * 9 / 10, iv * 11 / 10);
    const auto until = Clock::now() + std::chrono::milliseconds(d(rng));
    while (!janitor_stop_ && Clock::now() < until) janitor_cv_.wait_until(janitor_mu_, until);
    if (janitor_stop_) break;
    g.Unlock();
    uint64_t deleted = 0;
    bool ran = false;
    Status s = Cleanup(&deleted, &ran);
    if (!s.ok()) {
      Raise(EventType::kCleanup, Severity::kWarning, "", "", 0,
            "periodic cleanup failed: " + s.message());
    }
    g.Lock();
  }
  g.Unlock();
  mysql_thread_end();
}

namespace {

// One batch is one transaction: the fence floor row is locked first (new
// keys read it with a share lock, so none is created meanwhile), the rows
// to delete are locked next (with their index gaps, so a release cannot
// move another row into the range), the floor rises above their tokens,
// and exactly those rows go. A re-created key then starts above every
// token it ever issued (B1). Re-running it is safe: it selects again.
// *found: the expired rows it saw; *deleted grows by those it deleted.
Status CleanupBatch(SqlConn& c, const CleanupSql& sql, const std::string& cutoff, int limit,
                    uint64_t* found, uint64_t* deleted) {
  const std::vector<Param> p = {Param::Text(cutoff), Param::Int(limit)};
  ExecResult r;
  uint64_t max_fence = 0, gone = 0;
  // REPEATABLE READ: the locking read below must lock the index gaps too.
  Status s = c.Query(sql.isolation);
  if (s.ok()) s = c.Query("START TRANSACTION");
  if (s.ok()) s = c.Exec(sql.lock_floor, {}, &r);
  if (s.ok()) s = c.Exec(sql.pick, p, &r);
  if (s.ok()) {
    *found = r.rows.size();
    for (const Row& row : r.rows)
      if (row[0])
        max_fence = std::max<uint64_t>(max_fence, std::strtoull(row[0]->c_str(), nullptr, 10));
  }
  if (s.ok() && *found > 0) {
    s = c.Exec(sql.raise_floor, {Param::Int(static_cast<int64_t>(max_fence))}, &r);
    if (s.ok()) s = c.Exec(sql.remove, p, &r);
    if (s.ok()) gone = r.affected;
  }
  if (s.ok()) s = c.Query("COMMIT");
  if (s.ok()) *deleted += gone;
  else if (!c.broken()) (void)c.Query("ROLLBACK");
  return s;
}

}  // namespace

Status ClientImpl::Cleanup(uint64_t* deleted, bool* ran) {
  *deleted = 0;
  *ran = false;
  // One cleaner at a time across all clients: a lease of its own (A8).
  static const std::string kGuard = "dlock:cleanup";
  const std::string owner = NewOwner();
  LeaseAttempt a;
  Status s = LeaseAcquire(*this, kGuard, owner, 60000, Clock::now(), nullptr, &a);
  if (!s.ok()) return s;
  if (!a.won) return Status::OK();
  *ran = true;
  {
    // Every batch borrows from here; one dropped with its connection is
    // re-run on a fresh one. conn: the one used last.
    PoolConns conns(this, Clock::now(), nullptr, ConnectBy::kPerNode);
    SqlConn* conn = nullptr;
    s = conns.Fresh(&conn);
    ExecResult r;
    std::string cutoff;
    if (s.ok())
      s = conn->Exec(sql_.cleanup.cutoff, {Param::Int(opts_.cleanup_grace_ms * 1000)}, &r);
    if (s.ok() && !r.rows.empty() && r.rows[0][0]) cutoff = *r.rows[0][0];
    for (int batch = 0; s.ok() && !cutoff.empty() && batch < 1000; ++batch) {
      uint64_t found = 0;
      RetryPolicy p("cleanup", RetryUntil(Clock::now()));
      s = RunIdempotent(nullptr, &conns, p, [&](SqlConn& c, bool) {
        conn = &c;
        return CleanupBatch(c, sql_.cleanup, cutoff, opts_.cleanup_batch, &found, deleted);
      });
      if (found < static_cast<uint64_t>(opts_.cleanup_batch)) break;
    }
    // On Galera, the claims of waiters that died in line (each left one
    // row; a live one is kept alive every 0.15 s, so the grace covers it).
    for (int batch = 0; s.ok() && !cutoff.empty() && server_.galera && batch < 100; ++batch) {
      RetryPolicy p("cleanup", RetryUntil(Clock::now()));
      uint64_t gone = 0;
      s = RunIdempotent(nullptr, &conns, p, [&](SqlConn& c, bool) {
        conn = &c;
        Status d = c.Exec(sql_.cleanup.claims,
                          {Param::Text(cutoff), Param::Int(opts_.cleanup_batch)}, &r);
        gone = d.ok() ? r.affected : 0;
        return d;
      });
      if (gone < static_cast<uint64_t>(opts_.cleanup_batch)) break;
    }
    if (s.ok()) {
      Status c = conn->Exec(sql_.cleanup.count, {}, &r);
      if (c.ok() && !r.rows.empty() && r.rows[0][0])
        counters_.table_rows.store(std::strtoull(r.rows[0][0]->c_str(), nullptr, 10));
    }
  }  // the connection goes back before the guard's release needs one
  bool released = false, ours = false;
  (void)LeaseRelease(*this, kGuard, owner, nullptr, &released, &ours);
  counters_.cleanup_runs.fetch_add(1);
  counters_.cleanup_deleted.fetch_add(*deleted);
  if (*deleted > 0) {
    Raise(EventType::kCleanup, Severity::kInfo, "", "", 0,
          "cleanup deleted " + std::to_string(*deleted) + " expired lease rows; " +
              std::to_string(counters_.table_rows.load()) + " rows remain");
  }
  return s;
}

}  // namespace dlock
