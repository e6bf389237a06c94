#include "pool.h"

#include <mysql.h>

#include <algorithm>
#include <system_error>

namespace dlock {

PooledConn& PooledConn::operator=(PooledConn&& o) noexcept {
  if (this != &o) {
    Reset();
    pool_ = o.pool_;
    conn_ = std::move(o.conn_);
    outside_ = o.outside_;
    o.pool_ = nullptr;
    o.outside_ = false;
  }
  return *this;
}

void PooledConn::Reset() {
  if (pool_ != nullptr && conn_ != nullptr) pool_->Put(std::move(conn_), outside_);
  conn_.reset();
  pool_ = nullptr;
  outside_ = false;
}

bool PooledConn::LeaveBudget() {
  if (outside_) return true;
  if (pool_ == nullptr || conn_ == nullptr || !pool_->LeaveBudget()) return false;
  outside_ = true;
  return true;
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
  return open_ + outside_;
}

bool Pool::LeaveBudget() {
  MutexLock g(mu_);
  if (outside_ >= opts_.pool) return false;
  ++outside_;
  --open_;
  cv_.notify_all();  // a slot is free
  return true;
}

Status Pool::Get(Clock::time_point deadline, Clock::time_point connect_by, PooledConn* out,
                 const std::function<bool()>& stop) {
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
      Status s = Conn::Connect(opts_, &c, connect_by);
      if (s.ok()) c->set_counter(&sent_);
      if (s.ok() && c->server().read_only) {
        s = Status(Code::kReadOnly,
                   "server " + opts_.Where() +
                       " is read-only (a replica?): locks must be taken on the primary");
        c.reset();
      } else if (s.ok() && !c->server().unhealthy.empty() &&
                 c->server().unhealthy.rfind("wsrep_local_state_comment=", 0) != 0) {
        // A Galera node outside the primary component (quorum lost) answers
        // but fails every lock statement with 1047: say so now. (A node that
        // is only not Synced, a donor, is used when it is the URL's one host.)
        const std::string& why = c->server().unhealthy;
        s = Status(Code::kConnect,
                   "Galera node " + opts_.Where() + " cannot take locks: " + why +
                       (why.find(kNotPrimary) != std::string::npos ? std::string("; ") + kQuorumAdvice
                                                                   : std::string()));
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
    ++cv_waiters_;
    const std::cv_status waited = cv_.wait_until(mu_, until);
    --cv_waiters_;
    if (waited == std::cv_status::timeout && Clock::now() >= deadline && idle_.empty() &&
        open_ >= opts_.pool) {
      return Status(Code::kPool, "all " + std::to_string(opts_.pool) +
                                     " lock connections are busy (raise pool= or wait longer)");
    }
  }
}

void Pool::Put(std::unique_ptr<Conn> c, bool outside_budget) {
  // A connection leaves a lock as it came: a session a caller's statements
  // ran on (or one still in a transaction) is reset before anyone borrows
  // it again, outside the mutex (three round trips); one whose reset fails
  // is closed (ResetSession marks it broken).
  bool refused = false;  // the server refused the reset: says nothing about the others
  if (!c->broken() && c->NeedsReset()) {
    Status s = c->ResetSession();
    refused = !s.ok() && !IsConnectionError(static_cast<unsigned>(s.server_errno()));
  }
  MutexLock g(mu_);
  if (outside_budget) {  // counted in the budget again, for the lines below
    --outside_;
    ++open_;
  }
  if (refused || (c->broken() && c->aborted())) {  // only this one is done for (a cancel cut it)
    --open_;
    c.reset();
  } else if (c->broken()) {
    --open_;
    c.reset();
    open_ -= static_cast<int>(idle_.size());
    idle_.clear();
  } else if (open_ > opts_.pool) {  // back from outside the budget, no room for it
    --open_;
    c.reset();
  } else {
    idle_.push_back(Idle{std::move(c), Clock::now()});
    if (opts_.pool_idle_ms > 0 && !closer_.joinable() && !stop_) {
      // Put runs in destructors (PooledConn): no exception may leave it. A
      // thread that cannot start now is tried again at the next Put.
      try {
        closer_ = std::thread([this] { CloseIdle(); });
      } catch (const std::system_error&) {
      }
    }
    // Only a parked closer needs telling; one on a timer looks again in
    // time (CloseIdle). Waking it at every Put cost a thread switch per
    // lock cycle.
    if (closer_parked_) closer_cv_.notify_all();
  }
  // Only a Get that waits needs telling (it waits with mu_ held until the
  // wait releases it, so none is missed); none waiting spares the
  // condition variable's own mutex, per lock cycle.
  if (cv_waiters_ > 0) cv_.notify_all();
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
    // Never later than a connection's idle_for: the front came back first;
    // with none idle but some lent out, one that comes back after now is
    // due after now + idle_for. Only with none open at all does the closer
    // park until a Put wakes it, so a quiet process has no timer running.
    if (!idle_.empty()) {
      closer_cv_.wait_until(mu_, idle_.front().since + idle_for);
    } else if (open_ > 0 || outside_ > 0) {
      closer_cv_.wait_until(mu_, now + idle_for);
    } else {
      closer_parked_ = true;
      closer_cv_.wait(mu_);
      closer_parked_ = false;
    }
  }
  g.Unlock();
  mysql_thread_end();
}

}  // namespace dlock
