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
 *    to act in the child (DLOCK_E_FORKED, dlock_cancel too) and never release
 *    the parent's lock. Closing them in the child deliberately frees nothing
 *    but the handle itself: the lock's and client's state, connections and
 *    threads' mutexes are the parent's (closing a connection would end the
 *    parent's session; a mutex held by a parent thread would hang), so they
 *    are leaked, and closing them in each of many children reclaims nothing.
 *  - Passwords never appear in any message.
 */
#ifndef DLOCK_DLOCK_H_
#define DLOCK_DLOCK_H_

#include <stddef.h>
#include <stdint.h>

#include "dlock/version.h" /* DLOCK_VERSION_MAJOR .. _NUMBER, written by CMake */

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

/* Result codes. Positive = a non-error outcome, negative = an error.
 * (The core's code table lists the same names, values and comments; a test
 * checks them.) */
typedef enum dlock_code {
  DLOCK_OK = 0,              /* success */
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

/* "1.3.0". Static string. Thread safety: any thread. */
DLOCK_EXPORT const char *dlock_version(void);
/* The loaded library's version as major * 10000 + minor * 100 + patch
 * (10300 for 1.3.0), to compare with DLOCK_VERSION_NUMBER, the header a
 * program was compiled against. Thread safety: any thread. Since 1.3. */
DLOCK_EXPORT int dlock_version_number(void);
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
 * give DLOCK_E_INVALID at once, naming the key. Keys (each starts with its
 * line in the core's option table; a test checks this list against it):
 *   client (dlock_client_open; they override the URL's query parameters):
 *     socket          Unix socket path, instead of the URL's host and port
 *     pool            max lock connections (1..1024, default 8)
 *     pool_idle_ms    close a pooled lock connection after this long unused;
 *                     0 = keep them open (0..2592000000, default 60000).
 *                     Every idle connection closes, none is kept: a quiet
 *                     process holds no connection (the next call connects
 *                     again, one round of connect + TLS). Connections lent
 *                     out (a held row lock, a lease's transaction or
 *                     wake-up name) are not idle; the watchdog's own
 *                     connection (auto_renew) closes the same way once no
 *                     lease is left to renew.
 *     connect_timeout connect timeout in seconds (1..3600, default 5)
 *     read_timeout    read timeout in seconds (1..86400, default 30)
 *     table           lease table name (default distributed_lock)
 *     row_table       row-lock table name (default fixed_lock)
 *     dialect         SQL dialect: auto (by the server's version string), or
 *                     forced: auto|mariadb|mysql (default auto). auto takes
 *                     mariadb when the server's version names MariaDB, and
 *                     mysql (MySQL 8.0/8.4) otherwise; forcing one is for
 *                     tests and for servers that describe themselves oddly
 *     ssl_mode        TLS on every connection: disable|require|verify
 *                     (default disable). require: every connection is
 *                     encrypted or refused (DLOCK_E_CONNECT, also when the
 *                     server offers no TLS); the server's identity is not
 *                     checked, except that with ssl_ca set its certificate
 *                     must chain to that CA. verify: as require, and the
 *                     certificate must chain to ssl_ca (or, without ssl_ca,
 *                     to the system's CAs) and name the URL's host (DNS name
 *                     or IP address)
 *     ssl_ca          CA file (PEM) to check the server's certificate with
 *     cleanup_interval_ms  run dlock_client_cleanup this often on a thread of
 *                     the client's; 0 = never (0..2592000000, default 0);
 *                     one client at a time across the fleet actually cleans
 *     cleanup_grace_ms  delete leases expired longer ago than this
 *                     (0..2592000000, default 3600000)
 *     cleanup_batch   rows per cleanup transaction (1..100000, default 1000)
 *     events          event queue capacity; the oldest are dropped
 *                     (0..1000000, default 1024)
 *   lock (dlock_open; set on a client config they become its defaults):
 *     mode            lease lock or row lock: lease|row (default lease)
 *     ttl_ms          lease length, 1..2592000000 (30 days), default 30000
 *     auto_renew      the client's watchdog renews the lease every ttl/3
 *                     until release: 0|1 (default 0). A row lock has no
 *                     expiry: it is kept until released anyway, and takes
 *                     auto_renew=1 as a no-op (since 1.3; refused before)
 *     max_hold_ms     circuit breaker: no renewal (automatic or manual) past
 *                     this time since acquisition; 0 = none (0..2592000000,
 *                     default 300000)
 *     reentrant       the same holder taking it again counts up; released
 *                     when the count returns to zero: 0|1 (default 1)
 *     holder          who "the same holder" is: thread|lock (default thread:
 *                     the thread that acquired, through any lock object of
 *                     the client for that key, see dlock_try;
 *                     lock: the lock object, for languages without stable
 *                     threads, e.g. Go; objects of one client for one key
 *                     and mode with the same options then wait for each
 *                     other in the client, see dlock_try)
 *     shards          row locks: map the key onto one of N rows (0 = off)
 *                     ("<shard_group>:1".."<shard_group>:N"); exclusion is
 *                     then per shard, not per key (0..65536, default 0)
 *     shard_group     name prefix of the shard rows (1..504 bytes, default
 *                     dlock-shard)
 *     transaction     lease locks: every acquisition also opens the lock's
 *                     transaction, as if dlock_begin followed; if that fails
 *                     the lease is released and the error returned: 0|1
 *                     (default 0; since 1.1)
 *     wakeup          how waiters learn of a release: auto|poll (default
 *                     auto: the releasing holder wakes them through a
 *                     server-side GET_LOCK name, never used on Galera; poll:
 *                     they only poll)
 *     fair            no barging within a client: 0|1 (default 1; since 1.4).
 *                     What fair=1 promises: among the threads that use one
 *                     hold (the lock objects of one client for one key and
 *                     mode: holder=thread and reentrant=1, or holder=lock
 *                     with the same options, see dlock_try), a
 *                     thread that is waiting in dlock_try when the hold is
 *                     released is served (holds the lock, or is taking it)
 *                     before any thread that asks after the release, the
 *                     releasing thread included; waiting threads are served
 *                     in arrival order, and a release wakes only the first.
 *                     A lease whose holder had waited for it (it keeps the
 *                     wake-up name) passes straight to that first thread in
 *                     the release's own statement, with the next token (the
 *                     counter handovers), unless a waiter outside the client
 *                     is blocked on the wake-up name: that one is served
 *                     first, as a plain release would. After 8 hand-overs
 *                     in a row one release is plain, so a waiter outside
 *                     that polls (wakeup=poll, or its client's pool full)
 *                     has the chance it has after any release; none
 *                     where the session's binlog_format is STATEMENT (a
 *                     replica would replay the statement with its own
 *                     GET_LOCK answers).
 *                     What it does not promise: any order across clients or
 *                     processes, or between objects that share no lock
 *                     (holder=thread with reentrant=0; objects whose options
 *                     differ). There the waiters learn of
 *                     a release from the server (the wake-up name, a row
 *                     lock's wait) and a client that saw the key contended
 *                     queues behind them, so a releaser that asks again
 *                     usually, not always, comes after them (the README's
 *                     performance table has the figures). On a Galera node,
 *                     where a release wakes nobody on other nodes, fair=1
 *                     also keeps a claim order in the server (the table
 *                     <table>_claim): the first waiting thread of each
 *                     client claims a place once it finds the lease busy, a
 *                     free lease goes to the oldest live claim, and waiters
 *                     poll at most 5 ms apart (the oldest 1 ms apart, for
 *                     0.2 s after it became first); a waiter that died in line
 *                     delays the others by at most 0.5 s. 0: whoever asks
 *                     first after a release may take it, also within a client
 *                     (a thread that releases and at once asks again usually
 *                     does), and on Galera waiters back off to 0.2 s
 */
DLOCK_EXPORT int dlock_config_set(dlock_config *cfg, const char *key,
                                  const char *value, dlock_error *err);

/* ---- client: a bounded pool of lock connections ------------------------ */

typedef struct dlock_client dlock_client;

/* Opens a client from
 *   mysql://user[:password]@host[:port]/database[?socket=..&pool=..&...]
 * (percent-decoded; the password may instead come from the environment
 * variable DLOCK_PASSWORD), also mariadb:// and SQLAlchemy's
 * mysql+DRIVER:// / mariadb+DRIVER:// (the driver is ignored); schemes
 * without regard to case. Host localhost with a port (localhost:3307) means
 * TCP to 127.0.0.1 at that port, in every language; localhost without a
 * port is Connector/C's default unix socket; socket= wins over both.
 * A URL error never quotes the user:password@host
 * part: it says what is wrong. Shapes that would put a password where
 * messages show it are refused (DLOCK_E_INVALID): a host with a ':' outside
 * [brackets] (the '@' forgotten), a user name with a raw '@', a raw ':' in
 * the database, an '@' after mysql:///, a password= URL option. Write such
 * characters in a user name or database %-encoded (%3A, %40).
 * The application's own settings are read too, into the same options:
 *   user:password@tcp(host:3306)/database?param=value&..
 *       a go-sql-driver DSN (also unix(/path), @/database = 127.0.0.1:3306,
 *       tcp([::1]:3306)): user and password are taken as they are, the
 *       password up to the last '@' before the last '/'; the database is
 *       %-decoded, parameter values query-unescaped ('/' as %2F). Read:
 *       timeout -> connect_timeout and readTimeout -> read_timeout (Go
 *       durations, rounded up to whole seconds; 0 keeps dlock's default),
 *       tls=true -> ssl_mode=verify, skip-verify|preferred -> require (no
 *       plain fallback), false -> disable; a registered TLS config name is
 *       refused. Ignored (the application's result shapes, charset, time
 *       zone, auth plugins; writeTimeout: read_timeout bounds writes too):
 *       allowAllFiles allowCleartextPasswords allowFallbackToPlaintext
 *       allowNativePasswords allowOldPasswords charset checkConnLiveness
 *       clientFoundRows collation columnsWithAlias compress
 *       connectionAttributes interpolateParams loc maxAllowedPacket
 *       multiStatements parseTime rejectReadOnly serverPubKey timeTruncate
 *       tinyInt1IsBool writeTimeout, and the session variables time_zone
 *       sql_mode autocommit transaction_isolation tx_isolation.
 *   jdbc:mysql://[user[:password]@]host[:port]/database?user=..&password=..
 *       (or jdbc:mariadb://) one host, no failover/load-balancing/
 *       replication form: the authority as in mysql://, parameters (names
 *       without regard to case) form-decoded ('+' is a space, a '&' in a
 *       password is %26). Read: user, password, connectTimeout ->
 *       connect_timeout and socketTimeout -> read_timeout (milliseconds,
 *       rounded up to seconds; 0 keeps dlock's default), sslMode
 *       (DISABLED -> disable; PREFERRED, REQUIRED, trust -> require;
 *       VERIFY_CA, VERIFY_IDENTITY, verify-ca, verify-full -> verify, which
 *       also checks the host name), else useSSL with requireSSL,
 *       verifyServerCertificate (Connector/J: verify only with it) and
 *       trustServerCertificate (MariaDB: verify unless it), serverSslCert
 *       (a file) -> ssl_ca, localSocket -> socket; a Java key store
 *       (trustCertificateKeyStoreUrl, trustStore) is refused. Ignored:
 *       characterEncoding characterSetResults connectionCollation useUnicode
 *       serverTimezone connectionTimeZone forceConnectionTimeZoneToSession
 *       preserveInstants useLegacyDatetimeCode zeroDateTimeBehavior
 *       tinyInt1isBit transformedBitIsBoolean yearIsDateType
 *       useServerPrepStmts cachePrepStmts prepStmtCacheSize
 *       prepStmtCacheSqlLimit rewriteBatchedStatements allowMultiQueries
 *       useAffectedRows useCompression tcpKeepAlive autoReconnect
 *       allowPublicKeyRetrieval allowLoadLocalInfile sessionVariables
 *       enabledTLSProtocols permitMysqlScheme maxPoolSize minPoolSize
 *       poolName maxIdleTime connectionAttributes serverRSAPublicKeyFile,
 *       and MariaDB's pool=true|false.
 *   In both, dlock's client options are read by their names and win over a
 *   driver's parameter; any other parameter is refused, every one named in
 *   the message, unless the name may be a password in the wrong place (a
 *   digit or a sign in it, right after password=, or in a URL without a
 *   password: then only a near miss of a known name is named). A DSN's
 *   tcp(localhost) and a JDBC URL's localhost mean TCP to 127.0.0.1 (for
 *   Connector/C, the host localhost is its unix socket). The drivers' own
 *   defaults are not copied: what the string does not say is dlock's
 *   default (TLS off, connect_timeout 5, read_timeout 30).
 *   Several independent servers (lock traffic beyond one server): full
 *       URLs joined by ';', e.g. mysql://app@db1/app;mysql://app@db2/app
 *       (split only where a new mysql://, mariadb:// (either also
 *       +DRIVER), jdbc:mysql:// or jdbc:mariadb:// URL begins, in any case,
 *       so a ';' in a password stays unless
 *       such a scheme follows it: write that one as %3B; a string that
 *       does not start with one of these URLs is never split, so a
 *       go-sql-driver DSN cannot be a member; each may be a multi-host
 *       URL; at most 64; cfg
 *       applies to each; the event queue is one for the client, so an
 *       events= that differs between servers is DLOCK_E_INVALID). Every key lives on one server, chosen by
 *       rendezvous hashing of the server's identity and the key (README,
 *       Topologies; dlock_client_server_of), and every call on a lock goes
 *       to that server only: exclusion and fencing tokens are per key.
 *       Every client must list the same servers (in any order), or two
 *       clients may hold one key at once. A server listed twice (also
 *       under two spellings: localhost:3307 and 127.0.0.1:3307) and a
 *       port-less localhost (the default unix socket) are
 *       DLOCK_E_INVALID; open connects to every server (an error names the
 *       one that failed); dlock_client_init_schema and
 *       dlock_client_cleanup act on each, dlock_client_counter sums them,
 *       dlock_client_next_event gives every server's events.
 * Connects once to check the server (reachable, writable, not a replica)
 * and creates the lock tables if missing.
 * cfg may be NULL.
 * Thread safety: a client is safe to use from many threads at once.
 * Ownership: the caller closes it with dlock_client_close after closing every
 * lock opened on it.
 * Connections: each lock connection raises its session wait_timeout to
 * 8 hours (28800 s, MariaDB's default) when the server's is lower, so that a
 * row lock, which is an open transaction on an idle connection, is not ended
 * by a short server wait_timeout while its holder works. An idle pooled
 * connection the server closed anyway is noticed without a round trip and
 * replaced; after one connection fails, the other idle ones are dropped too
 * (same server) rather than each tried in turn. A session that dlock_exec
 * ran statements on (a lease's transaction, a row lock) is reset before the
 * pool lends it again (COM_RESET_CONNECTION and the session settings
 * above), so nothing those statements set reaches another lock; a session
 * that cannot be reset is closed. Every lock connection is close-on-exec:
 * a process the caller fork+execs does not inherit it.
 * Pool budget: pool bounds the connections calls borrow. A dlock_try waiting
 * on the server holds one while it waits; a row lock holds one for its hold,
 * a lease in a transaction (dlock_begin) one until it ends; a held lease
 * holds none. A lease that had to wait keeps its wake-up name for its hold
 * on a connection outside the budget (at most pool of those; beyond that
 * the name is given back and its waiters poll), so a client opens at most
 * 2*pool connections. DLOCK_E_POOL: every connection of the budget stayed
 * lent for the whole wait (at least 1 s).
 * Time bounds (ct = connect_timeout, rt = read_timeout, in seconds): a
 * statement whose connection dropped is re-run on a fresh connection only
 * while the call is younger than max(its wait, ct); so dlock_renew and
 * dlock_release return within 2*ct + rt, dlock_try within
 * max(wait_ms, ct) + ct + rt, even when the server stops answering. */
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
 * object (holder=lock: any thread may release). While one thread is inside
 * dlock_try acquiring it (the lock not being held), dlock_release,
 * dlock_renew, dlock_rollback, dlock_begin and dlock_exec from other threads
 * do not touch the connections that acquisition uses: they return
 * DLOCK_E_LOST when the previous hold was the caller's and had been lost
 * (expired, taken), also once the acquiring call has freed what it left,
 * DLOCK_E_STATE otherwise (with holder=lock also for a sibling object's
 * lost hold: it is not the caller's). An operation already running when
 * the dlock_try starts finishes first.
 * Ownership: the caller closes it with dlock_close; closing a held lock
 * releases it first (best effort; a row lock is rolled back). dlock_close
 * may be called while other threads are inside calls on the lock (a
 * finalizer, a shutdown path): it cancels them (they return
 * DLOCK_E_CANCELLED), waits until every call has returned, then frees the
 * lock. No call may start after dlock_close has been called: the handle is
 * gone. Closing the client first is allowed: it lives on until its last lock
 * is closed. */
DLOCK_EXPORT int dlock_open(dlock_lock **out, dlock_client *client,
                            const char *key, size_t key_len,
                            const dlock_config *cfg, dlock_error *err);
DLOCK_EXPORT void dlock_close(dlock_lock *lock);

/* Tries to take the lock, waiting at most wait_ms (0 = one attempt; a
 * negative wait_ms = no limit: until the lock is acquired, dlock_cancel ends
 * the call, or dlock_close closes the lock; since 1.3, before which waits
 * were 0..86400000). An error (a server that cannot be reached, say) ends
 * any wait. Returns DLOCK_OK (now held; a new owner id and fencing token
 * were assigned) or DLOCK_BUSY (someone else held it for the whole wait, or
 * the server kept ending the attempt with a deadlock, 1213, which on Galera
 * is a certification conflict with another node's write, until the wait was
 * over: past it at most 3 re-runs are made, a few ms; since 1.4, before
 * which up to 20, about 1 s, ran past the wait), or an error (DLOCK_E_DB
 * after 20 re-runs within the wait). If the same holder (see the holder
 * option) already holds it:
 * DLOCK_OK and the hold count goes up (owner and token unchanged), or
 * DLOCK_E_STATE with reentrant=0. Another holder waits like any other waiter.
 * Holders (article 6.4): with holder=thread (the default) and reentrant=1
 * the lock objects of one client opened for the same key and mode share one
 * hold (a lease lock and a row lock of one key are two locks, in two tables):
 * the thread (or dlock_try_as id) that holds the key enters again through
 * any of them, a release through any of them counts down, the last one
 * releases the lock, and closing an object gives back the holds taken
 * through it (since 1.1; before, each object was a holder of its own).
 * Sharing objects must agree on every lock option: since 1.3, dlock_open
 * refuses (DLOCK_E_INVALID, naming the option and both values) such an
 * object when one with other lock options is open for the key and mode on
 * the client (else it would run on the first one's ttl, renewal or
 * transaction); before, they were separate holders. With holder=lock each
 * object is a holder of its own: it sees, re-enters, renews and releases its
 * own hold only (DLOCK_E_STATE, naming another lock object, for a sibling's;
 * any thread may make the call), and the objects of one client for one key
 * and mode share the lock's line in the client when their options agree
 * with those of the lock the client keeps for the key (the first open
 * object's, until every object sharing it is closed): one
 * waits for a sibling's hold without asking the server (DLOCK_BUSY then
 * says so, and dlock_busy_remaining_ms gives the sibling's lease by this
 * client's clock), and a release can hand the lease straight to the next
 * waiting object (fair=1, as between threads; in releases before this
 * one, each object waited on the server like another process). An object with other
 * options is not refused: it shares nothing, as do objects with
 * holder=thread and reentrant=0; each is a holder of its own, excluded like
 * another process. Other threads and other clients are other holders.
 * Re-entry stops at INT_MAX holds: one more dlock_try by that holder returns
 * DLOCK_E_STATE (the count never wraps). A dlock_try of the holder that runs
 * while a release of its hold is in flight (another thread's dlock_release,
 * dlock_rollback of a row lock, dlock_close) does not re-enter the hold
 * being given back: it waits for the release, within wait_ms, then takes the
 * lock afresh (DLOCK_BUSY if the release outlasts the wait).
 * The wait for a free pool connection is bounded by wait_ms, but is at least
 * 1 s, so that wait_ms=0 still gets a connection in a busy process. The
 * whole call returns within max(wait_ms, connect_timeout) + connect_timeout +
 * read_timeout (see dlock_client_open). DLOCK_E_UNKNOWN: the connection
 * failed while an acquiring statement was in flight and nothing could
 * re-check it: the lock is not held, but a lease that statement may have
 * taken stays taken until its ttl runs out. A call that dlock_cancel reached
 * returns DLOCK_E_CANCELLED whatever else happened; a lock it won (or may
 * have won, as above) in the race with the cancel is given back before it
 * returns, except one whose acquiring statement the cancel itself cut off:
 * dlock_cancel shuts the socket of the statement the call is waiting on
 * (a row wait, a wake-up wait, a lease attempt), so that the call returns
 * at once even from a server that does not answer; whether a lease attempt
 * cut off that way took the lease is unknown, as after DLOCK_E_UNKNOWN.
 * The server may also run such a statement only after the call returned,
 * even after the holder's release, and take the lease then. Either way
 * (cut off by a cancel, or DLOCK_E_UNKNOWN) the lock object's next
 * dlock_try acquires as that statement's owner, so it takes such a lease at
 * once, as its own (since 1.3; a dlock_try of another thread of the object
 * included, e.g. one whose wait the same dlock_cancel ended, and of the
 * lock objects that share its lock, see dlock_open: with holder=lock, a
 * sibling object too); for lock objects that do not share it and for other
 * processes such a lease runs out by its ttl. */
DLOCK_EXPORT int dlock_try(dlock_lock *lock, int64_t wait_ms, dlock_error *err);

/* dlock_try and dlock_release on behalf of a holder id chosen by the caller
 * instead of the calling OS thread, for holder=thread locks (with
 * holder=lock the object is the holder and the id is ignored). For bindings
 * whose threads are not OS threads: Java passes the Java thread's id, so
 * that a virtual thread that moves between carrier threads stays the same
 * holder. Ids only compare with ids: a plain dlock_try (the OS thread) and a
 * dlock_try_as with a nonzero id are different holders. Holder id 0 means
 * the calling OS thread in every function that takes one (dlock_try_as,
 * dlock_try_from, dlock_release_as, dlock_rollback_as, dlock_hold_count_as):
 * the same holder as the plain call (1.2.0 read 0 so only in
 * dlock_try_from; its _as calls took 0 as an ordinary id). Since 1.1. */
DLOCK_EXPORT int dlock_try_as(dlock_lock *lock, uint64_t holder, int64_t wait_ms,
                              dlock_error *err);
DLOCK_EXPORT int dlock_release_as(dlock_lock *lock, uint64_t holder, dlock_error *err);
/* dlock_rollback on behalf of holder (a row lock is checked against its
 * holder like dlock_release). Since 1.1. */
DLOCK_EXPORT int dlock_rollback_as(dlock_lock *lock, uint64_t holder, dlock_error *err);
/* The reentrant holds of holder: 0 when the lock is not held or is held by
 * another holder (with holder=lock: dlock_hold_count). Unlike the accessors
 * below, never the hold of another holder taken through this object. Never
 * touches the network; any thread. Since 1.1. */
DLOCK_EXPORT int dlock_hold_count_as(const dlock_lock *lock, uint64_t holder);

/* Cancelling a call that has not begun yet. dlock_cancel reaches calls
 * already inside the library; a binding whose cancel may come just before
 * the call begins (a Go context, a Java interrupt) takes a mark first, then
 * arms its cancel, then calls dlock_try_from with the mark: every
 * dlock_cancel on this object after the mark ends that call with
 * DLOCK_E_CANCELLED, even one that came before the call began. No
 * re-sending needed. holder: as dlock_try_as (0: the calling OS thread, as
 * dlock_try). dlock_wait_lost_from takes the same mark (since 1.2).
 * Since 1.1. */
DLOCK_EXPORT uint64_t dlock_cancel_mark(const dlock_lock *lock);
DLOCK_EXPORT int dlock_try_from(dlock_lock *lock, uint64_t holder, uint64_t cancel_mark,
                                int64_t wait_ms, dlock_error *err);

/* Extends a held lease by its ttl, from the database's clock.
 * DLOCK_OK, or DLOCK_E_LOST (expired by the database clock or taken: the
 * object's state becomes LOST). For a row lock: checks that the lock's
 * connection and transaction are still alive. Acts on the caller's hold
 * only (see "Whose hold" below): DLOCK_E_LOST when the caller's own hold was
 * lost (also after another holder took the key since), DLOCK_E_STATE when
 * the caller holds nothing here; never on another holder's hold. */
DLOCK_EXPORT int dlock_renew(dlock_lock *lock, dlock_error *err);

/* Releases the lock. DLOCK_OK, or DLOCK_E_LOST if it had already expired or
 * been taken (the other owner's row is never touched). Row lock: COMMIT.
 * DLOCK_E_STATE if not held. After a release the state is never HELD: IDLE
 * when the lock is known to be free (also when the lease was freed but the
 * transaction begun with dlock_begin failed: the error says so), LOST
 * otherwise (lost, unknown, or the release itself failed: a lease then stays
 * taken until it expires); a second release returns without touching the
 * database. Returns within 2*connect_timeout + read_timeout. Only the
 * holder releases (with holder=thread: the thread, or id with
 * dlock_release_as, that acquired; DLOCK_E_STATE for another caller; see
 * "Whose hold" below). */
DLOCK_EXPORT int dlock_release(dlock_lock *lock, dlock_error *err);

/* Row lock: ROLLBACK instead of COMMIT (the protected work failed); this
 * ends the hold (every reentrant hold), so only its holder may, as for
 * dlock_release. Lease lock: discards the transaction opened by dlock_begin
 * and keeps the lease; acts on the caller's hold, as dlock_renew. */
DLOCK_EXPORT int dlock_rollback(dlock_lock *lock, dlock_error *err);

/* Ends the hold without committing: the protected work failed. A row lock's
 * transaction and a lease's transaction (dlock_begin, transaction=1) roll
 * back; the lease is given back (a row lock is free with its rollback).
 * Unlike dlock_release, it ends every reentrant hold at once, whatever the
 * count: the levels share one transaction, and it is gone; a later
 * dlock_release by an outer level returns DLOCK_E_STATE. The one policy of
 * every binding's "run with the lock" helper: commit (dlock_release) when
 * the work succeeds, dlock_abort when it fails. Returns DLOCK_OK,
 * DLOCK_E_LOST if the hold had been lost meanwhile (nothing was committed
 * either way), DLOCK_E_STATE if the calling holder does not hold it. After
 * it the state is IDLE (free) or LOST, as after dlock_release. Thread
 * safety and holders: as dlock_release. Since 1.3. */
DLOCK_EXPORT int dlock_abort(dlock_lock *lock, dlock_error *err);
/* dlock_abort on behalf of holder (as dlock_release_as). Since 1.3. */
DLOCK_EXPORT int dlock_abort_as(dlock_lock *lock, uint64_t holder, dlock_error *err);

/* Lease lock (A7): opens a transaction on a connection of the lock's own.
 * dlock_exec then runs there, and dlock_release runs the release inside it
 * and commits both (or, if the lease was lost, rolls both back and returns
 * DLOCK_E_LOST). dlock_rollback discards the transaction and keeps the lease.
 * Row locks are always in their transaction: DLOCK_OK, nothing to do.
 * Acts on the caller's hold only, as dlock_renew. */
DLOCK_EXPORT int dlock_begin(dlock_lock *lock, dlock_error *err);

/* Runs one SQL statement on the lock's own connection, inside the lock's
 * transaction (row lock, or lease after dlock_begin), so that dlock_release
 * commits it together with the release. Parameters are bound as strings
 * (NULL pointer = SQL NULL). out_affected (may be NULL) receives the
 * affected-row count. No result set is returned; use it for
 * INSERT/UPDATE/DELETE.
 * Statements that would end the transaction are refused with
 * DLOCK_E_INVALID before they are sent: COMMIT, ROLLBACK (ROLLBACK TO
 * SAVEPOINT is fine), BEGIN, START TRANSACTION, XA, LOCK/UNLOCK TABLES,
 * a SET that assigns autocommit (in any of its assignments), and statements
 * with an implicit commit (CREATE, ALTER, DROP, RENAME, TRUNCATE, GRANT,
 * BACKUP, ...; CREATE/DROP TEMPORARY is fine).
 * What the statements change in the session (variables such as timestamp,
 * time_zone, sql_mode or autocommit, the transaction mode, user locks,
 * HANDLERs, temporary tables) ends with the hold: the connection is reset
 * before another lock uses it (see dlock_client_open).
 * After every statement the server's in-transaction flag is checked: if the
 * transaction ended anyway (a deadlock rolled it back, a procedure
 * committed), a row lock is LOST (DLOCK_E_LOST: the server released the
 * row), and a lease's transaction is gone (DLOCK_E_STATE, or the statement's
 * own error; the lease stays held; call dlock_begin again). Runs in the
 * caller's hold only, as dlock_renew: never in another holder's transaction. */
DLOCK_EXPORT int dlock_exec(dlock_lock *lock, const char *sql,
                            const char *const *params, size_t nparams,
                            int64_t *out_affected, dlock_error *err);

/* Blocks the calling thread until the lock is lost (DLOCK_E_LOST: expired,
 * taken, connection died, max hold ran out), released or not held
 * (DLOCK_OK), timeout_ms passes (DLOCK_E_TIMEOUT; a negative timeout_ms =
 * no limit, since 1.3) or dlock_cancel is called (DLOCK_E_CANCELLED). This
 * is how a caller learns of a loss on its own thread: the library never
 * calls back. Waits on the hold the accessors describe to the caller (see
 * "Whose hold" below): a watcher thread that holds nothing of its own waits
 * on the hold taken through this object. */
DLOCK_EXPORT int dlock_wait_lost(dlock_lock *lock, int64_t timeout_ms, dlock_error *err);
/* dlock_wait_lost counting every dlock_cancel on this object after
 * cancel_mark (from dlock_cancel_mark), also one that came before the call
 * began: a binding that watches for a loss on a thread of its own takes the
 * mark, checks its own "closing" flag, then calls this; its close sets the
 * flag and sends one dlock_cancel, which then always ends the wait. No
 * re-sending needed. Since 1.2. */
DLOCK_EXPORT int dlock_wait_lost_from(dlock_lock *lock, uint64_t cancel_mark, int64_t timeout_ms,
                                      dlock_error *err);

/* Makes dlock_try / dlock_wait_lost calls running on this lock in other
 * threads return DLOCK_E_CANCELLED promptly. A wait on the server (the
 * wake-up GET_LOCK, a row-lock wait) is ended by closing that connection's
 * socket, which works even when the server does not answer; a cancel that
 * arrives just before such a wait starts is seen when it starts. A lease
 * attempt in dlock_try is cut the same way (a lease it may have taken is
 * the object's next dlock_try's, else runs out by its ttl: see dlock_try);
 * renew and release round trips are let finish, so that their outcome is
 * known. Calls started later are not affected,
 * except a dlock_try_from / dlock_wait_lost_from given a mark taken before.
 * Thread safety: any thread. Returns DLOCK_OK, DLOCK_E_INVALID for NULL, or
 * DLOCK_E_FORKED in a forked child (nothing is cancelled or sent: the
 * waits are the parent's). */
DLOCK_EXPORT int dlock_cancel(dlock_lock *lock);

/* ---- accessors (never touch the network; any thread) ------------------- */

/* Whose hold. With holder=lock the object is the holder: every call and
 * accessor is about the object's hold, whichever thread makes it. With
 * holder=thread (objects of one client for a key and options share the
 * key's hold, see dlock_try), the accessors below (dlock_state, dlock_held,
 * dlock_owner, dlock_owner_copy, dlock_token, dlock_remaining_ms,
 * dlock_hold_count) and dlock_wait_lost answer for the calling thread's
 * hold, as seen through this object, in this order:
 *   1. the key's current hold if the caller holds it (through any object);
 *   2. else the caller's own hold that was lost while another holder has
 *      taken the key since: LOST, with that hold's token and owner, until
 *      the caller's next dlock_try;
 *   3. else the hold last taken through this object, by whichever holder
 *      (for a thread that holds nothing of its own here: a loss watcher, a
 *      binding's thread acting for an id): its state, or LOST once that
 *      hold was lost, or IDLE with its token and owner once it was released;
 *   4. else nothing: IDLE, token 0, owner "".
 * So a thread whose hold was lost never sees the next holder's hold as its
 * own, and an object that never acquired shows nothing held. The calls that
 * act on a hold do so only for its holder: dlock_release and a row lock's
 * dlock_rollback for the holder itself (DLOCK_E_STATE otherwise);
 * dlock_renew, dlock_begin, dlock_exec and a lease's dlock_rollback for
 * the holder, and, since they take no holder id, for a call without an id
 * through the object an id (dlock_try_as / dlock_try_from) took the hold
 * with; a caller whose own hold was lost gets DLOCK_E_LOST, any other
 * DLOCK_E_STATE. */

/* Current state (see dlock_state_t); a held lease whose deadline passed on
 * our monotonic clock reports LOST. A held row lock whose connection the
 * server closed (KILL, wait_timeout, restart: the server then rolled back
 * and freed the row) reports LOST, noticed without a round trip; so does
 * dlock_wait_lost, within 50 ms. */
DLOCK_EXPORT int dlock_state(const dlock_lock *lock);
/* 1 if held now, else 0. */
DLOCK_EXPORT int dlock_held(const dlock_lock *lock);
/* Owner id of the current/last acquisition ("" before the first; the hold
 * described under "Whose hold"). Owned by the lock; valid until the next
 * dlock_try or dlock_close. Only safe while no other thread calls dlock_try
 * on the lock (or on an object sharing its hold): a lock shared by threads
 * should read its owner with dlock_owner_copy. */
DLOCK_EXPORT const char *dlock_owner(const dlock_lock *lock);
/* Copies the owner id into buf (buf_size bytes; cut to buf_size - 1 and
 * NUL-terminated; buf may be NULL when buf_size is 0) and returns its full
 * length, like snprintf: a return >= buf_size means it was cut. Owner ids are
 * shorter than 256 bytes. Never torn by a concurrent dlock_try. Returns 0 and
 * writes "" for a NULL lock. Since 1.1. Thread safety: any thread. */
DLOCK_EXPORT size_t dlock_owner_copy(const dlock_lock *lock, char *buf, size_t buf_size);
/* Lease locks: the fencing token of the current/last acquisition, strictly
 * increasing per key across releases, takeovers, crashes and server
 * restarts, and across a lease table dropped and made again (its tokens
 * then continue above the next multiple of 2^40); 0 before the first. Row locks: always 0. A row lock is its
 * transaction: it does not expire while the holder lives, and a holder whose
 * connection died cannot commit; a counter bumped inside that transaction
 * would be undone by the very rollback it should survive. Use a lease when
 * work outside the database needs a token. */
DLOCK_EXPORT uint64_t dlock_token(const dlock_lock *lock);
/* The key and its length (owned by the lock, valid until dlock_close). */
DLOCK_EXPORT const char *dlock_key(const dlock_lock *lock, size_t *out_len);
/* Milliseconds left on the lease by our monotonic clock (counted from when
 * the successful acquire/renew was sent, ttl less 0.1%, so that it runs out
 * here before it does on a server whose clock runs up to 1000 ppm faster;
 * README, "Database time"); 0 if not held; -1 for row locks. */
DLOCK_EXPORT int64_t dlock_remaining_ms(const dlock_lock *lock);
/* After dlock_try returned DLOCK_BUSY on a lease lock: how many ms the
 * holder's lease still had, by the server's clock, at the last attempt (the
 * acquire statement reports it: no extra round trip), or by this client's
 * clock when the holder was another object of the client sharing the lock
 * (see dlock_try); -1 when unknown (row locks, or no busy attempt). For
 * messages such as "held for another 12 s". Since 1.1. */
DLOCK_EXPORT int64_t dlock_busy_remaining_ms(const dlock_lock *lock);
/* Reentrant hold count: 0 when not held, 1 after the first dlock_try, +1
 * for each further dlock_try by the same holder (the hold described under
 * "Whose hold"; dlock_hold_count_as counts one holder's only). */
DLOCK_EXPORT int dlock_hold_count(const dlock_lock *lock);
/* The lock's mode, DLOCK_MODE_LEASE or DLOCK_MODE_ROW (static strings),
 * whether set on the lock or inherited from the client; "" for NULL.
 * Since 1.3. */
DLOCK_EXPORT const char *dlock_mode(const dlock_lock *lock);

/* ---- observability: events and counters (B6) --------------------------- */

typedef enum dlock_event_type {
  DLOCK_EVENT_LOST = 1,          /* a held lease was lost */
  DLOCK_EVENT_MAX_HOLD = 2,      /* max hold reached: renewal stopped (critical) */
  DLOCK_EVENT_RELEASE_GONE = 3,  /* release found the row taken by another owner */
  DLOCK_EVENT_RENEW_RETRY = 4,   /* a renewal failed transiently; retrying */
  DLOCK_EVENT_CLEANUP = 5,       /* cleanup removed rows, or failed */
  DLOCK_EVENT_TOPOLOGY = 6       /* a setting does not fit the server's topology, e.g. a ttl
                                    under 15 s or a read timeout under 10 s on Galera */
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

/* Takes the oldest event from the client's queue, waiting up to wait_ms
 * (0 or more; since 1.3 without an upper bound). DLOCK_OK (out filled) or
 * DLOCK_E_TIMEOUT (none). Any thread. */
DLOCK_EXPORT int dlock_client_next_event(dlock_client *client, dlock_event *out,
                                         int64_t wait_ms, dlock_error *err);

/* Reads a counter by name; DLOCK_E_INVALID for an unknown name. Any thread.
 * Counters (one line each from the core's counter table; a test checks this
 * list against it):
 *   acquisitions      successful dlock_try (first hold, not reentrant)
 *   reentries         reentrant dlock_try on a held lock
 *   busy              dlock_try that returned DLOCK_BUSY
 *   wait_ms           total time spent inside dlock_try
 *   releases          successful releases
 *   handovers         leases a release passed on to this process's next waiter (fair=1)
 *   renewals          leases extended (manual and watchdog)
 *   renew_ticks       watchdog ticks that renewed something
 *   renew_statements  statements the watchdog executed
 *   lost              held locks lost (expired, taken, connection died)
 *   max_hold_trips    leases whose renewal max_hold_ms stopped
 *   cleanup_runs      cleanup passes
 *   cleanup_deleted   expired leases cleanup deleted
 *   table_rows        rows in the lease table at the last cleanup
 *   events_dropped    events dropped (queue full, or events=0)
 *   statements        every statement sent to the server
 *   pool_open         lock connections open now, in use or idle
 */
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

/* Creates the lock tables (table, table_fence, row_table) that are missing
 * and checks the columns of those that exist, as dlock_client_open does: for
 * a client that stays open while the tables are dropped and made again (a
 * test's reset, a setup script), without opening a second client.
 * Idempotent. The client forgets which row-lock rows it has seen, so row
 * locks re-create theirs. A lease table it makes again while the fencing
 * floor's table (table_fence) is still there continues the tokens above
 * every token issued before: the floor first moves to the next multiple of
 * 2^40 (the dropped rows took the highest tokens with them). Uses one of the client's lock connections (waits
 * up to connect_timeout for one). Since 1.2.
 * Thread safety: any thread, also while locks of the client are in use.
 * Errors: DLOCK_E_DB when a table exists with columns dlock cannot use (the
 * message names the table and column) or the user may not create it
 * (server_errno set); DLOCK_E_CONNECT, DLOCK_E_READONLY, DLOCK_E_POOL as for
 * any call that needs a connection; DLOCK_E_FORKED in a forked child. */
DLOCK_EXPORT int dlock_client_init_schema(dlock_client *client, dlock_error *err);

/* A client over several servers (a URL naming several, see
 * dlock_client_open): how many there are (1 for a URL naming one; 0 for
 * NULL). Since 1.4. */
DLOCK_EXPORT size_t dlock_client_server_count(const dlock_client *client);
/* The server key (key_len bytes, as dlock_open takes it) lives on: its index
 * in the URL's order into *out_index (0 with one server), and, when id_buf
 * is not NULL, that server's identity (the text the hash is computed over:
 * host:port, /database, ?table=..&row_table=..; never a user or password)
 * NUL-terminated into id_buf, cut at id_buf_size - 1 bytes. Asks no server:
 * for tests and operators ("where is key X?"). Since 1.4.
 * Errors: DLOCK_E_INVALID for a NULL argument or a key dlock_open refuses. */
DLOCK_EXPORT int dlock_client_server_of(const dlock_client *client, const char *key,
                                        size_t key_len, size_t *out_index, char *id_buf,
                                        size_t id_buf_size, dlock_error *err);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLOCK_DLOCK_H_ */
