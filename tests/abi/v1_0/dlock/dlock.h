/*
 * dlock: distributed locks on the MySQL/MariaDB server you already run.
 *
 * This header is the stable C ABI. Every binding (Python, Go, Java, the CLI)
 * talks to the library through it or through the same C++ core.
 *
 * Conventions (they hold for every function below unless it says otherwise):
 *  - Handles are opaque. Each open or new function has exactly one close or free function, and
 *    every close/free accepts NULL.
 *  - The out-parameter comes first and is named `out`; on failure *out is set
 *    to NULL. The `dlock_error *err` comes last, is owned by the caller, and may
 *    be NULL. On success err->code is DLOCK_OK and err->message is "".
 *  - Functions return a dlock_code. DLOCK_OK is 0, DLOCK_BUSY (not acquired)
 *    is positive and is not an error; errors are negative. Values never change
 *    once released.
 *  - Strings passed in are copied; strings handed out are owned by the handle
 *    that returned them (valid until it is closed) or are static (said below).
 *  - No function calls user code, and the library never runs user code on its
 *    own threads.
 *  - Handles remember the process that created them: after fork() they refuse
 *    to act in the child (DLOCK_E_FORKED) and never release the parent's lock;
 *    closing them in the child only frees memory.
 *  - Passwords never appear in any message.
 */
#ifndef DLOCK_DLOCK_H_
#define DLOCK_DLOCK_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  define DLOCK_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#  define DLOCK_EXPORT __attribute__((visibility("default")))
#else
#  define DLOCK_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define DLOCK_VERSION_MAJOR 1
#define DLOCK_VERSION_MINOR 0
#define DLOCK_VERSION_PATCH 0

/* Result codes. Positive = a non-error outcome, negative = an error. */
typedef enum dlock_code {
  DLOCK_OK = 0,
  DLOCK_BUSY = 1,            /* not acquired: someone else holds it (try) */
  DLOCK_E_INVALID = -1,      /* bad argument: NULL, bad key, bad ttl, bad URL */
  DLOCK_E_CONNECT = -2,      /* cannot connect or authenticate */
  DLOCK_E_LOST = -3,         /* the lock is no longer ours (expired/taken) */
  DLOCK_E_READONLY = -4,     /* the server is read-only (a replica?) */
  DLOCK_E_UNSUPPORTED = -5,  /* refused by topology, e.g. row lock on Galera */
  DLOCK_E_DB = -6,           /* the server returned an unexpected error */
  DLOCK_E_STATE = -7,        /* call not valid in this state (not held, ...) */
  DLOCK_E_FORKED = -8,       /* handle created in another process (fork) */
  DLOCK_E_POOL = -9,         /* no lock connection free within the wait */
  DLOCK_E_UNKNOWN = -10,     /* connection lost mid-statement; outcome unknown
                                and could not be re-checked */
  DLOCK_E_INTERNAL = -11,    /* a bug or out of memory */
  DLOCK_E_TIMEOUT = -12,     /* a bounded wait (other than try) ran out */
  DLOCK_E_CANCELLED = -13,   /* dlock_cancel() interrupted the call */
  DLOCK_E_MAX_HOLD = -14     /* renewal refused: the lock's max hold time passed */
} dlock_code;

/* Caller-owned error report. Fixed size: put it on the stack. */
typedef struct dlock_error {
  int code;            /* a dlock_code */
  int server_errno;    /* MariaDB/Connector error number, 0 if none */
  char message[512];   /* NUL-terminated, never contains a password */
} dlock_error;

/* Lock modes (config key "mode"). */
#define DLOCK_MODE_LEASE "lease"
#define DLOCK_MODE_ROW "row"

/* Lock states reported by dlock_state(). */
typedef enum dlock_state_t {
  DLOCK_STATE_IDLE = 0,      /* never acquired, or released */
  DLOCK_STATE_HELD = 1,      /* held; for a lease, not expired by our clock */
  DLOCK_STATE_LOST = 2       /* was held, then lost (expired, taken, conn died) */
} dlock_state_t;

/* ---- library ----------------------------------------------------------- */

/* "1.0.0". Static string. Thread safety: any thread. */
DLOCK_EXPORT const char *dlock_version(void);
/* Stable name of a code, e.g. "DLOCK_E_LOST"; "DLOCK_UNKNOWN_CODE" for others.
 * Static string. Thread safety: any thread. */
DLOCK_EXPORT const char *dlock_code_name(int code);

/* ---- config: string key/value options ---------------------------------- */

typedef struct dlock_config dlock_config;

/* Thread safety: a config may be read by many threads at once (open calls)
 * but must not be modified while another thread uses it. Ownership: the
 * caller owns it; open calls copy what they need. */
DLOCK_EXPORT int dlock_config_new(dlock_config **out, dlock_error *err);
DLOCK_EXPORT void dlock_config_free(dlock_config *cfg);
/* Sets key to value (both copied). Unknown keys and values that do not parse
 * give DLOCK_E_INVALID at once, naming the key. Keys:
 *   client (dlock_client_open; they override the URL's query parameters):
 *     pool            max lock connections (1..1024, default 8)
 *     connect_timeout seconds (1..3600, default 5)
 *     read_timeout    seconds (1..86400, default 30)
 *     table           lease table name (default distributed_lock)
 *     row_table       row-lock table name (default fixed_lock)
 *     ssl_mode        disable|require|verify (default disable)
 *     ssl_ca          CA file for ssl_mode=verify
 *     cleanup_interval_ms  run dlock_client_cleanup this often on a thread of
 *                     the client's (0 = never, the default); one client at a
 *                     time across the fleet actually cleans
 *     cleanup_grace_ms  delete leases expired longer ago than this
 *                     (default 3600000)
 *     cleanup_batch   rows per cleanup transaction (default 1000)
 *     events          event queue capacity; the oldest are dropped (1024)
 *   lock (dlock_open; set on a client config they become its defaults):
 *     mode            lease|row (default lease)
 *     ttl_ms          lease length, 1..2592000000 (30 days), default 30000
 *     auto_renew      0|1: the client's watchdog renews the lease every
 *                     ttl/3 until release (default 0)
 *     max_hold_ms     circuit breaker: no renewal (automatic or manual) past
 *                     this time since acquisition; 0 = none (default 300000)
 *     reentrant       0|1: the same holder taking it again counts up
 *                     (default 1); released when the count returns to zero
 *     holder          thread|lock: who "the same holder" is (default thread:
 *                     the thread that acquired; lock: the lock object, for
 *                     languages without stable threads, e.g. Go)
 *     shards          row locks: map the key onto one of N rows
 *                     ("<shard_group>:1".."<shard_group>:N"); exclusion is
 *                     then per shard, not per key (default 0 = off)
 *     shard_group     name prefix of the shard rows (default dlock-shard)
 *     wakeup          auto|poll: waiters are woken by the releasing holder
 *                     through a server-side GET_LOCK name (auto; never used
 *                     on Galera) or only poll (default auto)
 */
DLOCK_EXPORT int dlock_config_set(dlock_config *cfg, const char *key,
                                  const char *value, dlock_error *err);

/* ---- client: a bounded pool of lock connections ------------------------ */

typedef struct dlock_client dlock_client;

/* Opens a client from
 *   mysql://user[:password]@host[:port]/database[?socket=..&pool=..&...]
 * (percent-decoded; the password may instead come from the environment
 * variable DLOCK_PASSWORD). Connects once to check the server (reachable,
 * writable, not a replica) and creates the lock tables if missing.
 * cfg may be NULL.
 * Thread safety: a client is safe to use from many threads at once.
 * Ownership: the caller closes it with dlock_client_close after closing every
 * lock opened on it. */
DLOCK_EXPORT int dlock_client_open(dlock_client **out, const char *url,
                                   const dlock_config *cfg, dlock_error *err);
DLOCK_EXPORT void dlock_client_close(dlock_client *client);

/* ---- lock objects ------------------------------------------------------- */

typedef struct dlock_lock dlock_lock;

/* Creates a lock object for key (key_len bytes; any bytes but NUL, 1..512
 * bytes, compared byte for byte) without acquiring it, like the article's
 * MysqlDistributedLock(conn, lock_key, timeout). cfg may be NULL.
 * Thread safety: a lock object may be shared by threads; calls on it are
 * serialised internally. Who holds it is set by the holder option: the
 * thread that acquired (default; only that thread may release) or the lock
 * object (holder=lock: any thread may release).
 * Ownership: the caller closes it with dlock_close; closing a held lock
 * releases it first (best effort; a row lock is rolled back). Closing the
 * client first is allowed: it lives on until its last lock is closed. */
DLOCK_EXPORT int dlock_open(dlock_lock **out, dlock_client *client,
                            const char *key, size_t key_len,
                            const dlock_config *cfg, dlock_error *err);
DLOCK_EXPORT void dlock_close(dlock_lock *lock);

/* Tries to take the lock, waiting at most wait_ms (0 = one attempt,
 * max 86400000). Returns DLOCK_OK (now held; a new owner id and fencing token
 * were assigned) or DLOCK_BUSY (someone else held it for the whole wait), or
 * an error. If the same holder (see the holder option) already holds it
 * through this object: DLOCK_OK and the hold count goes up (owner and token
 * unchanged), or DLOCK_E_STATE with reentrant=0. Another thread of the same
 * object waits like any other waiter. Reentrancy is per lock object: two
 * objects for one key are two holders, even in one thread.
 * The wait for a free pool connection is bounded by wait_ms, but is at least
 * 1 s, so that wait_ms=0 still gets a connection in a busy process. */
DLOCK_EXPORT int dlock_try(dlock_lock *lock, int64_t wait_ms, dlock_error *err);

/* Extends a held lease by its ttl, from the database's clock.
 * DLOCK_OK, or DLOCK_E_LOST (expired by the database clock or taken: the
 * object's state becomes LOST). For a row lock: checks that the lock's
 * connection and transaction are still alive. */
DLOCK_EXPORT int dlock_renew(dlock_lock *lock, dlock_error *err);

/* Releases the lock. DLOCK_OK, or DLOCK_E_LOST if it had already expired or
 * been taken (the other owner's row is never touched). Row lock: COMMIT.
 * DLOCK_E_STATE if not held. */
DLOCK_EXPORT int dlock_release(dlock_lock *lock, dlock_error *err);

/* Row lock only: ROLLBACK instead of COMMIT (the protected work failed). */
DLOCK_EXPORT int dlock_rollback(dlock_lock *lock, dlock_error *err);

/* Lease lock (A7): opens a transaction on a connection of the lock's own.
 * dlock_exec then runs there, and dlock_release runs the release inside it
 * and commits both (or, if the lease was lost, rolls both back and returns
 * DLOCK_E_LOST). dlock_rollback discards the transaction and keeps the lease.
 * Row locks are always in their transaction: DLOCK_OK, nothing to do. */
DLOCK_EXPORT int dlock_begin(dlock_lock *lock, dlock_error *err);

/* Runs one SQL statement on the lock's own connection, inside the lock's
 * transaction (row lock, or lease after dlock_begin), so that dlock_release
 * commits it together with the release. Parameters are bound as strings
 * (NULL pointer = SQL NULL). out_affected (may be NULL) receives the
 * affected-row count. No result set is returned; use it for
 * INSERT/UPDATE/DELETE. A DDL statement commits implicitly: don't. */
DLOCK_EXPORT int dlock_exec(dlock_lock *lock, const char *sql,
                            const char *const *params, size_t nparams,
                            int64_t *out_affected, dlock_error *err);

/* Blocks the calling thread until the lock is lost (DLOCK_E_LOST: expired,
 * taken, connection died, max hold ran out), released or not held
 * (DLOCK_OK), timeout_ms passes (DLOCK_E_TIMEOUT) or dlock_cancel is called
 * (DLOCK_E_CANCELLED). This is how a caller learns of a loss on its own
 * thread: the library never calls back. */
DLOCK_EXPORT int dlock_wait_lost(dlock_lock *lock, int64_t timeout_ms, dlock_error *err);

/* Makes dlock_try / dlock_wait_lost calls running on this lock in other
 * threads return DLOCK_E_CANCELLED promptly (a server-side wait is
 * interrupted with KILL QUERY). Calls started later are not affected.
 * Thread safety: any thread. Returns DLOCK_OK, or DLOCK_E_INVALID for NULL. */
DLOCK_EXPORT int dlock_cancel(dlock_lock *lock);

/* ---- accessors (never touch the network; any thread) ------------------- */

/* Current state (see dlock_state_t); a held lease whose deadline passed on
 * our monotonic clock reports LOST. */
DLOCK_EXPORT int dlock_state(const dlock_lock *lock);
/* 1 if held now, else 0. */
DLOCK_EXPORT int dlock_held(const dlock_lock *lock);
/* Owner id of the current/last acquisition ("" before the first). Owned by
 * the lock; valid until the next dlock_try or dlock_close. */
DLOCK_EXPORT const char *dlock_owner(const dlock_lock *lock);
/* Lease locks: the fencing token of the current/last acquisition, strictly
 * increasing per key across releases, takeovers, crashes and server
 * restarts; 0 before the first. Row locks: always 0. A row lock is its
 * transaction: it does not expire while the holder lives, and a holder whose
 * connection died cannot commit; a counter bumped inside that transaction
 * would be undone by the very rollback it should survive. Use a lease when
 * work outside the database needs a token. */
DLOCK_EXPORT uint64_t dlock_token(const dlock_lock *lock);
/* The key and its length (owned by the lock, valid until dlock_close). */
DLOCK_EXPORT const char *dlock_key(const dlock_lock *lock, size_t *out_len);
/* Milliseconds left on the lease by our monotonic clock (counted from when
 * the successful acquire/renew was sent); 0 if not held; -1 for row locks. */
DLOCK_EXPORT int64_t dlock_remaining_ms(const dlock_lock *lock);
/* Reentrant hold count: 0 when not held, 1 after the first dlock_try, +1
 * for each further dlock_try by the same holder. */
DLOCK_EXPORT int dlock_hold_count(const dlock_lock *lock);

/* ---- observability: events and counters (B6) --------------------------- */

typedef enum dlock_event_type {
  DLOCK_EVENT_LOST = 1,          /* a held lease was lost */
  DLOCK_EVENT_MAX_HOLD = 2,      /* max hold reached: renewal stopped (critical) */
  DLOCK_EVENT_RELEASE_GONE = 3,  /* release found the row taken by another owner */
  DLOCK_EVENT_RENEW_RETRY = 4,   /* a renewal failed transiently; retrying */
  DLOCK_EVENT_CLEANUP = 5        /* cleanup removed rows, or failed */
} dlock_event_type;

typedef enum dlock_severity {
  DLOCK_SEVERITY_INFO = 0,
  DLOCK_SEVERITY_WARNING = 1,
  DLOCK_SEVERITY_CRITICAL = 2
} dlock_severity;

/* Caller-owned. key holds key_len bytes (plus a NUL). */
typedef struct dlock_event {
  int type;              /* dlock_event_type */
  int severity;          /* dlock_severity */
  int64_t unix_ms;       /* wall-clock time it was raised, for logs */
  uint64_t token;        /* fencing token of the lease concerned, or 0 */
  size_t key_len;
  char key[513];
  char owner[256];
  char message[256];
} dlock_event;

/* Takes the oldest event from the client's queue, waiting up to wait_ms.
 * DLOCK_OK (out filled) or DLOCK_E_TIMEOUT (none). Any thread. */
DLOCK_EXPORT int dlock_client_next_event(dlock_client *client, dlock_event *out,
                                         int64_t wait_ms, dlock_error *err);

/* Reads a counter by name; DLOCK_E_INVALID for an unknown name. Names:
 * acquisitions, reentries, busy, wait_ms, releases, renewals, renew_ticks,
 * renew_statements, lost, max_hold_trips, cleanup_runs, cleanup_deleted,
 * table_rows, events_dropped, statements (every statement sent to the
 * server), pool_open. Any thread. */
DLOCK_EXPORT int dlock_client_counter(const dlock_client *client, const char *name,
                                      uint64_t *out, dlock_error *err);
/* NULL-terminated array of the counter names. Static. */
DLOCK_EXPORT const char *const *dlock_counter_names(void);

/* A8: deletes leases expired longer than cleanup_grace_ms ago, in batches
 * through the expiry index, unless another client is cleaning right now
 * (then *out_deleted = 0). Also refreshes the table_rows counter.
 * out_deleted may be NULL. */
DLOCK_EXPORT int dlock_client_cleanup(dlock_client *client, uint64_t *out_deleted,
                                      dlock_error *err);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLOCK_DLOCK_H_ */
