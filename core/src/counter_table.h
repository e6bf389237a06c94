// dlock's counters (B6), each defined once, here: X(name, one doc line).
// DLOCK_COUNTERS are fields of Counters (events.h), counted by the core as
// things happen; DLOCK_POOL_COUNTERS are read from the client's pool when
// asked (X(name, how to read it from `Pool& pool`, doc)). Both expand into the
// by-name lookup and the name list of facade.cc (dlock_counter_names). The
// test core_unit checks dlock.h's list (names, order and doc lines) against it.
#ifndef DLOCK_CORE_COUNTER_TABLE_H_
#define DLOCK_CORE_COUNTER_TABLE_H_

#define DLOCK_COUNTERS(X)                                                                     \
  X(acquisitions, "successful dlock_try (first hold, not reentrant)")                         \
  X(reentries, "reentrant dlock_try on a held lock")                                          \
  X(busy, "dlock_try that returned DLOCK_BUSY")                                               \
  X(wait_ms, "total time spent inside dlock_try")                                             \
  X(releases, "successful releases")                                                          \
  X(handovers, "leases a release passed on to this process's next waiter (fair=1)")           \
  X(renewals, "leases extended (manual and watchdog)")                                        \
  X(renew_ticks, "watchdog ticks that renewed something")                                     \
  X(renew_statements, "statements the watchdog executed")                                     \
  X(lost, "held locks lost (expired, taken, connection died)")                                \
  X(max_hold_trips, "leases whose renewal max_hold_ms stopped")                               \
  X(cleanup_runs, "cleanup passes")                                                           \
  X(cleanup_deleted, "expired leases cleanup deleted")                                        \
  X(table_rows, "rows in the lease table at the last cleanup")                                \
  X(events_dropped, "events dropped (queue full, or events=0)")

#define DLOCK_POOL_COUNTERS(X)                                                                \
  X(statements, pool.sent_counter()->load(), "every statement sent to the server")            \
  X(pool_open, static_cast<uint64_t>(pool.open_count()),                                      \
    "lock connections open now, in use or idle")

#endif  // DLOCK_CORE_COUNTER_TABLE_H_
