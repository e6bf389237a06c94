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

struct LeaseAttempt {
  bool won = false;
  uint64_t fence = 0;           // when won
  int64_t remaining_us = 0;     // when busy: the holder's lease, by the DB clock
  Clock::time_point sent_at{};  // when the winning statement was sent
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
Status LeaseAcquire(ClientImpl& client, const std::string& key, const std::string& owner,
                    int64_t ttl_ms, Clock::time_point deadline, Conn* preferred, LeaseAttempt* out,
                    const std::function<bool()>& stop = nullptr, const ServerWait* wait = nullptr);
// *renewed: the row was ours and live by the DB clock, and is extended.
Status LeaseRenew(ClientImpl& client, const std::string& key, const std::string& owner,
                  int64_t ttl_ms, bool* renewed, Clock::time_point* sent_at);
// *released: our row was live and is now free; *ours: it was still ours
// (false = someone else's now).
Status LeaseRelease(ClientImpl& client, const std::string& key, const std::string& owner,
                    Conn* preferred, bool* released, bool* ours);

}  // namespace dlock

#endif  // DLOCK_CORE_LEASE_OPS_H_
