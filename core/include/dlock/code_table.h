// dlock's result codes, each defined once, here:
//   X(enumerator of dlock::Code, value, name in the C API, one doc line)
// Expanded into dlock::Code (core.hpp), dlock::CodeName (facade.cc), the
// static_asserts of capi/src/dlock.cc against dlock.h's dlock_code, and
// Python's dlock._core.codes(). The test core_unit checks dlock.h's list
// (names, values and comments) against it, and the Python tests check
// dlock/_errors.py's exception map. Values are part of the C ABI: positive =
// a non-error outcome, negative = an error; never renumber.
#ifndef DLOCK_CODE_TABLE_H_
#define DLOCK_CODE_TABLE_H_

#define DLOCK_CODES(X)                                                                        \
  X(kOk, 0, DLOCK_OK, "success")                                                              \
  X(kBusy, 1, DLOCK_BUSY, "not acquired: someone else holds it (try)")                        \
  X(kInvalid, -1, DLOCK_E_INVALID, "bad argument: NULL, bad key, bad ttl, bad URL")           \
  X(kConnect, -2, DLOCK_E_CONNECT, "cannot connect or authenticate")                          \
  X(kLost, -3, DLOCK_E_LOST, "the lock is no longer ours (expired/taken)")                    \
  X(kReadOnly, -4, DLOCK_E_READONLY, "the server is read-only (a replica?)")                  \
  X(kUnsupported, -5, DLOCK_E_UNSUPPORTED, "refused by topology, e.g. row lock on Galera")    \
  X(kDb, -6, DLOCK_E_DB, "the server returned an unexpected error")                           \
  X(kState, -7, DLOCK_E_STATE, "call not valid in this state (not held, ...)")                \
  X(kForked, -8, DLOCK_E_FORKED, "handle created in another process (fork)")                  \
  X(kPool, -9, DLOCK_E_POOL, "no lock connection free within the wait")                       \
  X(kUnknown, -10, DLOCK_E_UNKNOWN,                                                           \
    "connection lost mid-statement; outcome unknown and could not be re-checked")             \
  X(kInternal, -11, DLOCK_E_INTERNAL, "a bug or out of memory")                               \
  X(kTimeout, -12, DLOCK_E_TIMEOUT, "a bounded wait (other than try) ran out")                \
  X(kCancelled, -13, DLOCK_E_CANCELLED, "dlock_cancel() interrupted the call")                \
  X(kMaxHold, -14, DLOCK_E_MAX_HOLD, "renewal refused: the lock's max hold time passed")

#endif  // DLOCK_CODE_TABLE_H_
