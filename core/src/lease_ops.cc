// The lease scheme's one-statement operations (lease_ops.h): the dialect's
// acquire, renew and release, run with the retry rules, their replies read.
#include "lease_ops.h"

#include "client_impl.h"
#include "retry.h"

namespace dlock {

RetryPolicy AcquireRetryPolicy(ClientImpl& client, Clock::time_point deadline,
                               const std::function<bool()>& stop) {
  RetryPolicy p("acquire", client.RetryUntil(deadline), stop);
  p.deadline = deadline;
  p.sleep = AcquireRerunSleep;
  return p;
}

Status LeaseAcquire(ClientImpl& client, const std::string& key, const std::string& owner, int64_t ttl_ms,
                                Clock::time_point deadline, Conn* preferred, LeaseAttempt* out,
                                const std::function<bool()>& stop, const ServerWait* wait,
                                bool ordered) {
  PoolConns fresh(&client, deadline, stop);
  const RetryPolicy p = AcquireRetryPolicy(client, deadline, stop);
  return RunIdempotent(preferred, &fresh, p, [&](SqlConn& c, bool) {
    ExecResult r;
    Conn* conn = &c == static_cast<SqlConn*>(preferred) ? preferred : fresh.current();
    if (wait != nullptr && !wait->enter(*conn))
      return Status(Code::kCancelled, "acquire: cancelled");
    auto sent = Clock::now();
    Status s = ordered
                   ? c.Exec(client.sql().lease.acquire_ordered,
                            {Param::Bytes(key), Param::Bytes(owner), Param::Int(ttl_ms * 1000),
                             Param::Bytes(key), Param::Bytes(owner), Param::Bytes(key),
                             Param::Bytes(owner), Param::Bytes(key), Param::Bytes(owner),
                             Param::Bytes(key), Param::Bytes(owner)},
                            &r)
                   : c.Exec(client.sql().lease.acquire,
                            {Param::Bytes(key), Param::Bytes(owner), Param::Int(ttl_ms * 1000)}, &r);
    if (wait != nullptr) wait->leave();
    if (!s.ok()) return s;
    // 1 = inserted, 2 = took over / repeated our own; 0 = held by another.
    out->won = r.affected > 0;
    // Every token is 1 or more, so a win without one means the server did
    // not report LAST_INSERT_ID: a trigger on the table (schema.cc). Never
    // hand out a lease without its token; this one runs out by its ttl.
    if (out->won && r.insert_id == 0)
      return Status(Code::kDb, "acquire: the server reported no fencing token for the lease it "
                               "granted (is there a trigger on the lock table? dlock needs "
                               "LAST_INSERT_ID() reported; drop the trigger or use another table=); "
                               "the lease is not used and runs out by its ttl");
    out->sent_at = sent;
    out->fence = out->won ? r.insert_id : 0;
    out->remaining_us = out->won ? ttl_ms * 1000 : static_cast<int64_t>(r.insert_id);
    out->first_claim = false;
    if (ordered && !out->won) {  // 2 x remaining, + 1 unless first in line
      out->first_claim = r.insert_id % 2 == 0;
      out->remaining_us = static_cast<int64_t>(r.insert_id / 2);
    }
    return s;
  });
}

Status LeaseRenew(ClientImpl& client, const std::string& key, const std::string& owner, int64_t ttl_ms,
                              bool* renewed, Clock::time_point* sent_at) {
  PoolConns fresh(&client, Clock::now(), nullptr, ConnectBy::kPerNode);
  RetryPolicy p("renew", client.RetryUntil(Clock::now()));
  return RunIdempotent(nullptr, &fresh, p, [&](SqlConn& c, bool) {
    ExecResult r;
    *sent_at = Clock::now();
    Status s = c.Exec(client.sql().lease.renew,
                      {Param::Int(ttl_ms * 1000), Param::Bytes(key), Param::Bytes(owner)}, &r);
    if (s.ok()) *renewed = r.affected == 1;
    return s;
  });
}

Status LeaseRelease(ClientImpl& client, const std::string& key, const std::string& owner, Conn* preferred,
                                bool* released, bool* ours) {
  PoolConns fresh(&client, Clock::now(), nullptr, ConnectBy::kPerNode);
  RetryPolicy p("release", client.RetryUntil(Clock::now()));
  return RunIdempotent(preferred, &fresh, p, [&](SqlConn& c, bool rerun) {
    ExecResult r;
    Status s = c.Exec(client.sql().lease.release, {Param::Bytes(key), Param::Bytes(owner)}, &r);
    if (!s.ok()) return s;
    ReadRelease(r, released, ours);
    if (*ours || !rerun) return s;
    // The dropped attempt may have released it: a free row (empty owner)
    // means nobody took it since, so it was ours.
    s = c.Exec(client.sql().lease.read, {Param::Bytes(key)}, &r);
    if (s.ok() && !r.rows.empty() && r.rows[0][0] && r.rows[0][0]->empty())
      *ours = *released = true;
    return s;
  });
}

Status LeaseClaim(ClientImpl& client, const std::string& key, const std::string& owner,
                  int64_t window_us, Clock::time_point deadline, Conn* preferred,
                  const std::function<bool()>& stop) {
  PoolConns fresh(&client, deadline, stop);
  RetryPolicy p("claim", client.RetryUntil(deadline), stop);
  return RunIdempotent(preferred, &fresh, p, [&](SqlConn& c, bool) {
    ExecResult r;
    return c.Exec(client.sql().lease.claim,
                  {Param::Bytes(key), Param::Bytes(owner), Param::Int(window_us), Param::Int(window_us)},
                  &r);
  });
}

Status LeaseUnclaim(ClientImpl& client, const std::string& key, const std::string& owner,
                    Conn* preferred) {
  PoolConns fresh(&client, Clock::now(), nullptr, ConnectBy::kPerNode);
  RetryPolicy p("unclaim", client.RetryUntil(Clock::now()));
  return RunIdempotent(preferred, &fresh, p, [&](SqlConn& c, bool) {
    ExecResult r;
    return c.Exec(client.sql().lease.unclaim, {Param::Bytes(key), Param::Bytes(owner)}, &r);
  });
}

}  // namespace dlock
