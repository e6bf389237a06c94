// The lease scheme's three one-statement operations (acquire, renew,
// release), each run with the retry rules (retry.h): used by the lease
// scheme (lease_scheme.cc) and by cleanup's guard lease (cleanup.cc).
// Idempotent for the same owner, so RunIdempotent re-runs them on a fresh
// connection when one drops, and on 1213.
#ifndef DLOCK_CORE_LEASE_OPS_H_
#define DLOCK_CORE_LEASE_OPS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "conn.h"
#include "pool.h"
#include "retry.h"

namespace dlock {

class ClientImpl;

// Brackets every attempt of a statement that may block (on each connection
// the retries use), so that a cancel can end it at once by shutting its
// socket: a lock's LockHost::EnterServerWait / LeaveServerWait (scheme.h).
// enter returns false when the call was cancelled already (the statement
// is not sent).
struct ServerWait {
  std::function<bool(Conn&)> enter;
  std::function<void()> leave;
};

// How long the holder believes in a lease it acquired or renewed: from when
// the statement was *sent*, by the client's monotonic clock, ttl less 1 part
// in 1000. The server counts ttl from the statement's start by its own clock,
// which is later, so while the two clocks run at the same rate the holder's
// deadline comes first. The 0.1% keeps it first while the server's clock
// runs up to 1000 ppm faster than ours (NTP slews each clock by at most
// 500 ppm): a 30 s lease ends 30 ms early here. Not covered: a server
// clock *stepped* forward, which ends every lease early by the step.
inline Clock::duration LeaseSpan(int64_t ttl_ms) {
  return std::chrono::microseconds(ttl_ms * 1000 - ttl_ms);
}

struct LeaseAttempt {
  bool won = false;
  uint64_t fence = 0;           // when won
  int64_t remaining_us = 0;     // when busy: the holder's lease, by the DB clock
  bool first_claim = false;     // when busy, ordered: no older live claim of another owner
  Clock::time_point sent_at{};  // when the winning statement was sent (+ LeaseSpan: our deadline)
};

// What a release statement said (it matches our row only while we own it,
// and reports through LAST_INSERT_ID whether the lease was still live).
inline void ReadRelease(const ExecResult& r, bool* freed, bool* ours) {
  *ours = r.affected == 1;
  *freed = *ours && r.insert_id == 1;
}

// preferred: a connection the caller already holds (used first; the pool
// serves the retries), or nullptr. wait (may be null): brackets each
// attempt's statement (ServerWait).
// ordered: the claim-ordered acquire (LeaseSql::acquire_ordered): a free
// lease is taken only if no older live claim of another owner waits for it.
Status LeaseAcquire(ClientImpl& client, const std::string& key, const std::string& owner,
                    int64_t ttl_ms, Clock::time_point deadline, Conn* preferred, LeaseAttempt* out,
                    const std::function<bool()>& stop = nullptr, const ServerWait* wait = nullptr,
                    bool ordered = false);
// The retry rules LeaseAcquire runs with: 1213 re-runs end with the wait
// (kBusy), the first of them at once (AcquireRerunSleep, retry.h).
RetryPolicy AcquireRetryPolicy(ClientImpl& client, Clock::time_point deadline,
                               const std::function<bool()>& stop);
// How long a claim lives after its last keep-alive (the claim order): what
// a waiter that died costs the others, never a ttl.
constexpr int64_t kClaimWindowUs = 500000;

// The claim order's place in line: claims it for owner (since now) or keeps
// the claim alive for window_us more; drops it. Idempotent, retried like
// the others.
Status LeaseClaim(ClientImpl& client, const std::string& key, const std::string& owner,
                  int64_t window_us, Clock::time_point deadline, Conn* preferred,
                  const std::function<bool()>& stop = nullptr);
Status LeaseUnclaim(ClientImpl& client, const std::string& key, const std::string& owner,
                    Conn* preferred);
// *renewed: the row was ours and live by the DB clock, and is extended.
Status LeaseRenew(ClientImpl& client, const std::string& key, const std::string& owner,
                  int64_t ttl_ms, bool* renewed, Clock::time_point* sent_at);
// *released: our row was live and is now free; *ours: it was still ours
// (false = someone else's now).
Status LeaseRelease(ClientImpl& client, const std::string& key, const std::string& owner,
                    Conn* preferred, bool* released, bool* ours);

}  // namespace dlock

#endif  // DLOCK_CORE_LEASE_OPS_H_
