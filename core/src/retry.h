// Re-running an idempotent statement (or transaction) after a deadlock or a
// dropped connection: one helper for the lease statements and cleanup's
// batches. It sees connections only through SqlConn (conn.h) and a
// ConnSource, so its paths are tested without a server (tests/core/
// test_retry.cc), as LevelDB tests its recovery through an Env that fails on
// cue.
#ifndef DLOCK_CORE_RETRY_H_
#define DLOCK_CORE_RETRY_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

#include "conn.h"

namespace dlock {

using Clock = std::chrono::steady_clock;

// The deadline of a wait of ms milliseconds from now. A negative ms is no
// limit (the wait ends when it is satisfied, cancelled or closed), and so is
// a wait past the clock's range: Clock::time_point::max().
// now: the caller's reading of the clock.
inline Clock::time_point WaitDeadline(int64_t ms, Clock::time_point now) {
  if (ms < 0 ||
      ms >= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)
                .count())
    return Clock::time_point::max();
  return now + std::chrono::milliseconds(ms);
}
inline Clock::time_point WaitDeadline(int64_t ms) { return WaitDeadline(ms, Clock::now()); }

// A call gives up at its kMaxDrops-th dropped connection, and after
// kMaxDeadlocks re-runs after a deadlock (1213). 1213 is also Galera's
// certification conflict, which several nodes writing one key meet often:
// with 5 re-runs, 5 of 28 runs of the 3-node contention test saw one
// surface; 20 re-runs with the sleep capped (below) cost at most ~1.1 s.
constexpr int kMaxDrops = 3;
constexpr int kMaxDeadlocks = 20;
// Of those re-runs, the first kFreeDeadlocks are made whatever the call's
// deadline (RetryPolicy::deadline): a brief conflict does not fail a try
// with no wait, and they cost a few ms (the sleeps are 1-2, 2-4, 4-8 ms;
// an acquire's 0, 1-2, 2-4 ms: AcquireRerunSleep).
constexpr int kFreeDeadlocks = 3;

// Sleeps a few ms, growing with attempt up to 32-64 ms, jittered: between
// re-runs after a deadlock (1213), so that the two sides do not collide
// again. JitterRangeMs(attempt) is its range, [first, second] ms.
void JitterSleep(int attempt);
std::pair<int, int> JitterRangeMs(int attempt);

// An acquire's sleep before re-run `attempt` after a 1213: none before the
// first, then JitterSleep(attempt - 1). On Galera nearly every 1213 of an
// acquire is a certification conflict with the very release it saw: a
// node's applier makes the released row visible (InnoDB commit) before its
// commit is recorded (after the redo flush), and an acquire that wins in
// that window is certified as not having seen the release. By the time the
// conflict is reported the release is nearly always recorded too (measured:
// no more conflicts with the re-run at once than without), so it wins;
// a sleep of 1-2 ms only delayed the handoff (measured: 12-17% of
// handoffs on a 3-node cluster on loopback met one). Between acquirers the
// one that won holds the row, and the re-run reports it busy (on Galera,
// once the winner's write is applied on the loser's node: a re-run that
// comes first meets a second 1213 and then backs off as before; on one
// server the re-run queues on the winner's row lock). A try with no wait
// (Try(0)) spends 3-6 ms on its free re-runs, not 7-14. AcquireRerunSleep
// sleeps within AcquireRerunRangeMs(attempt).
void AcquireRerunSleep(int attempt);
std::pair<int, int> AcquireRerunRangeMs(int attempt);

// The status a call returns when it stops retrying after a drop: kUnknown
// when the statement may have run (the connection failed while it was in
// flight), else s itself (e.g. 2006: it was never sent).
Status GaveUp(const Status& s, const char* what);

// Where the attempts that cannot use the caller's own connection get one: in
// production the client's pool (PoolConns, client_impl.h), in tests a script.
class ConnSource {
 public:
  virtual ~ConnSource() = default;
  // A connection for the next attempts; gives back the one handed out
  // before. Valid until the next Fresh() or the source's end.
  virtual Status Fresh(SqlConn** out) = 0;
};

struct RetryPolicy {
  RetryPolicy(const char* what, Clock::time_point retry_until,
              std::function<bool()> stop = nullptr)
      : what(what), retry_until(retry_until), stop(std::move(stop)) {}
  const char* what;                              // names the call in messages
  Clock::time_point retry_until;                 // no re-run after a drop from then on
  std::function<bool()> stop;                    // may be empty; true = cancel
  std::function<void(int)> sleep = JitterSleep;  // before re-run n after 1213
  // When the caller's wait is over (acquire sets it: its try's deadline).
  // Past it, no re-run after a 1213 but the first kFreeDeadlocks: the call
  // ends with kBusy, not acquired within the time. The default, no limit,
  // is for calls that must finish (release, renew, cleanup).
  Clock::time_point deadline = Clock::time_point::max();
};

// One attempt. rerun: an earlier attempt of this call was dropped with its
// connection, so it may have run, and the attempt may have to look at what
// it left (release re-reads the row). Its results go to the caller's
// variables; only the last attempt's count.
using Attempt = std::function<Status(SqlConn& conn, bool rerun)>;

// Runs attempt until it succeeds or may not be re-run, and returns the last
// status. The contract, which makes re-running safe only for attempts that
// are idempotent (the same statement for the same owner, or one transaction):
//  - connection: preferred (may be null) while it is not broken, else
//    fresh->Fresh(); a connection that still works is kept for the next
//    attempt.
//  - 1213: the attempt is run again after p.sleep(0), p.sleep(1), ...
//    at most kMaxDeadlocks times; past p.deadline, only the first
//    kFreeDeadlocks times, and then the call ends with kBusy (kUnknown if
//    an attempt was cut off in flight, as below).
//  - a broken connection: the attempt is run again, on a fresh one, with
//    rerun = true, until the kMaxDrops-th drop or p.retry_until.
//  - a connection broken by a Galera node error (1047/1180, IsNodeError):
//    as a drop, and when that ends the re-runs, one re-run more on a fresh
//    connection (another node, with a multi-node URL), so that a healthy
//    node answers or re-checks before the call gives up.
//  - p.stop is asked before every re-run: true ends the call (kCancelled).
//  - the call ends with the status that ended it (GaveUp: kUnknown for a
//    statement cut off in flight), except that once any attempt was cut off
//    in flight, every end but an answered attempt is kUnknown: that attempt
//    may have run, and nothing re-checked it.
Status RunIdempotent(SqlConn* preferred, ConnSource* fresh, const RetryPolicy& p,
                     const Attempt& attempt);

}  // namespace dlock

#endif  // DLOCK_CORE_RETRY_H_
