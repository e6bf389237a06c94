#include "retry.h"

#include <mysqld_error.h>

#include <random>
#include <string>
#include <thread>

namespace dlock {

void JitterSleep(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  int base = 2 << attempt;  // 2, 4, 8, ... ms
  std::uniform_int_distribution<int> d(base / 2, base);
  std::this_thread::sleep_for(std::chrono::milliseconds(d(rng)));
}

Status GaveUp(const Status& s, const char* what) {
  if (IsOutcomeUnknown(static_cast<unsigned>(s.server_errno())))
    return Status(Code::kUnknown,
                  std::string(what) + ": the connection failed while the statement was in flight, "
                  "too late to re-check; " + s.message(),
                  s.server_errno());
  return s;
}

Status RunIdempotent(SqlConn* preferred, ConnSource* fresh, const RetryPolicy& p,
                     const Attempt& attempt) {
  SqlConn* conn = nullptr;
  int drops = 0, deadlocks = 0;
  bool rerun = false;
  Status last;  // of the attempt before
  for (;;) {
    if (conn == nullptr || conn->broken()) {
      if (preferred != nullptr && !preferred->broken()) {
        conn = preferred;
      } else if (Status s = fresh->Fresh(&conn); !s.ok()) {
        // No connection to re-check on: an attempt that may have run is
        // unknown, whatever kept us from asking.
        if (rerun && IsOutcomeUnknown(static_cast<unsigned>(last.server_errno())))
          return GaveUp(last, p.what);
        return s;
      }
    }
    Status s = attempt(*conn, rerun);
    last = s;
    if (s.ok()) return s;
    const bool deadlock = s.server_errno() == ER_LOCK_DEADLOCK && deadlocks < kMaxDeadlocks;
    if (!deadlock) {
      if (!conn->broken()) return s;
      // Dropped: re-run on a fresh connection while the call is young; a
      // server that let one statement time out is not asked for long.
      if (++drops >= kMaxDrops || Clock::now() >= p.retry_until) return GaveUp(s, p.what);
      rerun = true;
    }
    if (p.stop && p.stop()) {
      if (IsOutcomeUnknown(static_cast<unsigned>(s.server_errno()))) return GaveUp(s, p.what);
      return Status(Code::kCancelled, std::string(p.what) + ": cancelled");
    }
    if (deadlock) (p.sleep ? p.sleep : JitterSleep)(deadlocks++);
  }
}

}  // namespace dlock
