#include "pool.h"

#include <mysql.h>

#include <algorithm>

namespace dlock {

PooledConn& PooledConn::operator=(PooledConn&& o) noexcept {
  if (this != &o) {
    Reset();
    pool_ = o.pool_;
    conn_ = std::move(o.conn_);
    o.pool_ = nullptr;
  }
  return *this;
}

void PooledConn::Reset() {
  if (pool_ != nullptr && conn_ != nullptr) pool_->Put(std::move(conn_));
  conn_.reset();
  pool_ = nullptr;
}

Pool::~Pool() {
  std::thread closer;
  {
    MutexLock g(mu_);
    stop_ = true;
    closer_cv_.notify_all();
    closer = std::move(closer_);
  }
  // The pool of a forked child is never destroyed (the client is leaked
  // there, see ~Client), so the closer is always ours to join.
  if (closer.joinable()) closer.join();
  MutexLock g(mu_);
  idle_.clear();
}

int Pool::open_count() const {
  MutexLock g(mu_);
  return open_;
}

Status Pool::Get(Clock::time_point deadline, PooledConn* out, const std::function<bool()>& stop) {
  RelockableMutexLock g(mu_);
  for (;;) {
    while (!idle_.empty()) {
      std::unique_ptr<Conn> c = std::move(idle_.back().conn);
      idle_.pop_back();
      if (c->LooksClosed()) {  // closed by the server while idle: never hand it out
        --open_;
        continue;
      }
      *out = PooledConn(this, std::move(c));
      return Status::OK();
    }
    if (open_ < opts_.pool) {
      ++open_;
      g.Unlock();
      std::unique_ptr<Conn> c;
      Status s = Conn::Connect(opts_, &c);
      if (s.ok()) c->set_counter(&sent_);
      if (s.ok() && c->server().read_only) {
        s = Status(Code::kReadOnly,
                   "server " + opts_.Where() +
                       " is read-only (a replica?): locks must be taken on the primary");
        c.reset();
      }
      if (!s.ok()) {
        g.Lock();
        --open_;
        cv_.notify_one();
        return s;
      }
      *out = PooledConn(this, std::move(c));
      return Status::OK();
    }
    if (stop && stop()) return Status(Code::kCancelled, "cancelled while waiting for a lock connection");
    // Sliced, so that stop() is seen without anyone notifying.
    auto until = stop ? std::min(deadline, Clock::now() + std::chrono::milliseconds(50)) : deadline;
    if (cv_.wait_until(mu_, until) == std::cv_status::timeout && Clock::now() >= deadline &&
        idle_.empty() && open_ >= opts_.pool) {
      return Status(Code::kPool, "all " + std::to_string(opts_.pool) +
                                     " lock connections are busy (raise pool= or wait longer)");
    }
  }
}

void Pool::Put(std::unique_ptr<Conn> c) {
  MutexLock g(mu_);
  if (c->broken()) {
    --open_;
    c.reset();
    open_ -= static_cast<int>(idle_.size());
    idle_.clear();
  } else {
    idle_.push_back(Idle{std::move(c), Clock::now()});
    if (opts_.pool_idle_ms > 0 && !closer_.joinable() && !stop_)
      closer_ = std::thread([this] { CloseIdle(); });
    closer_cv_.notify_all();
  }
  cv_.notify_all();
}

void Pool::CloseIdle() {
  mysql_thread_init();
  const auto idle_for = std::chrono::milliseconds(opts_.pool_idle_ms);
  RelockableMutexLock g(mu_);
  while (!stop_) {
    std::vector<std::unique_ptr<Conn>> expired;
    const auto now = Clock::now();
    while (!idle_.empty() && now - idle_.front().since >= idle_for) {
      expired.push_back(std::move(idle_.front().conn));
      idle_.erase(idle_.begin());
      --open_;
    }
    if (!expired.empty()) {
      cv_.notify_all();  // slots freed
      g.Unlock();
      expired.clear();  // closing sends COM_QUIT: not under mu_
      g.Lock();
      continue;
    }
    if (idle_.empty()) closer_cv_.wait(mu_);
    else closer_cv_.wait_until(mu_, idle_.front().since + idle_for);
  }
  g.Unlock();
  mysql_thread_end();
}

}  // namespace dlock
