#include "retry.h"

#include <mysqld_error.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>

namespace dlock {

std::pair<int, int> JitterRangeMs(int attempt) {
  const int base = 2 << std::min(std::max(attempt, 0), 5);  // 2, 4, 8, ... 64 ms
  return {base / 2, base};
}

namespace {

// A jittered sleep within [range.first, range.second] ms; none for {0, 0}.
void SleepWithin(std::pair<int, int> range) {
  if (range.second <= 0) return;
  thread_local std::minstd_rand rng(std::random_device{}());
  std::uniform_int_distribution<int> d(range.first, range.second);
  std::this_thread::sleep_for(std::chrono::milliseconds(d(rng)));
}

}  // namespace

void JitterSleep(int attempt) { SleepWithin(JitterRangeMs(attempt)); }

std::pair<int, int> AcquireRerunRangeMs(int attempt) {
  return attempt <= 0 ? std::pair<int, int>{0, 0} : JitterRangeMs(attempt - 1);
}

void AcquireRerunSleep(int attempt) { SleepWithin(AcquireRerunRangeMs(attempt)); }

namespace {

// Why an attempt ended with its outcome open, for messages.
const char* WhyUnknown(int err) {
  return IsNodeError(static_cast<unsigned>(err))
             ? "its Galera node lost the cluster's primary component (quorum lost) with the "
               "statement in flight"
             : "the connection failed while the statement was in flight";
}

}  // namespace

Status GaveUp(const Status& s, const char* what) {
  if (IsOutcomeUnknown(static_cast<unsigned>(s.server_errno())))
    return Status(Code::kUnknown,
                  std::string(what) + ": " + WhyUnknown(s.server_errno()) +
                      ", too late to re-check; " + s.message(),
                  s.server_errno());
  return s;
}

Status RunIdempotent(SqlConn* preferred, ConnSource* fresh, const RetryPolicy& p,
                     const Attempt& attempt) {
  SqlConn* conn = nullptr;
  int drops = 0, deadlocks = 0;
  bool rerun = false;
  bool node_rerun = false;  // the one re-run past the window after a Galera node error is used
  // An attempt was cut off in flight, so it may have run: until an attempt
  // answers, the call's outcome is unknown, whatever ends it.
  bool in_doubt = false;
  int doubt_errno = 0;  // the drop's, for an end that has none of its own
  auto end = [&](const Status& s) {
    if (!in_doubt || IsOutcomeUnknown(static_cast<unsigned>(s.server_errno())))
      return GaveUp(s, p.what);
    return Status(Code::kUnknown,
                  std::string(p.what) + ": an earlier attempt may have run, as " +
                      WhyUnknown(doubt_errno) + ", and no later one could re-check; " + s.message(),
                  s.server_errno() != 0 ? s.server_errno() : doubt_errno);
  };
  for (;;) {
    if (conn == nullptr || conn->broken()) {
      if (preferred != nullptr && !preferred->broken()) {
        conn = preferred;
      } else if (Status s = fresh->Fresh(&conn); !s.ok()) {
        // Nothing of ours went out on it: a connect lost in its handshake
        // (2013) leaves no outcome unknown unless an earlier attempt did.
        return in_doubt ? end(s) : s;
      }
    }
    Status s = attempt(*conn, rerun);
    if (s.ok()) return s;
    const bool deadlock = s.server_errno() == ER_LOCK_DEADLOCK && deadlocks < kMaxDeadlocks;
    // The caller's wait is over: a conflict that outlasts the free re-runs
    // is a lock not acquired within the time (the other side holds it now).
    if (deadlock && deadlocks >= kFreeDeadlocks && Clock::now() >= p.deadline) {
      if (in_doubt) return end(s);
      return Status(Code::kBusy,
                    std::string(p.what) + ": not acquired within the wait: the server ended " +
                        std::to_string(deadlocks + 1) +
                        " attempts with a deadlock (1213; on Galera, a certification conflict "
                        "with another node's write); " + s.message(),
                    s.server_errno());
    }
    if (!deadlock) {
      if (!conn->broken()) return end(s);
      if (IsOutcomeUnknown(static_cast<unsigned>(s.server_errno()))) {
        in_doubt = true;
        doubt_errno = s.server_errno();
      }
      // Dropped: re-run on a fresh connection while the call is young; a
      // server that let one statement time out is not asked for long.
      // A Galera node error (1047/1180: this node lost the primary
      // component, the cluster may not have) gets one re-run past that, on
      // a fresh connection, which a multi-node URL's pool opens on another
      // node: there the attempt is re-checked rather than left unknown.
      if (++drops >= kMaxDrops || Clock::now() >= p.retry_until) {
        if (node_rerun || !IsNodeError(static_cast<unsigned>(s.server_errno()))) return end(s);
        node_rerun = true;
      }
      rerun = true;
    }
    if (p.stop && p.stop()) {
      if (in_doubt) return end(s);
      return Status(Code::kCancelled, std::string(p.what) + ": cancelled");
    }
    if (deadlock) (p.sleep ? p.sleep : JitterSleep)(deadlocks++);
  }
}

}  // namespace dlock
