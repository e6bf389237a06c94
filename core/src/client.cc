#include <mysqld_error.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "client_impl.h"

namespace dlock {

const int64_t kRowSlicesMs[] = {50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000};
const size_t kRowSliceCount = sizeof(kRowSlicesMs) / sizeof(kRowSlicesMs[0]);

namespace {

// A zero wait still needs a connection; this is how long it may wait for one.
constexpr auto kPoolGrace = std::chrono::milliseconds(1000);
constexpr int kConnRetries = 3;      // fresh connections tried after a drop
constexpr int kDeadlockRetries = 5;  // re-runs after 1213

std::string Quote(const std::string& ident) { return "`" + ident + "`"; }

void JitterSleep(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  int base = 2 << attempt;  // 2, 4, 8, ... ms
  std::uniform_int_distribution<int> d(base / 2, base);
  std::this_thread::sleep_for(std::chrono::milliseconds(d(rng)));
}

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown-host";
  std::string h(buf);
  if (h.size() > 64) h.resize(64);
  return h;
}

}  // namespace

ClientImpl::ClientImpl(ClientOptions opts, LockOptions lock_defaults)
    : opts_(std::move(opts)),
      lock_defaults_(lock_defaults),
      pool_(opts_),
      pid_(getpid()),
      host_(HostName()),
      events_(static_cast<size_t>(opts_.events)),
      renewer_(this) {
  const std::string t = Quote(opts_.table);
  const std::string f = Quote(opts_.table + "_fence");
  const std::string now = "UTC_TIMESTAMP(6)";
  // One statement takes a free key, takes over an expired lease, or repeats
  // our own acquisition (a retry after a dropped connection). Assignment
  // order matters: fence and create_time read the old expiry, owner is
  // decided next, expire_time last (it compares against the new owner).
  // The fence of a new row starts above every token that cleanup deleted
  // (the floor, read with a share lock so that cleanup cannot slip between).
  // When busy, the holder's remaining microseconds come back through
  // LAST_INSERT_ID without changing the row, so waiters need no extra read.
  lease_sql_.acquire =
      "INSERT INTO " + t + " (lock_key, owner, expire_time, create_time, fence) VALUES (?, ?, " +
      now + " + INTERVAL ? MICROSECOND, " + now +
      ", LAST_INSERT_ID(COALESCE((SELECT fence_floor FROM " + f +
      " WHERE id = 1 LOCK IN SHARE MODE), 0) + 1)) ON DUPLICATE KEY UPDATE "
      "fence = IF(expire_time < " + now + ", LAST_INSERT_ID(fence + 1), "
      "IF(owner = VALUES(owner), LAST_INSERT_ID(fence), "
      "fence + 0 * LAST_INSERT_ID(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, " + now + ", expire_time))))), "
      "create_time = IF(expire_time < " + now + ", " + now + ", create_time), "
      "owner = IF(expire_time < " + now + " OR owner = VALUES(owner), VALUES(owner), owner), "
      "expire_time = IF(owner = VALUES(owner), VALUES(expire_time), expire_time)";
  lease_sql_.renew = "UPDATE " + t + " SET expire_time = " + now +
                     " + INTERVAL ? MICROSECOND WHERE lock_key = ? AND owner = ? AND expire_time >= " +
                     now;
  // Release frees the row in place (the fence survives) and reports through
  // LAST_INSERT_ID whether the lease was still live by the DB clock.
  lease_sql_.release = "UPDATE " + t +
                       " SET owner = '', expire_time = IF(LAST_INSERT_ID(expire_time >= " + now +
                       "), '1970-01-01 00:00:00', '1970-01-01 00:00:00') "
                       "WHERE lock_key = ? AND owner = ?";
  lease_sql_.read = "SELECT owner, fence, TIMESTAMPDIFF(MICROSECOND, " + now +
                    ", expire_time) FROM " + t + " WHERE lock_key = ?";
  // Wake-up hint only (never exclusion): a waiter blocks here until the
  // holder that came through this same path releases, or the timeout.
  lease_sql_.get_name = "SELECT GET_LOCK(?, ? / 1000000)";
  lease_sql_.release_name = "DO RELEASE_LOCK(?)";
  // The release of a holder that keeps the wake-up name gives the name up
  // inside the same statement: the next waiter is woken while our commit is
  // being flushed, and its acquire queues on the row lock we release at
  // commit, instead of starting only after our reply came back.
  lease_sql_.release_and_wake = "UPDATE " + t +
                                " SET owner = '', expire_time = IF(LAST_INSERT_ID(expire_time >= " +
                                now + ") + 0 * IFNULL(RELEASE_LOCK(?), 0), '1970-01-01 00:00:00', "
                                "'1970-01-01 00:00:00') WHERE lock_key = ? AND owner = ?";

  const std::string r = Quote(opts_.row_table);
  // The article's SELECT .. FOR UPDATE: a locking read, so acquiring and
  // releasing cost no log flush.
  const std::string take = "SELECT 1 FROM " + r + " WHERE lock_name = ? FOR UPDATE";
  row_sql_.exists = "SELECT 1 FROM " + r + " WHERE lock_name = ?";
  // Never blocks behind a holder for long: a duplicate takes a share lock on
  // the existing row, which the holder has locked exclusively.
  row_sql_.create = "SET STATEMENT innodb_lock_wait_timeout=1 FOR INSERT IGNORE INTO " + r +
                    " (lock_name, updated_time) VALUES (?, " + now + ")";
  row_sql_.nowait = take + " NOWAIT";  // no per-statement variable: cheaper
  for (size_t i = 0; i < kRowSliceCount; ++i) {
    int64_t ms = kRowSlicesMs[i];
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "SET STATEMENT max_statement_time=%lld.%03lld, innodb_lock_wait_timeout=%lld FOR ",
                  static_cast<long long>(ms / 1000), static_cast<long long>(ms % 1000),
                  static_cast<long long>(ms / 1000 + 2));
    row_sql_.sliced.push_back(buf + take);
  }
}

Status ClientImpl::Open(const std::string& url, const Config& cfg, std::unique_ptr<ClientImpl>* out) {
  ClientOptions opts;
  Status s = ParseUrl(url, &opts);
  if (!s.ok()) return s;
  LockOptions lock_defaults;
  for (const auto& kv : cfg.values()) {
    if (IsClientKey(kv.first)) s = ApplyClientOption(kv.first, kv.second, &opts);
    else s = ApplyLockOption(kv.first, kv.second, &lock_defaults);
    if (!s.ok()) return s;
  }
  std::unique_ptr<ClientImpl> c(new ClientImpl(std::move(opts), lock_defaults));
  {
    PooledConn conn;
    s = c->pool_.Get(Clock::now() + std::chrono::seconds(c->opts_.connect_timeout_s), &conn);
    if (!s.ok()) return s;
    c->server_ = conn->server();
    s = c->InitSchema(*conn);
    if (!s.ok()) return s;
  }
  *out = std::move(c);
  return Status::OK();
}

ClientImpl::~ClientImpl() {
  {
    std::lock_guard<std::mutex> g(janitor_mu_);
    janitor_stop_ = true;
    janitor_cv_.notify_all();
  }
  if (janitor_.joinable()) {
    if (getpid() == pid_) janitor_.join();
    else janitor_.detach();  // forked child: the thread is not ours
  }
}

void ClientImpl::StartJanitor() {
  if (opts_.cleanup_interval_ms <= 0) return;
  janitor_ = std::thread([this] { JanitorLoop(); });
}

void ClientImpl::JanitorLoop() {
  mysql_thread_init();
  std::unique_lock<std::mutex> g(janitor_mu_);
  while (!janitor_stop_) {
    // Spread the clients of a fleet: +-10% jitter on the interval.
    thread_local std::minstd_rand rng(std::random_device{}());
    int64_t iv = opts_.cleanup_interval_ms;
    std::uniform_int_distribution<int64_t> d(iv * 9 / 10, iv * 11 / 10);
    if (janitor_cv_.wait_for(g, std::chrono::milliseconds(d(rng)), [&] { return janitor_stop_; }))
      break;
    g.unlock();
    uint64_t deleted = 0;
    bool ran = false;
    Status s = Cleanup(&deleted, &ran);
    if (!s.ok()) {
      Raise(EventType::kCleanup, Severity::kWarning, "", "", 0,
            "periodic cleanup failed: " + s.message());
    }
    g.lock();
  }
  g.unlock();
  mysql_thread_end();
}

Status ClientImpl::Cleanup(uint64_t* deleted, bool* ran) {
  *deleted = 0;
  *ran = false;
  const std::string t = Quote(opts_.table), f = Quote(opts_.table + "_fence");
  // One cleaner at a time across all clients: a lease of its own (A8).
  static const std::string kGuard = "dlock:cleanup";
  const std::string owner = NewOwner();
  LeaseAttempt a;
  Status s = LeaseAcquire(kGuard, owner, 60000, Clock::now(), nullptr, &a);
  if (!s.ok()) return s;
  if (!a.won) return Status::OK();
  *ran = true;
  PooledConn conn;
  s = GetConn(Clock::now(), &conn);
  ExecResult r;
  std::string cutoff;
  if (s.ok())
    s = conn->Exec("SELECT DATE_FORMAT(UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND, '%Y-%m-%d %H:%i:%s.%f')",
                   {Param::Int(opts_.cleanup_grace_ms * 1000)}, &r);
  if (s.ok() && !r.rows.empty() && r.rows[0][0]) cutoff = *r.rows[0][0];
  // Each batch is one transaction: the fence floor row is locked first (new
  // keys read it with a share lock, so none is created meanwhile), the rows
  // to delete are locked next (with their index gaps, so a release cannot
  // move another row into the range), the floor rises above their tokens,
  // and exactly those rows go. A re-created key then starts above every
  // token it ever issued (B1).
  for (int batch = 0; s.ok() && !cutoff.empty() && batch < 1000; ++batch) {
    const std::string range = " WHERE expire_time < ? ORDER BY expire_time LIMIT ?";
    std::vector<Param> p = {Param::Text(cutoff), Param::Int(opts_.cleanup_batch)};
    // REPEATABLE READ: the locking read below must lock the index gaps too.
    s = conn->Query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    if (s.ok()) s = conn->Query("START TRANSACTION");
    if (s.ok()) s = conn->Exec("SELECT fence_floor FROM " + f + " WHERE id = 1 FOR UPDATE", {}, &r);
    if (s.ok()) s = conn->Exec("SELECT fence FROM " + t + range + " FOR UPDATE", p, &r);
    uint64_t n = 0, max_fence = 0;
    if (s.ok()) {
      n = r.rows.size();
      for (const Row& row : r.rows)
        if (row[0]) max_fence = std::max<uint64_t>(max_fence, std::strtoull(row[0]->c_str(), nullptr, 10));
    }
    if (s.ok() && n > 0) {
      s = conn->Exec("UPDATE " + f + " SET fence_floor = GREATEST(fence_floor, ?) WHERE id = 1",
                     {Param::Int(static_cast<int64_t>(max_fence))}, &r);
      if (s.ok()) s = conn->Exec("DELETE FROM " + t + range, p, &r);
      if (s.ok()) *deleted += r.affected;
    }
    if (s.ok()) s = conn->Query("COMMIT");
    if (!s.ok()) {
      if (!conn->broken()) (void)conn->Query("ROLLBACK");
      if (s.server_errno() == ER_LOCK_DEADLOCK) {  // an acquirer raced us: again
        JitterSleep(std::min(batch, 5));
        s = Status::OK();
        continue;
      }
      break;
    }
    if (n < static_cast<uint64_t>(opts_.cleanup_batch)) break;
  }
  if (s.ok()) {
    Status c = conn->Exec("SELECT COUNT(*) FROM " + t, {}, &r);
    if (c.ok() && !r.rows.empty() && r.rows[0][0])
      counters_.table_rows.store(std::strtoull(r.rows[0][0]->c_str(), nullptr, 10));
  }
  conn.Reset();
  bool released = false, ours = false;
  (void)LeaseRelease(kGuard, owner, nullptr, &released, &ours);
  counters_.cleanup_runs.fetch_add(1);
  counters_.cleanup_deleted.fetch_add(*deleted);
  if (*deleted > 0) {
    Raise(EventType::kCleanup, Severity::kInfo, "", "", 0,
          "cleanup deleted " + std::to_string(*deleted) + " expired lease rows; " +
              std::to_string(counters_.table_rows.load()) + " rows remain");
  }
  return s;
}

Status ClientImpl::CheckColumns(Conn& conn, const std::string& table,
                                const std::vector<std::pair<std::string, std::string>>& want) {
  ExecResult r;
  Status s = conn.Exec(
      "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
      "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
      {Param::Text(table)}, &r);
  if (!s.ok()) return s;
  if (r.rows.empty()) return Status(Code::kState, "missing");
  for (const auto& w : want) {
    bool found = false;
    for (const Row& row : r.rows) {
      if (row[0] && *row[0] == w.first) {
        found = row[1] && row[1]->compare(0, w.second.size(), w.second) == 0;
        if (!found)
          return Status(Code::kDb, "table " + table + " exists but column " + w.first + " is " +
                                       (row[1] ? *row[1] : "NULL") + ", dlock needs " + w.second +
                                       "...: choose another table name (table=/row_table=) or "
                                       "migrate it (see README, Schema)");
        break;
      }
    }
    if (!found)
      return Status(Code::kDb, "table " + table + " exists but has no column " + w.first +
                                   ": choose another table name (table=/row_table=) or migrate it "
                                   "(see README, Schema)");
  }
  return Status::OK();
}

std::vector<SchemaTable> SchemaTables(const ClientOptions& opts) {
  const std::string t = opts.table, f = opts.table + "_fence", r = opts.row_table;
  // Every column is binary or numeric: the server's default character set
  // and collation cannot change what a key means (B2).
  return {
      {t,
       {{"lock_key", "varbinary("}, {"owner", "varbinary("}, {"expire_time", "datetime(6)"},
        {"create_time", "datetime(6)"}, {"fence", "bigint"}},
       "CREATE TABLE IF NOT EXISTS " + Quote(t) +
           " (lock_key VARBINARY(512) NOT NULL COMMENT 'lock name, compared byte for byte',"
           " owner VARBINARY(255) NOT NULL COMMENT 'host:pid:uuid of the holder; empty = free',"
           " expire_time DATETIME(6) NOT NULL COMMENT 'UTC, by the server clock',"
           " create_time DATETIME(6) NOT NULL COMMENT 'UTC, when the current holder acquired',"
           " fence BIGINT UNSIGNED NOT NULL COMMENT 'fencing token: grows with every acquisition',"
           " PRIMARY KEY (lock_key), KEY idx_expire_time (expire_time))"
           " ENGINE=InnoDB COMMENT='dlock lease locks'"},
      {f,
       {{"id", "tinyint"}, {"fence_floor", "bigint"}},
       "CREATE TABLE IF NOT EXISTS " + Quote(f) +
           " (id TINYINT UNSIGNED NOT NULL PRIMARY KEY,"
           " fence_floor BIGINT UNSIGNED NOT NULL COMMENT 'highest token of any deleted lease row')"
           " ENGINE=InnoDB COMMENT='dlock: fencing floor kept across cleanup'"},
      {r,
       {{"lock_name", "varbinary("}, {"updated_time", "datetime(6)"}},
       "CREATE TABLE IF NOT EXISTS " + Quote(r) +
           " (lock_name VARBINARY(512) NOT NULL COMMENT 'lock name, compared byte for byte',"
           " updated_time DATETIME(6) NULL COMMENT 'UTC, when the row was created',"
           " PRIMARY KEY (lock_name)) ENGINE=InnoDB COMMENT='dlock row locks (SELECT ... FOR UPDATE)'"},
  };
}

std::string SchemaSeedSql(const ClientOptions& opts) {
  return "INSERT IGNORE INTO " + Quote(opts.table + "_fence") + " (id, fence_floor) VALUES (1, 0)";
}

Status ClientImpl::InitSchema(Conn& conn) {
  for (const SchemaTable& tb : SchemaTables(opts_)) {
    Status s = CheckColumns(conn, tb.name, tb.cols);
    if (s.code() == Code::kState) {  // missing: create it
      s = conn.Query(tb.ddl);
      if (!s.ok()) return s;
      s = CheckColumns(conn, tb.name, tb.cols);
    }
    if (!s.ok()) return s;
  }
  return conn.Query(SchemaSeedSql(opts_));
}

std::string ClientImpl::NewOwner() {
  unsigned char b[16];
  ssize_t n = getrandom(b, sizeof b, 0);
  if (n != static_cast<ssize_t>(sizeof b)) {  // never expected; fall back, still unique enough
    std::random_device rd;
    for (auto& x : b) x = static_cast<unsigned char>(rd());
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // UUID v4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char uuid[37];
  std::snprintf(uuid, sizeof uuid,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return host_ + ":" + std::to_string(getpid()) + ":" + uuid;
}

Status ClientImpl::GetConn(Clock::time_point deadline, PooledConn* out,
                           const std::function<bool()>& stop) {
  auto floor = Clock::now() + kPoolGrace;
  return pool_.Get(deadline > floor ? deadline : floor, out, stop);
}

Clock::time_point ClientImpl::RetryUntil(Clock::time_point deadline) const {
  return std::max(deadline, Clock::now() + std::chrono::seconds(opts_.connect_timeout_s));
}

Status ClientImpl::GaveUp(const Status& s, const char* what) const {
  if (IsOutcomeUnknown(static_cast<unsigned>(s.server_errno())))
    return Status(Code::kUnknown,
                  std::string(what) + ": the connection failed while the statement was in flight, "
                  "too late to re-check; " + s.message(),
                  s.server_errno());
  return s;
}

Status ClientImpl::LeaseAcquire(const std::string& key, const std::string& owner, int64_t ttl_ms,
                                Clock::time_point deadline, Conn* preferred, LeaseAttempt* out,
                                const std::function<bool()>& stop) {
  Status s;
  int deadlocks = 0;
  // A dropped statement is re-run on a fresh connection only while the call
  // is young: a server that let one statement time out is not asked again.
  const auto retry_until = RetryUntil(deadline);
  for (int conn_try = 0; conn_try < kConnRetries;) {
    PooledConn pc;
    Conn* c = preferred != nullptr && !preferred->broken() ? preferred : nullptr;
    if (c == nullptr) {
      s = GetConn(deadline, &pc, stop);
      if (!s.ok()) return s;
      c = &*pc;
    }
    ExecResult r;
    auto sent = Clock::now();
    s = c->Exec(lease_sql_.acquire, {Param::Bytes(key), Param::Bytes(owner), Param::Int(ttl_ms * 1000)}, &r);
    if (c->broken()) preferred = nullptr;
    if (s.ok()) {
      // 1 = inserted, 2 = took over / repeated our own; 0 = held by another.
      out->won = r.affected > 0;
      out->sent_at = sent;
      if (out->won) {
        out->fence = r.insert_id;
        out->remaining_us = ttl_ms * 1000;
      } else {
        out->fence = 0;
        out->remaining_us = static_cast<int64_t>(r.insert_id);
      }
      return s;
    }
    if (s.server_errno() == ER_LOCK_DEADLOCK && deadlocks < kDeadlockRetries) {
      JitterSleep(deadlocks++);
      continue;
    }
    if (!c->broken()) return s;
    if (Clock::now() >= retry_until) return GaveUp(s, "acquire");
    ++conn_try;  // dropped: the statement is idempotent for our owner, re-run it
  }
  return GaveUp(s, "acquire");
}

Status ClientImpl::LeaseRenew(const std::string& key, const std::string& owner, int64_t ttl_ms,
                              bool* renewed, Clock::time_point* sent_at) {
  Status s;
  int deadlocks = 0;
  const auto retry_until = RetryUntil(Clock::now());
  for (int conn_try = 0; conn_try < kConnRetries;) {
    PooledConn c;
    s = GetConn(Clock::now(), &c);
    if (!s.ok()) return s;
    ExecResult r;
    *sent_at = Clock::now();
    s = c->Exec(lease_sql_.renew, {Param::Int(ttl_ms * 1000), Param::Bytes(key), Param::Bytes(owner)}, &r);
    if (s.ok()) {
      *renewed = r.affected == 1;
      return s;
    }
    if (s.server_errno() == ER_LOCK_DEADLOCK && deadlocks < kDeadlockRetries) {
      JitterSleep(deadlocks++);
      continue;
    }
    if (!c->broken()) return s;
    if (Clock::now() >= retry_until) return GaveUp(s, "renew");
    ++conn_try;
  }
  return GaveUp(s, "renew");
}

Status ClientImpl::LeaseRelease(const std::string& key, const std::string& owner, Conn* preferred,
                                bool* released, bool* ours) {
  Status s;
  int deadlocks = 0;
  bool retried_after_drop = false;
  const auto retry_until = RetryUntil(Clock::now());
  for (int conn_try = 0; conn_try < kConnRetries;) {
    PooledConn pc;
    Conn* c = preferred != nullptr && !preferred->broken() ? preferred : nullptr;
    if (c == nullptr) {
      s = GetConn(Clock::now(), &pc);
      if (!s.ok()) return s;
      c = &*pc;
    }
    ExecResult r;
    s = c->Exec(lease_sql_.release, {Param::Bytes(key), Param::Bytes(owner)}, &r);
    if (c->broken()) preferred = nullptr;
    if (s.ok()) {
      *ours = r.affected == 1;
      *released = *ours && r.insert_id == 1;
      if (!*ours && retried_after_drop) {
        // The first attempt may have released it before the drop: a free
        // row (empty owner) means nobody took it since, so it was ours.
        ExecResult rr;
        s = c->Exec(lease_sql_.read, {Param::Bytes(key)}, &rr);
        if (!s.ok()) return s;
        if (!rr.rows.empty() && rr.rows[0][0] && rr.rows[0][0]->empty()) *ours = *released = true;
      }
      return Status::OK();
    }
    if (s.server_errno() == ER_LOCK_DEADLOCK && deadlocks < kDeadlockRetries) {
      JitterSleep(deadlocks++);
      continue;
    }
    if (!c->broken()) return s;
    if (Clock::now() >= retry_until) return GaveUp(s, "release");
    retried_after_drop = true;
    ++conn_try;
  }
  return GaveUp(s, "release");
}

Status ClientImpl::EnsureRow(Conn& conn, const std::string& name, bool force_check) {
  if (!force_check) {
    std::lock_guard<std::mutex> g(rows_mu_);
    if (known_rows_.count(name)) return Status::OK();
  }
  ExecResult r;
  // A plain (consistent, non-locking) read first: INSERT IGNORE on an
  // existing row would wait for its holder.
  Status s = conn.Exec(row_sql_.exists, {Param::Bytes(name)}, &r);
  if (!s.ok()) return s;
  if (r.rows.empty()) {
    s = conn.Exec(row_sql_.create, {Param::Bytes(name)}, &r);
    // 1205: someone created it and holds it already; it exists, which is all
    // we need.
    if (!s.ok() && s.server_errno() != ER_LOCK_WAIT_TIMEOUT) return s;
  }
  std::lock_guard<std::mutex> g(rows_mu_);
  if (known_rows_.size() > 100000) known_rows_.clear();  // bound the memory
  known_rows_.insert(name);
  return Status::OK();
}

}  // namespace dlock
