// dlock's options, each defined once, here: one row per option,
//   X(name, field, type, rule, min, max, words, default, doc)
//   name     the key for dlock_config_set and the URL's query
//   field    its member of ClientOptions / LockOptions (options.h), which
//            declares the member, its type and its default from this row
//   type     the member's C++ type
//   rule     how a value is read (options.cc):
//              Int        a whole number in min..max
//              Bool       0/1 (also true/false, on/off, yes/no)
//              Words      one of words (the enum's values in order)
//              Table      a table name (ValidateIdentifier)
//              Text       taken as it is
//              KeyPrefix  any bytes but NUL, at most max bytes
//   default  the member's default
//   doc      one line; dlock.h's list starts the option's text with it
// Range errors, defaults and Config's key check all come from these rows; the
// test core_unit checks dlock.h's option list (names, ranges, words,
// defaults, doc lines) against them. Included by options.h only.
#ifndef DLOCK_CORE_OPTION_TABLE_H_
#define DLOCK_CORE_OPTION_TABLE_H_

// Client options (dlock_client_open); they override the URL's query.
#define DLOCK_CLIENT_OPTIONS(X)                                                               \
  X(socket, socket, std::string, Text, 0, 0, nullptr, "",                                     \
    "Unix socket path, instead of the URL's host and port")                                   \
  X(pool, pool, int, Int, 1, 1024, nullptr, 8, "max lock connections")                        \
  X(pool_idle_ms, pool_idle_ms, int64_t, Int, 0, kMaxTtlMs, nullptr, 60000,                   \
    "close a pooled lock connection after this long unused; 0 = keep them open")              \
  X(connect_timeout, connect_timeout_s, int, Int, 1, 3600, nullptr, 5,                        \
    "connect timeout in seconds")                                                             \
  X(read_timeout, read_timeout_s, int, Int, 1, 86400, nullptr, 30,                            \
    "read timeout in seconds")                                                                \
  X(table, table, std::string, Table, 0, 0, nullptr, "distributed_lock", "lease table name")  \
  X(row_table, row_table, std::string, Table, 0, 0, nullptr, "fixed_lock",                    \
    "row-lock table name")                                                                    \
  X(dialect, dialect, SqlDialect, Words, 0, 0, kSqlDialectWords, SqlDialect::kAuto,           \
    "SQL dialect: auto (by the server's version string), or forced")                          \
  X(ssl_mode, ssl_mode, SslMode, Words, 0, 0, kSslModeWords, SslMode::kDisable,               \
    "TLS on every connection")                                                                \
  X(ssl_ca, ssl_ca, std::string, Text, 0, 0, nullptr, "",                                     \
    "CA file (PEM) to check the server's certificate with")                                   \
  X(cleanup_interval_ms, cleanup_interval_ms, int64_t, Int, 0, kMaxTtlMs, nullptr, 0,         \
    "run dlock_client_cleanup this often on a thread of the client's; 0 = never")             \
  X(cleanup_grace_ms, cleanup_grace_ms, int64_t, Int, 0, kMaxTtlMs, nullptr, 3600000,         \
    "delete leases expired longer ago than this")                                             \
  X(cleanup_batch, cleanup_batch, int, Int, 1, 100000, nullptr, 1000,                         \
    "rows per cleanup transaction")                                                           \
  X(events, events, int, Int, 0, 1000000, nullptr, 1024,                                      \
    "event queue capacity; the oldest are dropped")

// Lock options (dlock_open); set on a client they become its locks' defaults.
#define DLOCK_LOCK_OPTIONS(X)                                                                 \
  X(mode, mode, LockMode, Words, 0, 0, kLockModeWords, LockMode::kLease,                      \
    "lease lock or row lock")                                                                 \
  X(ttl_ms, ttl_ms, int64_t, Int, 1, kMaxTtlMs, nullptr, 30000, "lease length")               \
  X(auto_renew, auto_renew, bool, Bool, 0, 0, nullptr, false,                                 \
    "the client's watchdog renews the lease every ttl/3 until release")                       \
  X(max_hold_ms, max_hold_ms, int64_t, Int, 0, kMaxTtlMs, nullptr, 300000,                    \
    "circuit breaker: no renewal (automatic or manual) past this time since acquisition; "    \
    "0 = none")                                                                               \
  X(reentrant, reentrant, bool, Bool, 0, 0, nullptr, true,                                    \
    "the same holder taking it again counts up; released when the count returns to zero")     \
  X(holder, holder, Holder, Words, 0, 0, kHolderWords, Holder::kThread,                       \
    "who \"the same holder\" is")                                                             \
  X(shards, shards, int, Int, 0, 65536, nullptr, 0,                                           \
    "row locks: map the key onto one of N rows (0 = off)")                                    \
  X(shard_group, shard_group, std::string, KeyPrefix, 1, kMaxKeyBytes - 8, nullptr,           \
    "dlock-shard", "name prefix of the shard rows")                                           \
  X(transaction, transaction, bool, Bool, 0, 0, nullptr, false,                               \
    "lease locks: every acquisition also opens the lock's transaction, as if dlock_begin "    \
    "followed")                                                                               \
  X(wakeup, wakeup, Wakeup, Words, 0, 0, kWakeupWords, Wakeup::kAuto,                         \
    "how waiters learn of a release")                                                         \
  X(fair, fair, bool, Bool, 0, 0, nullptr, true,                                              \
    "no barging within a client")

#endif  // DLOCK_CORE_OPTION_TABLE_H_
