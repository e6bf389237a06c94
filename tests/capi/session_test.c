/*
 * What a lock leaves behind, through the C API against a real MariaDB
 * server. Built plain and under ASan and TSan by the test command.
 *   - reset: session state set through dlock_exec (on a lease's transaction
 *     or a row lock) never reaches the next lock on the same pooled
 *     connection (pool=1): after each statement of a list, the next locks
 *     behave as on a fresh connection, whose session they match exactly
 *   - pool: leases that had to wait keep their wake-up name outside the
 *     pool's budget: with pool=2 and two such holds, other calls still work
 *   - frozen: a polling lease waiter is cancelled at once while the server
 *     is frozen (SIGSTOP)
 *   - fence: tokens continue above every issued one after the lease table
 *     is dropped and made again
 *   - cloexec: a child fork+exec'd while locks are held has no socket
 * It freezes the fixture server and drops tables of its own: run alone.
 * Prints "N passed, N failed". SESS_TEST_ONLY=name,name runs only those.
 */
#define _POSIX_C_SOURCE 200809L

#include "dlock/dlock.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlock_check.h"
#include "dlock_test_env.h"
#include "dlock_capi_util.h"

/* The first line a query prints as root (without its newline); "" on error. */
static const char *admin_value(const char *sql, char *out, size_t n) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s/scripts/db.sh' sql '%s' -N -e \"%s\" 2>/dev/null",
           dlock_test_source_dir(), dlock_test_db_dir(), sql);
  out[0] = '\0';
  FILE *p = popen(cmd, "r");
  if (p == NULL) return out;
  if (fgets(out, (int)n, p) == NULL) out[0] = '\0';
  pclose(p);
  out[strcspn(out, "\r\n")] = '\0';
  return out;
}

/* Polls until the query prints want, or timeout_ms passed (0). */
static int admin_poll(const char *sql, const char *want, int timeout_ms) {
  char v[256];
  int64_t until = now_ms() + timeout_ms;
  for (;;) {
    if (strcmp(admin_value(sql, v, sizeof v), want) == 0) return 1;
    if (now_ms() >= until) return 0;
    sleep_ms(50);
  }
}

/* The wake-up name of a lease key on the default table (lease_scheme.cc:
 * FNV-1a of the key, in hex). */
static void wake_name(const char *k, char *out, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (const unsigned char *p = (const unsigned char *)k; *p != '\0'; ++p) {
    h ^= *p;
    h *= 1099511628211ULL;
  }
  snprintf(out, n, "dlock:distributed_lock:%016llx", (unsigned long long)h);
}

struct waiter {
  dlock_lock *l;
  int64_t wait_ms;
  int rc;
  int64_t returned_at;
};

static void *waiter_try(void *p) {
  struct waiter *w = p;
  w->rc = dlock_try(w->l, w->wait_ms, NULL);
  w->returned_at = now_ms();
  return NULL;
}

/* ---- 1. session state set through dlock_exec ends with the hold ---------- */

/* One row per probe: the connection's id and what its session looks like. */
#define SNAPSHOT_SQL                                                                        \
  "INSERT INTO sess_probe (tag, cid, state) SELECT ?, CONNECTION_ID(), CONCAT_WS('|', "    \
  "@@time_zone, @@sql_mode, @@tx_isolation, @@autocommit, @@tx_read_only, "                \
  "@@max_statement_time, @@innodb_lock_wait_timeout, @@wait_timeout, "                     \
  "@@character_set_client, @@character_set_connection, @@character_set_results, "          \
  "@@collation_connection, ABS(@@timestamp - UNIX_TIMESTAMP(SYSDATE(6))) < 60, "           \
  "IS_USED_LOCK('sess_ulock') <=> CONNECTION_ID(), @x IS NULL, @@in_transaction)"

static void setup_session_objects(void) {
  CHECK(admin_sql("CREATE TABLE IF NOT EXISTS test.sess_probe (tag VARCHAR(128) PRIMARY KEY, "
                  "cid BIGINT NOT NULL, state TEXT NOT NULL)") == 0,
        "create sess_probe");
  CHECK(admin_sql("DELETE FROM test.sess_probe") == 0, "empty sess_probe");
  CHECK(admin_sql("CREATE TABLE IF NOT EXISTS test.sess_h (a INT)") == 0, "create sess_h");
  CHECK(admin_sql("CREATE TABLE IF NOT EXISTS test.sess_bk (a INT)") == 0, "create sess_bk");
  CHECK(admin_sql("CREATE OR REPLACE PROCEDURE test.sess_ac_off() SET autocommit = 0") == 0,
        "create procedure sess_ac_off");
}

/* The session of c's (only) connection, through a row lock: writes a
 * snapshot row tagged tag and checks that a HANDLER opened earlier is gone. */
static void snapshot(dlock_client *c, const char *tag) {
  char k[128];
  dlock_error err;
  dlock_lock *r = lock_with(c, key(k, sizeof k, "snap"), (const char *const[]){"mode", "row", NULL});
  if (r == NULL) return;
  int rc = dlock_try(r, 5000, &err);
  CHECK(rc == DLOCK_OK, "%s: snapshot row lock: %s", tag, err.message);
  if (rc == DLOCK_OK) {
    rc = dlock_exec(r, SNAPSHOT_SQL, (const char *const[]){tag}, 1, NULL, &err);
    CHECK(rc == DLOCK_OK, "%s: snapshot: %s", tag, err.message);
    rc = dlock_exec(r, "HANDLER sess_h READ FIRST", NULL, 0, NULL, &err);
    CHECK(rc == DLOCK_E_DB, "%s: a HANDLER opened by an earlier lock is still open (%s)", tag,
          dlock_code_name(rc));
    rc = dlock_release(r, &err);
    CHECK(rc == DLOCK_OK, "%s: snapshot commit: %s", tag, err.message);
  }
  dlock_close(r);
}

static void state_of(const char *tag, char *out, size_t n) {
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT CONCAT(cid, ' ', state) FROM test.sess_probe WHERE tag = '%s'",
           tag);
  admin_value(sql, out, n);
}

struct stmt_case {
  const char *sql;
  int refused; /* the exec filter refuses it (DLOCK_E_INVALID) */
};

static const struct stmt_case kStatements[] = {
    {"SET timestamp = UNIX_TIMESTAMP() + 3600", 0},
    {"SET timestamp = UNIX_TIMESTAMP() - 3600", 0},
    {"SET sql_mode=DEFAULT, autocommit=0", 1},
    {"SET/**/autocommit=0", 1},
    {"SET @x=1, @@session.autocommit=0", 1},
    {"CALL sess_ac_off()", 0}, /* a procedure that sets autocommit */
    {"SET SESSION TRANSACTION READ ONLY", 0},
    {"BACKUP LOCK sess_bk", 1},
    {"/*!BACKUP LOCK sess_bk*/", 0}, /* past the filter: ends the transaction */
    {"SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE", 0},
    {"SET innodb_lock_wait_timeout = 1", 0},
    {"SET max_statement_time = 0.5", 0},
    {"SET wait_timeout = 1", 0},
    {"SET NAMES latin1", 0},
    {"SET time_zone = '+05:00'", 0},
    {"DO GET_LOCK('sess_ulock', 0)", 0},
    {"HANDLER sess_h OPEN", 0},
    {"SET @x = 1", 0},
};

/* After a lock on c ran sql: the next locks on c (the same connection,
 * pool=1) behave as on a fresh one. q: c's object for a key o holds
 * (ttl 60 s). */
static void probe_after(dlock_client *c, dlock_client *o, dlock_lock *q, const char *what,
                        int idx, const char *base_state, long base_cid_c) {
  char k[128], suffix[64], tag[64], state[1024];
  dlock_error err;
  /* A lease on c is committed, by the real clock: another client sees it
   * taken (a lease written already expired, or never committed, is not). */
  snprintf(suffix, sizeof suffix, "p-%s-%d", what, idx);
  dlock_lock *p = lock_with(c, key(k, sizeof k, suffix), (const char *const[]){"ttl_ms", "60000", NULL});
  dlock_lock *po = lock_with(o, k, NULL);
  if (p == NULL || po == NULL) return;
  int rc = dlock_try(p, 0, &err);
  CHECK(rc == DLOCK_OK, "after %s [%s]: lease try: %s", kStatements[idx].sql, what, err.message);
  rc = dlock_try(po, 0, &err);
  CHECK(rc == DLOCK_BUSY, "after %s [%s]: another client took the lease c holds: %s (%s)",
        kStatements[idx].sql, what, dlock_code_name(rc), err.message);
  if (rc == DLOCK_OK) dlock_release(po, NULL);
  rc = dlock_release(p, &err);
  CHECK(rc == DLOCK_OK, "after %s [%s]: lease release: %s", kStatements[idx].sql, what, err.message);
  dlock_close(po);
  dlock_close(p);
  /* ... and a lease another client holds (60 s) is busy for c. */
  rc = dlock_try(q, 0, &err);
  CHECK(rc == DLOCK_BUSY, "after %s [%s]: c took a lease another client holds: %s",
        kStatements[idx].sql, what, dlock_code_name(rc));
  if (rc == DLOCK_OK) dlock_release(q, NULL);
  /* The session itself: as a fresh one's, on the same connection (reset,
   * not reconnected). */
  snprintf(tag, sizeof tag, "%s-%d", what, idx);
  snapshot(c, tag);
  state_of(tag, state, sizeof state);
  char *sp = strchr(state, ' ');
  CHECK(sp != NULL && strcmp(sp + 1, base_state) == 0,
        "after %s [%s]: session is\n    %s\n  a fresh one is\n    %s", kStatements[idx].sql, what,
        sp ? sp + 1 : state, base_state);
  CHECK(atol(state) == base_cid_c, "after %s [%s]: connection %ld, was %ld (reconnected?)",
        kStatements[idx].sql, what, atol(state), base_cid_c);
  char v[64];
  CHECK(strcmp(admin_value("SELECT IS_FREE_LOCK('sess_ulock')", v, sizeof v), "1") == 0,
        "after %s [%s]: the user lock is still held", kStatements[idx].sql, what);
  CHECK(admin_sql("SET SESSION lock_wait_timeout = 3; ALTER TABLE test.sess_bk COMMENT 'x'") == 0,
        "after %s [%s]: DDL on the table a BACKUP LOCK named is still blocked",
        kStatements[idx].sql, what);
}

static void test_session_reset(void) {
  char k[128], kq[128], base[1024], start[1024], tag[64];
  dlock_error err;
  setup_session_objects();
  const char *opts[] = {"pool", "1", NULL};
  dlock_client *fresh = client_with(opts);
  /* A short read timeout: a lease left uncommitted on c blocks o's attempt
   * (that is the failure the probe shows) for this long, not 50 s. */
  dlock_client *o = client_with((const char *const[]){"read_timeout", "3", NULL});
  if (fresh == NULL || o == NULL) return;
  snapshot(fresh, "fresh");
  dlock_client_close(fresh);
  state_of("fresh", base, sizeof base);
  const char *base_state = strchr(base, ' ') ? strchr(base, ' ') + 1 : "";
  CHECK(base_state[0] != '\0', "no snapshot of a fresh session: %s", base);
  const size_t n = sizeof kStatements / sizeof kStatements[0];
  for (int row = 0; row <= 1; ++row) {
    const char *what = row ? "row" : "lease";
    for (size_t i = 0; i < n; ++i) {
      /* A client of its own per statement, one connection (pool=1): the
       * locks after the statement's surely get the connection it ran on. */
      dlock_client *c = client_with(opts);
      if (c == NULL) continue;
      snprintf(tag, sizeof tag, "start-%s-%zu", what, i);
      snapshot(c, tag);
      state_of(tag, start, sizeof start);
      CHECK(strchr(start, ' ') != NULL && strcmp(strchr(start, ' ') + 1, base_state) == 0,
            "two fresh sessions differ:\n    %s\n    %s", base, start);
      char suffix[64];
      snprintf(suffix, sizeof suffix, "q-%s-%zu", what, i);
      dlock_lock *oq = lock_with(o, key(kq, sizeof kq, suffix), (const char *const[]){"ttl_ms", "60000", NULL});
      dlock_lock *q = lock_with(c, kq, NULL);
      snprintf(suffix, sizeof suffix, "s-%s-%zu", what, i);
      dlock_lock *l = lock_with(c, key(k, sizeof k, suffix),
                                row ? (const char *const[]){"mode", "row", NULL} : NULL);
      if (l == NULL || q == NULL || oq == NULL) continue;
      CHECK(dlock_try(oq, 0, &err) == DLOCK_OK, "o holds q: %s", err.message);
      int rc = dlock_try(l, 0, &err);
      CHECK(rc == DLOCK_OK, "%s [%s]: try: %s", kStatements[i].sql, what, err.message);
      if (!row) CHECK(dlock_begin(l, &err) == DLOCK_OK, "begin: %s", err.message);
      rc = dlock_exec(l, kStatements[i].sql, NULL, 0, NULL, &err);
      if (kStatements[i].refused)
        CHECK(rc == DLOCK_E_INVALID, "%s [%s]: not refused: %s", kStatements[i].sql, what,
              dlock_code_name(rc));
      else
        CHECK(rc != DLOCK_E_INVALID, "%s [%s]: refused: %s", kStatements[i].sql, what,
              err.message);
      /* Whatever the release says (SET timestamp makes the lease look
       * expired to the server), the connection goes back to the pool. */
      dlock_release(l, NULL);
      CHECK(dlock_held(l) == 0, "%s [%s]: still held after release", kStatements[i].sql, what);
      dlock_close(l);
      probe_after(c, o, q, what, (int)i, base_state, atol(start));
      dlock_release(oq, NULL);
      dlock_close(oq);
      dlock_close(q);
      dlock_client_close(c);
    }
  }
  dlock_client_close(o);
}

/* ---- 2. waited holds cost no pool slot ----------------------------------- */

/* Sockets a fork+exec'd child has open: it lists its own /proc/self/fd. */
static int sockets_in_child(void) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/ls", "ls", "-l", "/proc/self/fd", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  int n = 0;
  char line[512];
  FILE *f = fdopen(fds[0], "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strstr(line, "socket:") != NULL) ++n;
  if (f != NULL) fclose(f);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? n : -1;
}

static void test_waited_holds(void) {
  char k1[128], k2[128], k3[128], k4[128], n1[96], n2[96], sql[512], v[64];
  dlock_error err;
  dlock_client *a = client_with((const char *const[]){"pool", "2", NULL});
  dlock_client *h = client_with(NULL);
  if (a == NULL || h == NULL) return;
  const char *ttl[] = {"ttl_ms", "60000", NULL};
  const char *mine[] = {"holder", "lock", NULL};
  dlock_lock *h1 = lock_with(h, key(k1, sizeof k1, "waited-1"), ttl);
  dlock_lock *h2 = lock_with(h, key(k2, sizeof k2, "waited-2"), ttl);
  dlock_lock *a1 = lock_with(a, k1, mine);
  dlock_lock *a2 = lock_with(a, k2, mine);
  dlock_lock *a3 = lock_with(a, key(k3, sizeof k3, "free-lease"), NULL);
  dlock_lock *a4 = lock_with(a, key(k4, sizeof k4, "free-row"), (const char *const[]){"mode", "row", NULL});
  if (!h1 || !h2 || !a1 || !a2 || !a3 || !a4) return;
  wake_name(k1, n1, sizeof n1);
  wake_name(k2, n2, sizeof n2);
  CHECK(dlock_try(h1, 0, &err) == DLOCK_OK, "h1: %s", err.message);
  CHECK(dlock_try(h2, 0, &err) == DLOCK_OK, "h2: %s", err.message);
  struct waiter w1 = {a1, 20000, 99, 0}, w2 = {a2, 20000, 99, 0};
  pthread_t t1, t2;
  pthread_create(&t1, NULL, waiter_try, &w1);
  pthread_create(&t2, NULL, waiter_try, &w2);
  /* Both wait with the wake-up names (their holder did not come through
   * the queue, so nobody else has them). */
  snprintf(sql, sizeof sql, "SELECT IS_USED_LOCK('%s') IS NOT NULL AND IS_USED_LOCK('%s') IS NOT NULL",
           n1, n2);
  CHECK(admin_poll(sql, "1", 10000), "the waiters did not take their wake-up names in 10 s");
  CHECK(dlock_release(h1, &err) == DLOCK_OK, "h1 release: %s", err.message);
  CHECK(dlock_release(h2, &err) == DLOCK_OK, "h2 release: %s", err.message);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  CHECK(w1.rc == DLOCK_OK && w2.rc == DLOCK_OK, "waited tries: %s, %s", dlock_code_name(w1.rc),
        dlock_code_name(w2.rc));
  /* The holds keep their names (a release wakes the next waiter)... */
  CHECK(strcmp(admin_value(sql, v, sizeof v), "1") == 0, "the waited holds gave their names up");
  /* ... and the client's other calls still get connections (no
   * DLOCK_E_POOL: nothing would give a slot back while these wait). */
  int rc = dlock_try(a3, 0, &err);
  CHECK(rc == DLOCK_OK, "lease try beside two waited holds (pool=2): %s", err.message);
  rc = dlock_try(a4, 0, &err);
  CHECK(rc == DLOCK_OK, "row try beside two waited holds (pool=2): %s", err.message);
  rc = dlock_renew(a1, &err);
  CHECK(rc == DLOCK_OK, "renew beside two waited holds (pool=2): %s", err.message);
  uint64_t open = counter(a, "pool_open");
  CHECK(open >= 3 && open <= 4, "pool_open is %llu (2 in the budget, 2 outside)",
        (unsigned long long)open);
  /* The held connections do not reach a child process. */
  int socks = sockets_in_child();
  CHECK(socks == 0, "a child exec'd beside a row lock and two waited leases has %d sockets", socks);
  /* A transaction on a waited hold's connection: once it is over, what the
   * caller set there does not judge the hold's own release. */
  CHECK(dlock_begin(a1, &err) == DLOCK_OK, "begin on a waited hold: %s", err.message);
  rc = dlock_exec(a1, "SET timestamp = UNIX_TIMESTAMP() + 3600", NULL, 0, NULL, &err);
  CHECK(rc == DLOCK_OK, "exec on a waited hold: %s", err.message);
  CHECK(dlock_rollback(a1, &err) == DLOCK_OK, "rollback on a waited hold: %s", err.message);
  CHECK(dlock_release(a4, &err) == DLOCK_OK, "a4 release: %s", err.message);
  CHECK(dlock_release(a3, &err) == DLOCK_OK, "a3 release: %s", err.message);
  CHECK(dlock_release(a1, &err) == DLOCK_OK, "a1 release: %s", err.message);
  CHECK(dlock_release(a2, &err) == DLOCK_OK, "a2 release: %s", err.message);
  snprintf(sql, sizeof sql, "SELECT IS_FREE_LOCK('%s') AND IS_FREE_LOCK('%s')", n1, n2);
  CHECK(strcmp(admin_value(sql, v, sizeof v), "1") == 0, "the releases kept the wake-up names");
  open = counter(a, "pool_open");
  CHECK(open <= 2, "pool_open is %llu after every release (pool=2)", (unsigned long long)open);
  dlock_close(a1);
  dlock_close(a2);
  dlock_close(a3);
  dlock_close(a4);
  dlock_close(h1);
  dlock_close(h2);
  dlock_client_close(a);
  dlock_client_close(h);
}

/* ---- 3. a polling waiter is cancelled at once on a frozen server ---------- */

static void test_cancel_frozen_poller(void) {
  pid_t pid = server_pid();
  if (pid <= 0) return;
  char k[128];
  dlock_error err;
  dlock_client *hc = client_with(NULL);
  dlock_client *wc = client_with(NULL); /* read_timeout 30 s: what a cancel must not wait for */
  if (hc == NULL || wc == NULL) return;
  dlock_lock *h = lock_with(hc, key(k, sizeof k, "frozen-poll"), (const char *const[]){"ttl_ms", "60000", NULL});
  /* ttl 2 s: an attempt the cancel cut off may still run once the server
   * resumes, after the holder's release, and take the key for the waiter's
   * old owner (documented: it runs out by its ttl); the check after SIGCONT
   * waits that out. */
  dlock_lock *w = lock_with(wc, k, (const char *const[]){"holder", "lock", "ttl_ms", "2000", NULL});
  if (h == NULL || w == NULL) return;
  /* The holder took it directly: it has no wake-up name, so the waiter
   * polls. */
  CHECK(dlock_try(h, 0, &err) == DLOCK_OK, "holder: %s", err.message);
  uint64_t s0 = counter(wc, "statements");
  struct waiter wt = {w, 60000, 99, 0};
  pthread_t t;
  pthread_create(&t, NULL, waiter_try, &wt);
  int64_t until = now_ms() + 10000;
  while (counter(wc, "statements") < s0 + 5 && now_ms() < until) sleep_ms(10);
  CHECK(counter(wc, "statements") >= s0 + 5, "the waiter is not polling");
  kill(pid, SIGSTOP);
  /* An attempt hangs on the frozen server: the next one goes out within the
   * poller's longest pause (200 ms + jitter) and hangs there, or the one
   * sent just before the freeze is hanging already (then nothing moves). */
  uint64_t s1 = counter(wc, "statements");
  until = now_ms() + 1000;
  while (counter(wc, "statements") == s1 && now_ms() < until) sleep_ms(5);
  int64_t t0 = now_ms();
  dlock_cancel(w);
  pthread_join(t, NULL);
  int64_t cancel_ms = wt.returned_at - t0;
  kill(pid, SIGCONT);
  CHECK(wt.rc == DLOCK_E_CANCELLED, "frozen: the polling try returned %s", dlock_code_name(wt.rc));
  CHECK(cancel_ms < 1000, "frozen: cancelling the polling waiter took %lld ms", (long long)cancel_ms);
  printf("  frozen server: polling waiter cancelled in %lld ms\n", (long long)cancel_ms);
  /* Back to normal: the waiter's client recovers on fresh connections. */
  CHECK(dlock_release(h, &err) == DLOCK_OK, "holder release after SIGCONT: %s", err.message);
  int ok = 0;
  until = now_ms() + 10000;
  while (!ok && now_ms() < until) ok = dlock_try(w, 1000, &err) == DLOCK_OK;
  CHECK(ok, "after SIGCONT: %s", err.message);
  dlock_release(w, NULL);
  dlock_close(w);
  dlock_close(h);
  dlock_client_close(wc);
  dlock_client_close(hc);
}

/* ---- 4. tokens continue after the lease table is made again -------------- */

static void test_fence_after_recreate(void) {
  char table[64], sql[256], k[128];
  dlock_error err;
  snprintf(table, sizeof table, "sess_fence_%ld", (long)getpid());
  snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS test.%s, test.%s_fence", table, table);
  admin_sql(sql);
  dlock_client *c = client_with((const char *const[]){"table", table, NULL});
  if (c == NULL) return;
  dlock_lock *l = lock_with(c, key(k, sizeof k, "fence"), NULL);
  dlock_lock *other = lock_with(c, key(k, sizeof k, "fence-new-key"), NULL);
  if (l == NULL || other == NULL) return;
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "try %d: %s", i, err.message);
    CHECK(dlock_token(l) > last, "token %llu after %llu", (unsigned long long)dlock_token(l),
          (unsigned long long)last);
    last = dlock_token(l);
    dlock_release(l, NULL);
  }
  CHECK(last == 3, "a new table's third token is %llu", (unsigned long long)last);
  snprintf(sql, sizeof sql, "DROP TABLE test.%s", table);
  CHECK(admin_sql(sql) == 0, "drop the lease table");
  CHECK(dlock_client_init_schema(c, &err) == DLOCK_OK, "init_schema: %s", err.message);
  CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "try after re-creation: %s", err.message);
  uint64_t t = dlock_token(l);
  CHECK(t > last, "the re-created table issued token %llu after %llu", (unsigned long long)t,
        (unsigned long long)last);
  dlock_release(l, NULL);
  CHECK(dlock_try(other, 0, &err) == DLOCK_OK, "new key: %s", err.message);
  CHECK(dlock_token(other) > last, "a new key's token is %llu after %llu",
        (unsigned long long)dlock_token(other), (unsigned long long)last);
  dlock_release(other, NULL);
  /* An init_schema that finds the tables in place moves nothing. */
  CHECK(dlock_client_init_schema(c, &err) == DLOCK_OK, "init_schema again: %s", err.message);
  CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "try: %s", err.message);
  CHECK(dlock_token(l) == t + 1, "token %llu after %llu with the table in place",
        (unsigned long long)dlock_token(l), (unsigned long long)t);
  dlock_release(l, NULL);
  printf("  fence: %llu before the drop, %llu after\n", (unsigned long long)last,
         (unsigned long long)t);
  dlock_close(other);
  dlock_close(l);
  dlock_client_close(c);
  snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS test.%s, test.%s_fence", table, table);
  admin_sql(sql);
}

/* ---- 5. no socket reaches a child process -------------------------------- */

static void test_cloexec(void) {
  char k1[128], k2[128];
  dlock_error err;
  dlock_client *c = client_with(NULL);
  if (c == NULL) return;
  dlock_lock *l = lock_with(c, key(k1, sizeof k1, "cloexec-lease"), NULL);
  dlock_lock *r = lock_with(c, key(k2, sizeof k2, "cloexec-row"), (const char *const[]){"mode", "row", NULL});
  if (l == NULL || r == NULL) return;
  /* A held lease in a transaction (a connection of its own), a row lock
   * (its transaction's connection), idle pooled connections. */
  CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "lease: %s", err.message);
  CHECK(dlock_begin(l, &err) == DLOCK_OK, "begin: %s", err.message);
  CHECK(dlock_try(r, 0, &err) == DLOCK_OK, "row: %s", err.message);
  CHECK(dlock_renew(l, &err) == DLOCK_OK, "renew: %s", err.message);
  CHECK(counter(c, "pool_open") >= 3, "pool_open %llu", (unsigned long long)counter(c, "pool_open"));
  int n = sockets_in_child();
  CHECK(n == 0, "a child exec'd while a lease and a row lock are held has %d sockets", n);
  /* The check sees a socket that is not close-on-exec. */
  int s = socket(AF_INET, SOCK_STREAM, 0);
  n = sockets_in_child();
  CHECK(n == 1, "the checker saw %d sockets, expected the test's own one", n);
  close(s);
  CHECK(dlock_release(r, &err) == DLOCK_OK, "row release: %s", err.message);
  CHECK(dlock_release(l, &err) == DLOCK_OK, "lease release: %s", err.message);
  dlock_close(r);
  dlock_close(l);
  dlock_client_close(c);
}

static int selected(const char *name) {
  const char *only = getenv("SESS_TEST_ONLY");
  if (only == NULL || only[0] == '\0') return 1;
  size_t n = strlen(name);
  for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
    if ((p == only || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
  return 0;
}

#define RUN(name, call)                                                  \
  do {                                                                   \
    if (selected(name)) {                                                \
      int64_t t_ = now_ms();                                             \
      call;                                                              \
      printf("  %-16s %6lld ms\n", name, (long long)(now_ms() - t_));     \
      fflush(stdout);                                                    \
    }                                                                    \
  } while (0)

int main(void) {
  g_url = dlock_test_url();
  snprintf(g_prefix, sizeof g_prefix, "sess-%ld-%ld-", (long)getpid(), (long)time(NULL));
  RUN("reset", test_session_reset());
  RUN("pool", test_waited_holds());
  RUN("fence", test_fence_after_recreate());
  RUN("cloexec", test_cloexec());
  if (dlock_test_server_is_ours()) {
    RUN("frozen", test_cancel_frozen_poller());
  } else {
    printf("  (frozen server test skipped: not our server)\n");
  }
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
