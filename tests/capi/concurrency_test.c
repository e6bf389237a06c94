/*
 * The concurrency and robustness contract of dlock.h, through the C API,
 * against a real MariaDB server. Built plain and under ASan/UBSan and TSan by
 * the test command: a use-after-free or a data race fails here.
 *   - a lock shared by threads: try racing release on a lost lease, the owner
 *     read while another thread acquires (dlock_owner_copy)
 *   - dlock_close while other threads are inside dlock_try / dlock_wait_lost
 *   - dlock_cancel: prompt, also when it lands just before a server wait
 *     starts, and while the server is frozen (SIGSTOP); a cancel after a
 *     mark and before the call (dlock_try_from, dlock_wait_lost_from)
 *   - statements that would end the lock's transaction
 *   - a failed release never leaves "held"
 *   - the server's wait_timeout, and connections the server closed
 * Prints "N passed, N failed". CONC_TEST_ONLY=name,name runs only those.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall(SYS_gettid) */

#include "dlock/dlock.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlock_check.h"
#include "dlock_test_env.h"
#include "dlock_capi_util.h"

/* Runs a query that returns one number as root on the fixture server;
 * returns it (capped at 100), or -1 when the query failed. */
static int admin_count(const char *sql) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "n=$('%s/scripts/db.sh' sql '%s' -N -e \"%s\") || exit 255; "
           "exit $((n > 100 ? 100 : n))",
           dlock_test_source_dir(), dlock_test_db_dir(), sql);
  int rc = system(cmd);
  if (rc < 0 || !WIFEXITED(rc) || WEXITSTATUS(rc) == 255) return -1;
  return WEXITSTATUS(rc);
}

/* Polls admin_count(sql) until it returns `want` (1) or timeout_ms passed (0). */
static int admin_poll(const char *sql, int want, int timeout_ms) {
  int64_t until = now_ms() + timeout_ms;
  for (;;) {
    if (admin_count(sql) == want) return 1;
    if (now_ms() >= until) return 0;
    /* InnoDB refreshes its lock tables after 100 ms without a read. */
    sleep_ms(150);
  }
}

/* KILLs every idle (Sleep) session on the fixture server, as its
 * wait_timeout or an operator would; returns how many. */
static int kill_idle_connections(void) {
  char cmd[4096];
  const char *src = dlock_test_source_dir(), *dir = dlock_test_db_dir();
  snprintf(cmd, sizeof cmd,
           "n=0; for i in $('%s/scripts/db.sh' sql '%s' -N -e \"SELECT id FROM "
           "information_schema.PROCESSLIST WHERE command = 'Sleep' AND id <> CONNECTION_ID()\"); "
           "do '%s/scripts/db.sh' sql '%s' -e \"KILL $i\" 2>/dev/null && n=$((n+1)); done; "
           "exit $((n > 100 ? 100 : n))",
           src, dir, src, dir);
  int rc = system(cmd);
  return rc >= 0 && WIFEXITED(rc) ? WEXITSTATUS(rc) : 0;
}

/* ---- 1. try racing release on one lock object (holder=lock) ------------- */

struct race {
  dlock_lock *l;
  pthread_barrier_t *go;
  int rc;
  char msg[512];
};

static void *race_try(void *p) {
  struct race *r = p;
  dlock_error err;
  pthread_barrier_wait(r->go);
  r->rc = dlock_try(r->l, 100, &err);
  memcpy(r->msg, err.message, sizeof r->msg);
  return NULL;
}

static void *race_release(void *p) {
  struct race *r = p;
  dlock_error err;
  pthread_barrier_wait(r->go);
  r->rc = dlock_release(r->l, &err);
  memcpy(r->msg, err.message, sizeof r->msg);
  return NULL;
}

/* One thread calls dlock_try(l, 100) while another calls dlock_release(l),
 * every round, on a holder=lock object (so the try re-enters when it comes
 * first). Checked exactly in every round, whichever call the scheduler lets
 * in first or in between:
 *   row (held once):   the release returns OK; the try OK or BUSY; the lock
 *                      is held at the end (count 1, and another client cannot
 *                      take it) exactly when the try returned OK. A try that
 *                      came while the release was in flight waits for it and
 *                      takes the lock afresh; it never re-enters a hold that
 *                      is being released (that left try OK and the lock free).
 *   lease (lost by our clock, not released): the release returns OK, LOST or
 *                      STATE; the try OK or BUSY; try OK means a new hold
 *                      (a greater token, not IDLE; HELD or, once its 40 ms
 *                      ran out too, LOST), otherwise not HELD. */
static void test_try_release_race(dlock_client *c, const char *mode) {
  char k[128];
  char suffix[32];
  const int lease = strcmp(mode, "lease") == 0;
  snprintf(suffix, sizeof suffix, "race-%s", mode);
  const char *opts[] = {"holder", "lock", "ttl_ms", "40", "mode", mode, NULL};
  dlock_lock *l = lock_with(c, key(k, sizeof k, suffix), opts);
  dlock_client *other = client_with(NULL);
  dlock_lock *o = lock_with(other, k, (const char *const[]){"mode", mode, NULL});
  if (l == NULL || o == NULL) return;
  const int rounds = 150;
  int bad = 0, tried_ok = 0, busy = 0;
  for (int i = 0; i < rounds; ++i) {
    dlock_error err;
    if (dlock_try(l, 2000, &err) != DLOCK_OK) {
      ++bad;
      fprintf(stderr, "round %d: try: %s\n", i, err.message);
      continue;
    }
    const uint64_t token0 = dlock_token(l);
    if (lease) {
      /* Let the lease run out by our clock: state LOST, not yet released. */
      int64_t until = now_ms() + 2000;
      while (dlock_state(l) != DLOCK_STATE_LOST && now_ms() < until) sleep_ms(2);
    }
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    struct race a = {l, &go, 99, ""}, b = {l, &go, 99, ""};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race_try, &a);
    pthread_create(&tb, NULL, race_release, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&go);
    /* The count first: a 40 ms lease can run out between the two reads, and
     * a count read after the state said HELD would then be 0 (held by the
     * clock no more). Read in this order, a count of 1 with state LOST, or
     * 0 with LOST, is what the clock did; HELD with count 0 cannot appear,
     * since nothing can make the lock held again in between. */
    const int count = dlock_hold_count(l);
    const int state = dlock_state(l);
    if (!(a.rc == DLOCK_OK || a.rc == DLOCK_BUSY)) {
      ++bad;
      fprintf(stderr, "round %d: try returned %s: %s\n", i, dlock_code_name(a.rc), a.msg);
    }
    if (lease ? !(b.rc == DLOCK_OK || b.rc == DLOCK_E_LOST || b.rc == DLOCK_E_STATE)
              : b.rc != DLOCK_OK) {
      ++bad;
      fprintf(stderr, "round %d: release returned %s: %s\n", i, dlock_code_name(b.rc), b.msg);
    }
    if (a.rc == DLOCK_OK) {
      ++tried_ok;
      /* lease: IDLE only when the release came after the try and gave back
       * its new hold (the release then returned OK). */
      int ok = lease ? dlock_token(l) > token0 &&
                           (state == DLOCK_STATE_LOST || (state == DLOCK_STATE_HELD && count == 1) ||
                            (state == DLOCK_STATE_IDLE && b.rc == DLOCK_OK))
                     : state == DLOCK_STATE_HELD && count == 1;
      if (!ok) {
        ++bad;
        fprintf(stderr, "round %d: try returned OK, then state %d, count %d, token %llu (was %llu)\n",
                i, state, count, (unsigned long long)dlock_token(l), (unsigned long long)token0);
      }
    } else {
      busy += a.rc == DLOCK_BUSY;
      if (state == DLOCK_STATE_HELD) {
        ++bad;
        fprintf(stderr, "round %d: try returned %s, yet the lock is held\n", i,
                dlock_code_name(a.rc));
      }
    }
    if (state == DLOCK_STATE_HELD) {
      /* Held means held: nobody else gets it while l still says so (the
       * lease may run out meanwhile, so ask l again after o's try). */
      if ((!lease || i % 10 == 0) && dlock_try(o, 0, &err) == DLOCK_OK) {
        if (dlock_held(l)) {
          ++bad;
          fprintf(stderr, "round %d: l says held, but another client took the key\n", i);
        }
        dlock_release(o, NULL);
      }
    } else if (state == DLOCK_STATE_IDLE) {
      /* Not held means free: another client takes it at once. */
      if (dlock_try(o, 0, &err) != DLOCK_OK) {
        ++bad;
        fprintf(stderr, "round %d: l is idle, but another client got %s: %s\n", i,
                dlock_code_name(err.code), err.message);
      } else {
        dlock_release(o, NULL);
      }
    }
    while (dlock_held(l) && dlock_release(l, NULL) == DLOCK_OK) {
    }
    if (dlock_state(l) == DLOCK_STATE_LOST) dlock_release(l, NULL);
  }
  printf("race %s: %d rounds, try OK %d, BUSY %d\n", mode, rounds, tried_ok, busy);
  CHECK(bad == 0, "%s: %d bad rounds of %d", mode, bad, rounds);
  /* Afterwards the key is free for others. */
  dlock_error err;
  CHECK(dlock_try(o, 3000, &err) == DLOCK_OK, "%s: key not free afterwards: %s", mode,
        err.message);
  dlock_release(o, NULL);
  dlock_close(o);
  dlock_close(l);
  dlock_client_close(other);
}

/* ---- 2. close while other threads are inside calls ------------------------ */

struct inside {
  dlock_lock *l;
  int which; /* 0 try, 1 wait_lost */
  volatile int started;
  volatile long tid;
  int rc;
  int64_t returned_at;
};

static void *inside_call(void *p) {
  struct inside *in = p;
  dlock_error err;
  __atomic_store_n(&in->tid, (long)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
  __atomic_store_n(&in->started, 1, __ATOMIC_SEQ_CST);
  in->rc = in->which == 0 ? dlock_try(in->l, 20000, &err) : dlock_wait_lost(in->l, 20000, &err);
  in->returned_at = now_ms();
  return NULL;
}

/* The scheduler state of thread tid of this process ('S' while it sleeps),
 * or 0 when it cannot be read. */
static char thread_state(long tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');
  return paren != NULL && paren[1] == ' ' ? paren[2] : 0;
}

static void test_close_in_use(dlock_client *c, const char *mode) {
  char k[128], suffix[32];
  snprintf(suffix, sizeof suffix, "close-%s", mode);
  key(k, sizeof k, suffix);
  dlock_lock *holder = lock_with(c, k, (const char *const[]){"mode", mode, NULL});
  dlock_error err;
  if (holder == NULL) return;
  /* A try that close cuts off may have sent its lease attempt, and the
   * server may run that statement late, after the holder's release, taking
   * the lease for the closed object: as dlock.h says, such a lease runs out
   * by its ttl for every other object (seen once in 20 runs under TSan with
   * both cores busy). So the closed objects' leases are short (renewed while
   * they hold), and each variant's first acquisition waits out one such ttl. */
  const int64_t free_wait_ms = strcmp(mode, "lease") == 0 ? 3000 + 3000 : 2000;
  for (int variant = 0; variant < 6; ++variant) {
    int which = variant % 2;            /* try, wait_lost */
    int cancel_first = variant >= 4;    /* dlock_cancel, then dlock_close */
    dlock_lock *l = lock_with(
        c, k,
        strcmp(mode, "lease") == 0
            ? (const char *const[]){"mode", mode, "holder", "lock", "ttl_ms", "3000", "auto_renew",
                                    "1", NULL}
            : (const char *const[]){"mode", mode, "holder", "lock", NULL});
    if (l == NULL) return;
    /* Not 0: a waiter cancelled by the previous variant may still be queued
     * on the server for a moment (its socket is closed, the server notices
     * at its next read), or its late lease attempt may have won (above). */
    if (which == 0) {
      CHECK(dlock_try(holder, free_wait_ms, &err) == DLOCK_OK, "holder try: %s", err.message);
    } else {
      CHECK(dlock_try(l, free_wait_ms, &err) == DLOCK_OK, "try: %s", err.message);
    }
    struct inside in = {l, which, 0, 0, 99, 0};
    uint64_t sent0 = counter(c, "statements");
    pthread_t t;
    pthread_create(&t, NULL, inside_call, &in);
    /* dlock_close may only come once the call is inside the library (no call
     * may start after it). A try is inside once it sent its first statement
     * (nothing else on this client sends one meanwhile); a wait_lost sends
     * none: it is inside once its thread, past "started", sleeps (its only
     * sleep is the library's wait). */
    int64_t until = now_ms() + 10000;
    int inside = 0;
    while (!inside && now_ms() < until) {
      if (__atomic_load_n(&in.started, __ATOMIC_SEQ_CST))
        inside = which == 0 ? counter(c, "statements") != sent0
                            : thread_state(__atomic_load_n(&in.tid, __ATOMIC_SEQ_CST)) == 'S';
      if (!inside) sleep_ms(1);
    }
    CHECK(inside, "%s variant %d: the call was not inside the library after 10 s", mode, variant);
    /* Not synchronisation: close must be right at any point of the call;
     * the variants spread it from the call's start to well inside it. */
    sleep_ms(40 * (variant / 2));
    int64_t t0 = now_ms();
    if (cancel_first) dlock_cancel(l);
    dlock_close(l); /* must cancel and wait, not free under the other thread */
    int64_t close_ms = now_ms() - t0;
    pthread_join(t, NULL);
    CHECK(in.rc == DLOCK_E_CANCELLED, "%s variant %d: the call returned %s", mode, variant,
          dlock_code_name(in.rc));
    CHECK(close_ms < 3000, "%s variant %d: close took %lld ms", mode, variant,
          (long long)close_ms);
    CHECK(in.returned_at - t0 < 3000, "%s variant %d: the call ended %lld ms after close", mode,
          variant, (long long)(in.returned_at - t0));
    if (which == 0) {
      CHECK(dlock_release(holder, &err) == DLOCK_OK, "holder release: %s", err.message);
    } else {
      /* close released the lock it held: the key is free */
      CHECK(dlock_try(holder, 2000, &err) == DLOCK_OK, "%s: key not freed by close: %s", mode,
            err.message);
      dlock_release(holder, NULL);
    }
  }
  dlock_close(holder);
}

/* ---- 3. the owner, read while another thread acquires ---------------------- */

#define MAX_OWNERS 4096
struct owners {
  dlock_lock *l;
  volatile int stop;
  char (*seen)[256];
  int n;
};

static void *owner_cycler(void *p) {
  struct owners *o = p;
  while (!__atomic_load_n(&o->stop, __ATOMIC_SEQ_CST) && o->n < MAX_OWNERS) {
    if (dlock_try(o->l, 1000, NULL) == DLOCK_OK) {
      dlock_owner_copy(o->l, o->seen[o->n], 256);
      __atomic_add_fetch(&o->n, 1, __ATOMIC_SEQ_CST);
      dlock_release(o->l, NULL);
    }
  }
  return NULL;
}

static void test_owner_copy(dlock_client *c, const char *mode) {
  char k[128], suffix[32];
  snprintf(suffix, sizeof suffix, "owner-%s", mode);
  dlock_lock *l = lock_with(c, key(k, sizeof k, suffix),
                            (const char *const[]){"mode", mode, "holder", "lock", NULL});
  if (l == NULL) return;
  static char seen[MAX_OWNERS][256];
  static char read_back[2048][256];
  struct owners o = {l, 0, seen, 0};
  pthread_t t;
  pthread_create(&t, NULL, owner_cycler, &o);
  int reads = 0;
  /* Until 2048 reads and more than 10 acquisitions: however slow the
   * machine, the reads overlap acquisitions (a minute is the bound). */
  int64_t until = now_ms() + 60000;
  while (now_ms() < until &&
         (reads < 2048 || __atomic_load_n(&o.n, __ATOMIC_SEQ_CST) <= 10)) {
    char buf[256];
    size_t n = dlock_owner_copy(l, buf, sizeof buf);
    if (n > 0 && reads < 2048) {
      CHECK(n == strlen(buf), "length %zu vs copied %zu", n, strlen(buf));
      memcpy(read_back[reads++], buf, sizeof buf);
    }
    sleep_ms(0);
  }
  __atomic_store_n(&o.stop, 1, __ATOMIC_SEQ_CST);
  pthread_join(t, NULL);
  int torn = 0;
  for (int i = 0; i < reads; ++i) {
    int found = 0;
    for (int j = 0; j < o.n && !found; ++j) found = strcmp(read_back[i], seen[j]) == 0;
    if (!found) {
      /* the owner of an acquisition whose copy the cycler had not stored yet
       * can only be the very last one */
      char last[256];
      dlock_owner_copy(l, last, sizeof last);
      if (strcmp(read_back[i], last) != 0) ++torn;
    }
  }
  CHECK(o.n > 10, "%s: only %d acquisitions", mode, o.n);
  CHECK(torn == 0, "%s: %d of %d owner reads were not an owner the lock ever had", mode, torn,
        reads);
  char tiny[8];
  size_t full = dlock_owner_copy(l, tiny, sizeof tiny);
  CHECK(full > 7 && strlen(tiny) == 7, "cut copy: full %zu, copied %zu", full, strlen(tiny));
  CHECK(dlock_owner_copy(NULL, tiny, sizeof tiny) == 0 && tiny[0] == '\0', "NULL lock");
  CHECK(dlock_owner_copy(l, NULL, 0) == full, "size query");
  dlock_close(l);
}

/* ---- 4. statements that would end the lock's transaction ------------------- */

/* The business table, created through a row lock of the client (any server,
 * not only the fixture's): DDL hidden in an executable comment passes the
 * keyword check, and ends (loses) that lock's transaction, as it should. */
static void create_conc_biz(dlock_client *c) {
  char k[128];
  dlock_error err;
  dlock_lock *r = lock_with(c, key(k, sizeof k, "ddl"), (const char *const[]){"mode", "row", NULL});
  if (r == NULL) return;
  if (dlock_try(r, 5000, &err) == DLOCK_OK) {
    int rc = dlock_exec(r, "/*!CREATE TABLE IF NOT EXISTS conc_biz (id INT PRIMARY KEY, v INT) */",
                        NULL, 0, NULL, &err);
    CHECK(rc == DLOCK_E_LOST || rc == DLOCK_OK, "CREATE TABLE returned %s: %s",
          dlock_code_name(rc), err.message);
    dlock_release(r, NULL);
  }
  dlock_close(r);
}

static void test_txn_enders(dlock_client *c) {
  char k[128];
  dlock_error err;
  dlock_lock *l = lock_with(c, key(k, sizeof k, "enders"), (const char *const[]){"mode", "row", NULL});
  dlock_client *other = client_with(NULL);
  dlock_lock *o = lock_with(other, k, (const char *const[]){"mode", "row", NULL});
  if (l == NULL || o == NULL) return;
  CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "try: %s", err.message);
  const char *refused[] = {"COMMIT", "  rollback", "/* c */ COMMIT WORK", "-- x\nBEGIN",
                           "START TRANSACTION", "create table capi_x (i int)",
                           "DROP TABLE IF EXISTS capi_x", "TRUNCATE capi_biz",
                           "SET autocommit = 1", "set session AUTOCOMMIT=1", "LOCK TABLES t WRITE",
                           "xa start 'x'", NULL};
  for (const char *const *q = refused; *q != NULL; ++q) {
    int rc = dlock_exec(l, *q, NULL, 0, NULL, &err);
    CHECK(rc == DLOCK_E_INVALID, "exec(%s) returned %s: %s", *q, dlock_code_name(rc), err.message);
  }
  CHECK(dlock_held(l) == 1, "refused statements lost the lock");
  CHECK(dlock_try(o, 0, &err) == DLOCK_BUSY, "another client got the row: %s",
        dlock_code_name(dlock_try(o, 0, NULL)));
  /* Savepoints keep the transaction. */
  CHECK(dlock_exec(l, "SAVEPOINT s1", NULL, 0, NULL, &err) == DLOCK_OK, "savepoint: %s", err.message);
  CHECK(dlock_exec(l, "ROLLBACK TO SAVEPOINT s1", NULL, 0, NULL, &err) == DLOCK_OK,
        "rollback to savepoint: %s", err.message);
  CHECK(dlock_held(l) == 1, "savepoint lost the lock");
  /* What the keyword check misses, the server's in-transaction flag catches:
   * an executable comment that commits. */
  int rc = dlock_exec(l, "/*!COMMIT*/", NULL, 0, NULL, &err);
  CHECK(rc == DLOCK_E_LOST, "exec(/*!COMMIT*/) returned %s: %s", dlock_code_name(rc), err.message);
  CHECK(dlock_state(l) == DLOCK_STATE_LOST, "state after the transaction ended: %d", dlock_state(l));
  CHECK(dlock_try(o, 2000, &err) == DLOCK_OK, "the row was free, but: %s", err.message);
  rc = dlock_rollback(l, &err);
  CHECK(rc == DLOCK_E_LOST, "rollback after the loss returned %s", dlock_code_name(rc));
  dlock_release(o, NULL);
  dlock_release(l, NULL);

  /* A lease transaction: refused the same way; an ended one is reported. */
  dlock_lock *ls = lock_with(c, key(k, sizeof k, "enders-lease"), NULL);
  if (ls == NULL) return;
  CHECK(dlock_try(ls, 0, &err) == DLOCK_OK, "lease try: %s", err.message);
  CHECK(dlock_begin(ls, &err) == DLOCK_OK, "begin: %s", err.message);
  CHECK(dlock_exec(ls, "COMMIT", NULL, 0, NULL, &err) == DLOCK_E_INVALID, "lease COMMIT not refused");
  rc = dlock_exec(ls, "/*!COMMIT*/", NULL, 0, NULL, &err);
  CHECK(rc == DLOCK_E_STATE, "lease /*!COMMIT*/ returned %s: %s", dlock_code_name(rc), err.message);
  CHECK(dlock_held(ls) == 1, "the lease must stay held");
  CHECK(dlock_release(ls, &err) == DLOCK_OK, "lease release: %s", err.message);
  dlock_close(ls);

  /* transaction=1: acquire and begin as one step; release commits both. */
  create_conc_biz(c);
  dlock_lock *lt = lock_with(c, key(k, sizeof k, "txn-opt"), (const char *const[]){"transaction", "1", NULL});
  if (lt != NULL) {
    CHECK(dlock_try(lt, 0, &err) == DLOCK_OK, "try: %s", err.message);
    rc = dlock_exec(lt, "INSERT INTO conc_biz VALUES (?, 7) ON DUPLICATE KEY UPDATE v = 7",
                    (const char *const[]){"2"}, 1, NULL, &err);
    CHECK(rc == DLOCK_OK, "exec without begin on transaction=1: %s", err.message);
    CHECK(dlock_begin(lt, &err) == DLOCK_E_STATE, "begin twice must say the transaction is open");
    CHECK(dlock_release(lt, &err) == DLOCK_OK, "release: %s", err.message);
    dlock_close(lt);
  }
  dlock_close(l);
  dlock_close(o);
  dlock_client_close(other);
}

/* ---- 5. a failed release in a transaction (server restart) ---------------- */

static void restart_server(void) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s/scripts/db.sh' restart '%s' >/dev/null", dlock_test_source_dir(),
           dlock_test_db_dir());
  int rc = system(cmd);
  CHECK(rc == 0, "server restart failed (%d)", rc);
}

static void test_failed_release(dlock_client *c) {
  char k[128];
  dlock_error err;
  dlock_lock *l = lock_with(c, key(k, sizeof k, "failrel"), NULL);
  if (l == NULL) return;
  admin_sql("CREATE TABLE IF NOT EXISTS test.conc_biz (id INT PRIMARY KEY, v INT)");
  CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "try: %s", err.message);
  CHECK(dlock_begin(l, &err) == DLOCK_OK, "begin: %s", err.message);
  CHECK(dlock_exec(l, "INSERT INTO conc_biz VALUES (?, 1) ON DUPLICATE KEY UPDATE v = v + 1",
                   (const char *const[]){"1"}, 1, NULL, &err) == DLOCK_OK,
        "exec: %s", err.message);
  restart_server();
  int rc = dlock_release(l, &err);
  CHECK(rc != DLOCK_OK, "release after the restart cannot have committed the transaction");
  CHECK(dlock_held(l) == 0 && dlock_state(l) != DLOCK_STATE_HELD,
        "after a failed release the lock says held (state %d, rc %s: %s)", dlock_state(l),
        dlock_code_name(rc), err.message);
  /* Someone else can take it, and only one of us says held. */
  dlock_client *other = client_with(NULL);
  dlock_lock *o = other ? lock_with(other, k, NULL) : NULL;
  if (o != NULL) {
    CHECK(dlock_try(o, 35000, &err) == DLOCK_OK, "other: %s", err.message);
    CHECK(!(dlock_held(o) && dlock_held(l)), "both say held");
    dlock_event ev;
    while (dlock_client_next_event(c, &ev, 0, NULL) == DLOCK_OK) {
    }
    rc = dlock_release(l, &err);
    CHECK(rc == DLOCK_E_STATE || rc == DLOCK_E_LOST, "second release returned %s",
          dlock_code_name(rc));
    int gone = 0;
    while (dlock_client_next_event(c, &ev, 0, NULL) == DLOCK_OK)
      gone += ev.type == DLOCK_EVENT_RELEASE_GONE;
    CHECK(gone == 0, "second release raised %d RELEASE_GONE events", gone);
    CHECK(dlock_held(o) == 1, "other lost it to our second release");
    dlock_release(o, NULL);
    dlock_close(o);
  }
  dlock_client_close(other);
  dlock_close(l);
}

/* ---- 6. cancel: prompt, and never lost in the gap before a server wait ---- */

struct waiter {
  dlock_lock *l;
  int rc;
  int64_t returned_at;
  volatile int started;
};

static void *waiter_try(void *p) {
  struct waiter *w = p;
  __atomic_store_n(&w->started, 1, __ATOMIC_SEQ_CST);
  w->rc = dlock_try(w->l, 20000, NULL);
  w->returned_at = now_ms();
  return NULL;
}

static void test_cancel_race(const char *mode) {
  char k[128], suffix[32];
  snprintf(suffix, sizeof suffix, "cancel-%s", mode);
  key(k, sizeof k, suffix);
  dlock_client *hc = client_with(NULL);
  dlock_client *wc = client_with(NULL);
  dlock_lock *h = hc ? lock_with(hc, k, (const char *const[]){"mode", mode, NULL}) : NULL;
  dlock_lock *w = wc ? lock_with(wc, k, (const char *const[]){"mode", mode, "holder", "lock", NULL})
                     : NULL;
  dlock_error err;
  if (h == NULL || w == NULL) return;
  CHECK(dlock_try(h, 0, &err) == DLOCK_OK, "holder: %s", err.message);
  const int rounds = 100;
  int64_t slowest = 0, total = 0;
  int not_cancelled = 0;
  unsigned seed = (unsigned)getpid();
  for (int i = 0; i < rounds; ++i) {
    struct waiter wt = {w, 99, 0, 0};
    uint64_t sent0 = counter(wc, "statements");
    pthread_t t;
    pthread_create(&t, NULL, waiter_try, &wt);
    /* Inside the call for sure once it sent its first statement; then cancel
     * at a random point of the way to (or into) the server-side wait. */
    int64_t until = now_ms() + 5000;
    while (counter(wc, "statements") == sent0 && now_ms() < until) {
    }
    seed = seed * 1103515245u + 12345u;
    long delay_us = (long)((seed >> 8) % 3000);
    struct timespec ts = {0, delay_us * 1000L};
    nanosleep(&ts, NULL);
    int64_t t0 = now_ms();
    dlock_cancel(w);
    pthread_join(t, NULL);
    int64_t took = wt.returned_at - t0;
    if (took > slowest) slowest = took;
    total += took;
    if (wt.rc != DLOCK_E_CANCELLED) ++not_cancelled;
    if (wt.rc == DLOCK_OK) dlock_release(w, NULL);
  }
  printf("cancel %s: %d rounds, slowest %lld ms, mean %.1f ms\n", mode, rounds,
         (long long)slowest, (double)total / rounds);
  CHECK(not_cancelled == 0, "%s: %d waits were not cancelled", mode, not_cancelled);
  CHECK(slowest < 1000, "%s: slowest cancel took %lld ms", mode, (long long)slowest);
  dlock_release(h, NULL);
  dlock_close(w);
  dlock_close(h);
  dlock_client_close(wc);
  dlock_client_close(hc);
}

/* ---- 7. a frozen server: bounded calls, prompt cancel ----------------------- */

static void test_frozen_server(void) {
  pid_t pid = server_pid();
  if (pid <= 0) return;
  char k[128];
  dlock_error err;
  /* ct 1 s, rt 2 s: renew/release within 2*ct + rt = 4 s, try(0) within 4 s. */
  const char *opts[] = {"connect_timeout", "1", "read_timeout", "2", "pool", "4", NULL};
  dlock_client *c = client_with(opts);
  dlock_client *hc = client_with(NULL);
  if (c == NULL || hc == NULL) return;
  dlock_lock *held = lock_with(c, key(k, sizeof k, "frozen-held"), NULL);
  dlock_lock *busy_h = lock_with(hc, key(k, sizeof k, "frozen-busy"), (const char *const[]){"mode", "row", NULL});
  dlock_lock *busy_w = lock_with(c, k, (const char *const[]){"mode", "row", "holder", "lock", NULL});
  dlock_lock *fresh = lock_with(c, key(k, sizeof k, "frozen-fresh"), NULL);
  if (!held || !busy_h || !busy_w || !fresh) return;
  CHECK(dlock_try(held, 0, &err) == DLOCK_OK, "try: %s", err.message);
  CHECK(dlock_try(busy_h, 0, &err) == DLOCK_OK, "row holder: %s", err.message);
  /* Warm the pool: several idle connections that will all hang. */
  CHECK(dlock_renew(held, &err) == DLOCK_OK, "renew: %s", err.message);
  struct waiter wt = {busy_w, 99, 0, 0};
  pthread_t t;
  pthread_create(&t, NULL, waiter_try, &wt);
  CHECK(admin_poll("SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS", 1, 10000),
        "the waiter did not reach its row-lock wait in 10 s");
  kill(pid, SIGSTOP);
  int64_t t0 = now_ms();
  dlock_cancel(busy_w);
  pthread_join(t, NULL);
  int64_t cancel_ms = wt.returned_at - t0;
  CHECK(wt.rc == DLOCK_E_CANCELLED, "frozen: waiting try returned %s", dlock_code_name(wt.rc));
  CHECK(cancel_ms < 1000, "frozen: cancel took %lld ms", (long long)cancel_ms);
  t0 = now_ms();
  int rc = dlock_renew(held, &err);
  int64_t renew_ms = now_ms() - t0;
  CHECK(rc != DLOCK_OK, "renew on a frozen server returned OK");
  CHECK(renew_ms < 4000 + 1500, "frozen: renew took %lld ms (%s)", (long long)renew_ms, err.message);
  t0 = now_ms();
  rc = dlock_try(fresh, 0, &err);
  int64_t try_ms = now_ms() - t0;
  CHECK(rc != DLOCK_OK, "try on a frozen server returned OK");
  CHECK(try_ms < 4000 + 1500, "frozen: try(0) took %lld ms (%s)", (long long)try_ms, err.message);
  kill(pid, SIGCONT);
  printf("frozen server: cancel %lld ms, renew %lld ms, try(0) %lld ms\n", (long long)cancel_ms,
         (long long)renew_ms, (long long)try_ms);
  /* Back to normal: the client recovers on fresh connections. */
  int ok = 0;
  int64_t until = now_ms() + 10000;
  while (!ok && now_ms() < until) ok = dlock_try(fresh, 1000, &err) == DLOCK_OK;
  CHECK(ok, "after SIGCONT: %s", err.message);
  dlock_release(fresh, NULL);
  dlock_release(held, NULL);
  dlock_release(busy_h, NULL);
  dlock_close(fresh);
  dlock_close(busy_w);
  dlock_close(busy_h);
  dlock_close(held);
  dlock_client_close(hc);
  dlock_client_close(c);
}

/* ---- 8. the server's wait_timeout, and connections the server closed ------- */

static void test_wait_timeout(void) {
  char k[128];
  dlock_error err;
  CHECK(admin_sql("SET GLOBAL wait_timeout = 2") == 0, "SET GLOBAL wait_timeout");
  dlock_client *c = client_with(NULL);
  dlock_client *other = client_with(NULL);
  dlock_lock *l = c ? lock_with(c, key(k, sizeof k, "wt"), (const char *const[]){"mode", "row", NULL}) : NULL;
  dlock_lock *o = other ? lock_with(other, k, (const char *const[]){"mode", "row", NULL}) : NULL;
  if (l && o) {
    CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "try: %s", err.message);
    sleep_ms(4000); /* twice the server's wait_timeout, idle */
    CHECK(dlock_state(l) == DLOCK_STATE_HELD, "row lock lost to wait_timeout");
    CHECK(dlock_try(o, 0, &err) == DLOCK_BUSY, "another client got the row after wait_timeout");
    CHECK(dlock_release(l, &err) == DLOCK_OK, "release: %s", err.message);
  }
  admin_sql("SET GLOBAL wait_timeout = 28800");
  if (!l || !o) return;

  /* Idle pooled connections the server closed: replaced, the call succeeds. */
  CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "try: %s", err.message);
  CHECK(dlock_release(l, &err) == DLOCK_OK, "release: %s", err.message);
  CHECK(kill_idle_connections() > 0, "no idle connection to kill");
  CHECK(admin_poll("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE command IN "
                   "('Sleep', 'Killed') AND id <> CONNECTION_ID()",
                   0, 5000),
        "the killed sessions are still there after 5 s");
  CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "try after the server closed the pooled connections: %s",
        err.message);

  /* A held row lock whose connection the server closes: LOST, promptly. */
  CHECK(kill_idle_connections() > 0, "no idle connection to kill");
  int64_t t0 = now_ms();
  int rc = dlock_wait_lost(l, 5000, &err);
  int64_t took = now_ms() - t0;
  CHECK(rc == DLOCK_E_LOST, "wait_lost after the connection was killed: %s", dlock_code_name(rc));
  CHECK(took < 2000, "loss noticed after %lld ms", (long long)took);
  CHECK(dlock_state(l) == DLOCK_STATE_LOST, "state %d", dlock_state(l));
  CHECK(dlock_try(o, 2000, &err) == DLOCK_OK, "the row is free: %s", err.message);
  CHECK(dlock_release(l, &err) == DLOCK_E_LOST, "release of the lost row lock");
  dlock_release(o, NULL);
  dlock_close(o);
  dlock_close(l);
  dlock_client_close(other);
  dlock_client_close(c);
}

/* ---- 9. a holder id passed by the caller (dlock_try_as) ------------------- */

struct as_call {
  dlock_lock *l;
  uint64_t holder;
  int release; /* 0 try, 1 release */
  int rc;
};

static void *as_thread(void *p) {
  struct as_call *a = p;
  a->rc = a->release ? dlock_release_as(a->l, a->holder, NULL) : dlock_try_as(a->l, a->holder, 0, NULL);
  return NULL;
}

static int as_on_new_thread(dlock_lock *l, uint64_t holder, int release) {
  struct as_call a = {l, holder, release, 99};
  pthread_t t;
  pthread_create(&t, NULL, as_thread, &a);
  pthread_join(t, NULL);
  return a.rc;
}

static void test_holder_ids(dlock_client *c) {
  char k[128];
  dlock_error err;
  for (int m = 0; m < 2; ++m) {
    const char *mode = m ? "row" : "lease";
    key(k, sizeof k, m ? "as-row" : "as-lease");
    dlock_lock *l = lock_with(c, k, (const char *const[]){"mode", mode, NULL});
    if (l == NULL) return;
    /* Holder 42 on one OS thread, then on another: the same holder. */
    CHECK(as_on_new_thread(l, 42, 0) == DLOCK_OK, "%s: try_as(42)", mode);
    CHECK(as_on_new_thread(l, 42, 0) == DLOCK_OK, "%s: try_as(42) from another OS thread", mode);
    CHECK(dlock_hold_count(l) == 2, "%s: hold count %d", mode, dlock_hold_count(l));
    /* Other holders are kept out: another id, and a plain OS-thread call. */
    CHECK(dlock_try_as(l, 7, 0, &err) == DLOCK_BUSY, "%s: holder 7 got in", mode);
    CHECK(dlock_try(l, 0, &err) == DLOCK_BUSY, "%s: the OS thread got in", mode);
    CHECK(dlock_release_as(l, 7, &err) == DLOCK_E_STATE, "%s: holder 7 released", mode);
    CHECK(dlock_release(l, &err) == DLOCK_E_STATE, "%s: the OS thread released", mode);
    CHECK(as_on_new_thread(l, 42, 1) == DLOCK_OK, "%s: release_as(42)", mode);
    CHECK(dlock_held(l) == 1 && dlock_hold_count(l) == 1, "%s: inner release let go", mode);
    CHECK(dlock_release_as(l, 42, &err) == DLOCK_OK, "%s: last release_as: %s", mode, err.message);
    CHECK(dlock_held(l) == 0, "%s: still held", mode);
    /* Calls that take no id (renew, begin, exec) act on an id's hold through
     * the object it was taken with (a binding calls them from the holder's
     * thread without its id), never through another object of the key. */
    {
      dlock_lock *l2 = lock_with(c, k, (const char *const[]){"mode", mode, NULL});
      CHECK(as_on_new_thread(l, 42, 0) == DLOCK_OK, "%s: try_as(42) again", mode);
      CHECK(dlock_held(l) == 1 && dlock_hold_count(l) == 1, "%s: the id's hold through l", mode);
      CHECK(dlock_renew(l, &err) == DLOCK_OK, "%s: renew of the id's hold through l: %s", mode,
            err.message);
      CHECK(dlock_held(l2) == 0 && dlock_token(l2) == 0, "%s: l2 took nothing, yet shows a hold",
            mode);
      CHECK(dlock_renew(l2, &err) == DLOCK_E_STATE, "%s: renew through l2 returned %s", mode,
            dlock_code_name(err.code));
      CHECK(dlock_exec(l2, "SELECT 1", NULL, 0, NULL, &err) == DLOCK_E_STATE,
            "%s: exec through l2 returned %s", mode, dlock_code_name(err.code));
      CHECK(dlock_release(l, &err) == DLOCK_E_STATE, "%s: a release without the id", mode);
      CHECK(dlock_release_as(l, 42, &err) == DLOCK_OK, "%s: release_as(42): %s", mode, err.message);
      dlock_close(l2);
    }
    /* Holder id 0 is the calling OS thread in every call that takes an id,
     * as in the calls without one. */
    CHECK(dlock_try_as(l, 0, 0, &err) == DLOCK_OK, "%s: try_as(0): %s", mode, err.message);
    CHECK(dlock_hold_count_as(l, 0) == 1 && dlock_hold_count(l) == 1, "%s: hold_count_as(0) %d",
          mode, dlock_hold_count_as(l, 0));
    CHECK(dlock_try(l, 0, &err) == DLOCK_OK && dlock_hold_count_as(l, 0) == 2,
          "%s: the OS thread re-enters a try_as(0) hold", mode);
    CHECK(as_on_new_thread(l, 0, 1) == DLOCK_E_STATE, "%s: release_as(0) on another thread", mode);
    CHECK(as_on_new_thread(l, 0, 0) == DLOCK_BUSY, "%s: try_as(0) on another thread", mode);
    CHECK(dlock_release(l, &err) == DLOCK_OK, "%s: release: %s", mode, err.message);
    CHECK(dlock_release_as(l, 0, &err) == DLOCK_OK, "%s: release_as(0): %s", mode, err.message);
    CHECK(dlock_held(l) == 0, "%s: held after the last release", mode);
    {
      uint64_t mark = dlock_cancel_mark(l);
      CHECK(dlock_try_from(l, 0, mark, 0, &err) == DLOCK_OK, "%s: try_from(0): %s", mode,
            err.message);
      CHECK(dlock_release_as(l, 0, &err) == DLOCK_OK, "%s: release_as(0) of try_from(0): %s", mode,
            err.message);
    }
    CHECK(dlock_try_as(l, 7, 0, &err) == DLOCK_OK, "%s: holder 7 after release: %s", mode, err.message);
    CHECK(dlock_release_as(l, 7, &err) == DLOCK_OK, "%s: release_as(7)", mode);
    /* hold_count_as / rollback_as speak for one holder. */
    CHECK(dlock_try_as(l, 5, 0, &err) == DLOCK_OK, "%s: try_as(5): %s", mode, err.message);
    CHECK(dlock_hold_count_as(l, 5) == 1 && dlock_hold_count_as(l, 6) == 0, "%s: hold_count_as",
          mode);
    if (m == 1) {
      CHECK(dlock_rollback_as(l, 6, &err) == DLOCK_E_STATE, "%s: rollback_as by another holder",
            mode);
      CHECK(dlock_rollback_as(l, 5, &err) == DLOCK_OK, "%s: rollback_as(5): %s", mode, err.message);
    } else {
      CHECK(dlock_release_as(l, 5, &err) == DLOCK_OK, "%s: release_as(5)", mode);
    }
    CHECK(dlock_held(l) == 0, "%s: held after the holder let go", mode);
    /* A cancel that comes before the call begins, after the caller's mark. */
    {
      dlock_client *oc = client_with(NULL);
      dlock_lock *h = oc ? lock_with(oc, k, (const char *const[]){"mode", mode, NULL}) : NULL;
      if (h != NULL && dlock_try(h, 0, &err) == DLOCK_OK) {
        uint64_t mark = dlock_cancel_mark(l);
        int64_t t0 = now_ms();
        CHECK(dlock_try_from(l, 0, mark, 300, &err) == DLOCK_BUSY, "%s: try_from, no cancel", mode);
        /* The holder's remaining lease came back with the busy answer. */
        int64_t left = dlock_busy_remaining_ms(l);
        if (m == 0)
          CHECK(left > 20000 && left <= 30000, "%s: busy_remaining_ms %lld", mode, (long long)left);
        else
          CHECK(left == -1, "row: busy_remaining_ms %lld, want -1", (long long)left);
        mark = dlock_cancel_mark(l);
        dlock_cancel(l); /* before the call */
        t0 = now_ms();
        int rc = dlock_try_from(l, 77, mark, 10000, &err);
        CHECK(rc == DLOCK_E_CANCELLED, "%s: try_from after an early cancel returned %s", mode,
              dlock_code_name(rc));
        CHECK(now_ms() - t0 < 1000, "%s: early cancel took %lld ms", mode, (long long)(now_ms() - t0));
        dlock_release(h, NULL);
        mark = dlock_cancel_mark(l);
        CHECK(dlock_try_from(l, 77, mark, 2000, &err) == DLOCK_OK, "%s: try_from: %s", mode, err.message);
        CHECK(dlock_hold_count_as(l, 77) == 1, "%s: try_from took it for holder 77", mode);
        dlock_release_as(l, 77, NULL);
      }
      dlock_close(h);
      dlock_client_close(oc);
    }
    CHECK(dlock_try_as(NULL, 1, 0, &err) == DLOCK_E_INVALID, "NULL lock");
    CHECK(dlock_try_from(NULL, 1, 0, 0, &err) == DLOCK_E_INVALID, "NULL lock");
    CHECK(dlock_rollback_as(NULL, 1, &err) == DLOCK_E_INVALID, "NULL lock");
    CHECK(dlock_hold_count_as(NULL, 1) == 0 && dlock_cancel_mark(NULL) == 0 &&
              dlock_busy_remaining_ms(NULL) == -1, "NULL lock");
    CHECK(dlock_release_as(NULL, 1, &err) == DLOCK_E_INVALID, "NULL lock");
    dlock_close(l);
  }
}

/* ---- 9b. cancel marks for dlock_wait_lost (1.2) ------------------------------ */

/* A loss watcher as a binding writes it: mark, check "closing", wait. The
 * pause between the check and the call stands for a thread preempted there:
 * it widens the gap a cancel must not fall into. */
struct watcher {
  dlock_lock *l;
  volatile int closing;
  long pause_us;
  int rc;
  int64_t returned_at;
};

static void *watch_lost(void *p) {
  struct watcher *w = p;
  w->rc = DLOCK_OK;
  uint64_t mark = dlock_cancel_mark(w->l);
  if (!__atomic_load_n(&w->closing, __ATOMIC_SEQ_CST)) {
    struct timespec ts = {0, w->pause_us * 1000L};
    nanosleep(&ts, NULL);
    w->rc = dlock_wait_lost_from(w->l, mark, 20000, NULL);
  }
  w->returned_at = now_ms();
  return NULL;
}

static void test_wait_lost_mark(dlock_client *c) {
  char k[128];
  dlock_error err;
  for (int m = 0; m < 2; ++m) {
    const char *mode = m ? "row" : "lease";
    key(k, sizeof k, m ? "wlmark-row" : "wlmark-lease");
    dlock_lock *l = lock_with(c, k, (const char *const[]){"mode", mode, "holder", "lock", NULL});
    if (l == NULL) return;
    CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "%s: try: %s", mode, err.message);
    /* A cancel after the mark but before the call: the call ends at once. */
    uint64_t mark = dlock_cancel_mark(l);
    dlock_cancel(l);
    int64_t t0 = now_ms();
    int rc = dlock_wait_lost_from(l, mark, 10000, &err);
    CHECK(rc == DLOCK_E_CANCELLED, "%s: wait_lost_from after an early cancel returned %s", mode,
          dlock_code_name(rc));
    CHECK(now_ms() - t0 < 1000, "%s: early cancel took %lld ms", mode, (long long)(now_ms() - t0));
    /* That cancel is spent for a later mark, and plain dlock_wait_lost never
     * sees a cancel sent before it: both wait out their timeout. */
    t0 = now_ms();
    rc = dlock_wait_lost_from(l, dlock_cancel_mark(l), 300, &err);
    CHECK(rc == DLOCK_E_TIMEOUT && now_ms() - t0 >= 250, "%s: fresh mark: %s after %lld ms", mode,
          dlock_code_name(rc), (long long)(now_ms() - t0));
    t0 = now_ms();
    rc = dlock_wait_lost(l, 300, &err);
    CHECK(rc == DLOCK_E_TIMEOUT && now_ms() - t0 >= 250, "%s: wait_lost: %s after %lld ms", mode,
          dlock_code_name(rc), (long long)(now_ms() - t0));
    CHECK(dlock_held(l) == 1, "%s: a cancelled wait let go of the lock", mode);
    /* The protocol a binding's close relies on: set "closing", send one
     * cancel. Wherever that lands (before the mark, between the mark and the
     * call, inside it) the watcher returns promptly; a lost cancel would
     * leave it in its 20 s wait (as plain dlock_wait_lost does here). */
    const int rounds = 200;
    int64_t slowest = 0;
    int wrong = 0;
    unsigned seed = (unsigned)getpid() + (unsigned)m;
    for (int i = 0; i < rounds; ++i) {
      seed = seed * 1103515245u + 12345u;
      struct watcher w = {l, 0, (long)((seed >> 8) % 500), 99, 0};
      pthread_t t;
      pthread_create(&t, NULL, watch_lost, &w);
      seed = seed * 1103515245u + 12345u;
      struct timespec ts = {0, (long)((seed >> 8) % 500) * 1000L};
      nanosleep(&ts, NULL);
      int64_t t1 = now_ms();
      __atomic_store_n(&w.closing, 1, __ATOMIC_SEQ_CST);
      dlock_cancel(l);
      pthread_join(t, NULL);
      if (w.returned_at - t1 > slowest) slowest = w.returned_at - t1;
      if (w.rc != DLOCK_E_CANCELLED && w.rc != DLOCK_OK) ++wrong;
    }
    printf("wait_lost_from %s: %d closes, slowest %lld ms\n", mode, rounds, (long long)slowest);
    CHECK(wrong == 0, "%s: %d watchers returned neither CANCELLED nor OK", mode, wrong);
    CHECK(slowest < 1000, "%s: slowest watcher took %lld ms to see one cancel", mode,
          (long long)slowest);
    /* Released: DLOCK_OK, also with a cancel after the mark pending (the
     * state is answered first). */
    mark = dlock_cancel_mark(l);
    CHECK(dlock_release(l, &err) == DLOCK_OK, "%s: release: %s", mode, err.message);
    CHECK(dlock_wait_lost_from(l, mark, 1000, &err) == DLOCK_OK, "%s: not held: %s", mode,
          err.message);
    dlock_close(l);
  }
  CHECK(dlock_wait_lost_from(NULL, 0, 0, &err) == DLOCK_E_INVALID, "NULL lock");
  CHECK(dlock_wait_lost_from(NULL, 0, 0, NULL) == DLOCK_E_INVALID, "NULL lock, NULL err");
}

/* ---- 10. reentrancy by holder across lock objects (article 6.4) ---------- */

static void *try_zero(void *p) {
  dlock_lock *l = p;
  int rc = dlock_try(l, 0, NULL);
  if (rc == DLOCK_OK) dlock_release(l, NULL);
  return (void *)(intptr_t)rc;
}

static int try_on_new_thread(dlock_lock *l) {
  pthread_t t;
  void *rc;
  pthread_create(&t, NULL, try_zero, l);
  pthread_join(t, &rc);
  return (int)(intptr_t)rc;
}

/* ---- a close giving back the last hold races a re-entry through another object */

struct closer {
  dlock_lock *l;
  pthread_barrier_t *go;
};

static void *close_on_go(void *p) {
  struct closer *cl = p;
  pthread_barrier_wait(cl->go);
  dlock_close(cl->l);
  return NULL;
}

/* This thread holds the key through a (count 1); another thread closes a,
 * giving that hold back, while this thread tries through b, which shares
 * it. Either order is fine (re-entered, then the close leaves count 1; or
 * released, then taken afresh), but a try that returned OK must end with
 * the lock held, in every round: the close's check that a's holds are the
 * last and its mark "being released" are one step. */
static void test_close_races_reentry(dlock_client *c, const char *mode) {
  char k[128], suffix[48];
  dlock_error err;
  snprintf(suffix, sizeof suffix, "close-reenter-%s", mode);
  key(k, sizeof k, suffix);
  const char *opts[] = {"mode", mode, NULL};
  dlock_client *other = client_with(NULL);
  dlock_lock *o = other ? lock_with(other, k, opts) : NULL;
  if (o == NULL) return;
  int bad = 0;
  for (int i = 0; i < 100; ++i) {
    dlock_lock *a = lock_with(c, k, opts), *b = lock_with(c, k, opts);
    if (a == NULL || b == NULL) break;
    if (dlock_try(a, 3000, &err) != DLOCK_OK) {
      ++bad;
      fprintf(stderr, "round %d: a: %s\n", i, err.message);
      dlock_close(a);
      dlock_close(b);
      continue;
    }
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    struct closer cl = {a, &go};
    pthread_t t;
    pthread_create(&t, NULL, close_on_go, &cl);
    pthread_barrier_wait(&go);
    int rc = dlock_try(b, 3000, &err);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&go);
    if (rc == DLOCK_OK) {
      if (!dlock_held(b) || dlock_hold_count(b) != 1) {
        ++bad;
        fprintf(stderr, "round %d: try OK but held=%d count=%d\n", i, dlock_held(b),
                dlock_hold_count(b));
      } else if (dlock_try(o, 0, &err) != DLOCK_BUSY) {
        ++bad;
        fprintf(stderr, "round %d: b holds, yet another client took the key\n", i);
        dlock_release(o, NULL);
      }
    } else {
      ++bad;
      fprintf(stderr, "round %d: try through b: %s\n", i, dlock_code_name(rc));
    }
    dlock_close(b);
  }
  CHECK(bad == 0, "%s: %d bad rounds of 100", mode, bad);
  CHECK(dlock_try(o, 3000, &err) == DLOCK_OK, "%s: key not free afterwards: %s", mode, err.message);
  dlock_release(o, NULL);
  dlock_close(o);
  dlock_client_close(other);
}

static void test_shared_holds(dlock_client *c) {
  char k[128], oa[256], ob[256];
  dlock_error err;
  dlock_client *other = client_with(NULL);
  for (int m = 0; m < 2 && other != NULL; ++m) {
    const char *mode = m ? "row" : "lease";
    key(k, sizeof k, m ? "shared-row" : "shared-lease");
    const char *opts[] = {"mode", mode, NULL};
    dlock_lock *a = lock_with(c, k, opts), *b = lock_with(c, k, opts);
    dlock_lock *o = lock_with(other, k, opts);
    if (!a || !b || !o) return;
    /* Nested objects in one thread: the inner one enters at once. */
    CHECK(dlock_try(a, 0, &err) == DLOCK_OK, "%s: a: %s", mode, err.message);
    CHECK(dlock_try(b, 0, &err) == DLOCK_OK, "%s: b (same thread) must enter: %s", mode, err.message);
    dlock_owner_copy(a, oa, sizeof oa);
    dlock_owner_copy(b, ob, sizeof ob);
    CHECK(strcmp(oa, ob) == 0 && dlock_token(a) == dlock_token(b), "%s: one hold, one owner/token", mode);
    CHECK(dlock_hold_count(a) == 2 && dlock_hold_count(b) == 2, "%s: count %d", mode, dlock_hold_count(a));
    /* Another thread (through either object) and another client stay out. */
    CHECK(try_on_new_thread(b) == DLOCK_BUSY, "%s: another thread got in through b", mode);
    CHECK(try_on_new_thread(a) == DLOCK_BUSY, "%s: another thread got in through a", mode);
    CHECK(dlock_try(o, 0, &err) == DLOCK_BUSY, "%s: another client got in", mode);
    /* The inner release keeps the hold; the last one releases. */
    CHECK(dlock_release(b, &err) == DLOCK_OK, "%s: inner release: %s", mode, err.message);
    CHECK(dlock_held(a) && dlock_hold_count(a) == 1, "%s: inner release let go", mode);
    CHECK(dlock_try(o, 0, &err) == DLOCK_BUSY, "%s: another client got in after the inner release", mode);
    CHECK(dlock_release(a, &err) == DLOCK_OK, "%s: outer release: %s", mode, err.message);
    CHECK(!dlock_held(a) && !dlock_held(b), "%s: still held", mode);
    CHECK(dlock_try(o, 2000, &err) == DLOCK_OK, "%s: free for others: %s", mode, err.message);
    dlock_release(o, NULL);
    /* Releasing in the wrong order. */
    CHECK(dlock_try(a, 0, &err) == DLOCK_OK && dlock_try(b, 0, &err) == DLOCK_OK, "%s: again", mode);
    CHECK(dlock_release(a, &err) == DLOCK_OK && dlock_held(b), "%s: a first keeps b's hold", mode);
    CHECK(dlock_release(b, &err) == DLOCK_OK && !dlock_held(b), "%s: b last releases", mode);
    /* Closing an object that still holds gives back its own holds only. */
    CHECK(dlock_try(a, 0, &err) == DLOCK_OK && dlock_try(b, 0, &err) == DLOCK_OK &&
              dlock_try(b, 0, &err) == DLOCK_OK, "%s: three holds", mode);
    dlock_close(a);
    CHECK(dlock_held(b) && dlock_hold_count(b) == 2, "%s: closing a took b's holds (count %d)", mode,
          dlock_hold_count(b));
    CHECK(dlock_try(o, 0, &err) == DLOCK_BUSY, "%s: free after closing a", mode);
    CHECK(dlock_release(b, &err) == DLOCK_OK && dlock_release(b, &err) == DLOCK_OK, "%s: b's releases", mode);
    CHECK(!dlock_held(b), "%s: still held at the end", mode);
    a = lock_with(c, k, opts);
    CHECK(dlock_try(a, 0, &err) == DLOCK_OK && dlock_try(b, 0, &err) == DLOCK_OK, "%s: two holds", mode);
    dlock_close(b); /* gives back b's hold; a still holds */
    CHECK(dlock_held(a) && dlock_hold_count(a) == 1, "%s: closing b", mode);
    dlock_close(a); /* the last hold: released */
    CHECK(dlock_try(o, 2000, &err) == DLOCK_OK, "%s: closing the last holder released it: %s", mode,
          err.message);
    dlock_release(o, NULL);
    /* Different options: refused while d is open (they would share its
     * hold on its settings; since 1.3). */
    dlock_lock *d = lock_with(c, k, opts), *e = NULL;
    dlock_config *ttl_cfg = NULL;
    dlock_config_new(&ttl_cfg, NULL);
    dlock_config_set(ttl_cfg, "mode", mode, NULL);
    dlock_config_set(ttl_cfg, "ttl_ms", "12345", NULL);
    CHECK(dlock_open(&e, c, k, strlen(k), ttl_cfg, &err) == DLOCK_E_INVALID && e == NULL &&
              strstr(err.message, "ttl_ms") != NULL,
          "%s: an object with other options was not refused: %s", mode, err.message);
    dlock_config_free(ttl_cfg);
    dlock_close(d);
    dlock_close(e);
    dlock_close(o);
  }
  dlock_client_close(other);
}

/* ---- 11. every accessor and call answers for the caller's own hold -------- */

/* A thread that runs the steps it is given, one at a time: with
 * holder=thread the thread is the holder, so each holder of a test is one
 * such agent, and the test runs their steps in an exact order. */
struct agent {
  pthread_t t;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  void (*fn)(void *);
  void *arg;
  int pending, quit;
};

static void *agent_main(void *p) {
  struct agent *a = p;
  pthread_mutex_lock(&a->mu);
  for (;;) {
    while (!a->pending && !a->quit) pthread_cond_wait(&a->cv, &a->mu);
    if (a->pending) {
      pthread_mutex_unlock(&a->mu);
      a->fn(a->arg);
      pthread_mutex_lock(&a->mu);
      a->pending = 0;
      pthread_cond_broadcast(&a->cv);
    } else {
      break;
    }
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

static void agent_start(struct agent *a) {
  memset(a, 0, sizeof *a);
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
  pthread_create(&a->t, NULL, agent_main, a);
}

/* Runs fn(arg) on the agent's thread and waits until it returned. */
static void agent_run(struct agent *a, void (*fn)(void *), void *arg) {
  pthread_mutex_lock(&a->mu);
  a->fn = fn;
  a->arg = arg;
  a->pending = 1;
  pthread_cond_broadcast(&a->cv);
  while (a->pending) pthread_cond_wait(&a->cv, &a->mu);
  pthread_mutex_unlock(&a->mu);
}

static void agent_stop(struct agent *a) {
  pthread_mutex_lock(&a->mu);
  a->quit = 1;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  pthread_join(a->t, NULL);
  pthread_cond_destroy(&a->cv);
  pthread_mutex_destroy(&a->mu);
}

enum op { OP_SEE, OP_TRY, OP_RENEW, OP_BEGIN, OP_EXEC, OP_ROLLBACK, OP_RELEASE, OP_WAIT_LOST };

/* One call through lock l on the agent's thread, and what the accessors say
 * to that thread afterwards. */
struct call {
  dlock_lock *l;
  enum op op;
  int64_t ms;       /* try's wait, wait_lost's timeout */
  const char *sql;  /* OP_EXEC, with one parameter */
  const char *param;
  int rc;
  char msg[512];
  int64_t took_ms;
  int state, held, count;
  uint64_t token;
  int64_t remaining;
  char owner[256];
};

static void do_call(void *p) {
  struct call *c = p;
  dlock_error err;
  err.message[0] = '\0';
  int64_t t0 = now_ms();
  switch (c->op) {
    case OP_SEE: c->rc = DLOCK_OK; break;
    case OP_TRY: c->rc = dlock_try(c->l, c->ms, &err); break;
    case OP_RENEW: c->rc = dlock_renew(c->l, &err); break;
    case OP_BEGIN: c->rc = dlock_begin(c->l, &err); break;
    case OP_EXEC:
      c->rc = dlock_exec(c->l, c->sql, (const char *const[]){c->param}, 1, NULL, &err);
      break;
    case OP_ROLLBACK: c->rc = dlock_rollback(c->l, &err); break;
    case OP_RELEASE: c->rc = dlock_release(c->l, &err); break;
    case OP_WAIT_LOST: c->rc = dlock_wait_lost(c->l, c->ms, &err); break;
  }
  c->took_ms = now_ms() - t0;
  memcpy(c->msg, err.message, sizeof c->msg);
  c->state = dlock_state(c->l);
  c->held = dlock_held(c->l);
  c->count = dlock_hold_count(c->l);
  c->token = dlock_token(c->l);
  c->remaining = dlock_remaining_ms(c->l);
  dlock_owner_copy(c->l, c->owner, sizeof c->owner);
}

/* Runs op through l on agent a; returns the call's result (and *out). */
static struct call on(struct agent *a, dlock_lock *l, enum op op, int64_t ms) {
  struct call c;
  memset(&c, 0, sizeof c);
  c.l = l;
  c.op = op;
  c.ms = ms;
  agent_run(a, do_call, &c);
  return c;
}

static struct call exec_on(struct agent *a, dlock_lock *l, const char *sql, const char *param) {
  struct call c;
  memset(&c, 0, sizeof c);
  c.l = l;
  c.op = OP_EXEC;
  c.sql = sql;
  c.param = param;
  agent_run(a, do_call, &c);
  return c;
}

/* Finding 1 of issue 24: T1 takes the key through O1 (ttl 300 ms) and
 * stalls; T2, through its own O2 of the same client (objects that share one
 * hold), takes it when T1's lease runs out. Through O1 (and O2) T1 then sees
 * its own hold, LOST, with its token and owner, and every call acting on a
 * hold says LOST; it never renews, begins or writes in T2's hold. Also with
 * one object shared by both threads (a pool of workers). */
static void test_own_hold_lost(dlock_client *c, int one_object) {
  char k[128];
  const char *what = one_object ? "one object" : "two objects";
  key(k, sizeof k, one_object ? "own-lost-1" : "own-lost-2");
  const char *opts[] = {"ttl_ms", "300", NULL};
  dlock_lock *o1 = lock_with(c, k, opts);
  dlock_lock *o2 = one_object ? o1 : lock_with(c, k, opts);
  if (o1 == NULL || o2 == NULL) return;
  struct agent t1, t2;
  agent_start(&t1);
  agent_start(&t2);
  struct call a = on(&t1, o1, OP_TRY, 0);
  CHECK(a.rc == DLOCK_OK && a.held && a.count == 1, "%s: T1 try: %s", what, a.msg);
  const uint64_t token1 = a.token;
  char owner1[256];
  memcpy(owner1, a.owner, sizeof owner1);
  /* T2 waits through its object; T1's lease runs out by our clock after
   * 300 ms and T2 takes the key. */
  struct call b = on(&t2, o2, OP_TRY, 10000);
  CHECK(b.rc == DLOCK_OK && b.held && b.count == 1 && b.token > token1,
        "%s: T2 try: %s (token %llu after %llu)", what, b.msg, (unsigned long long)b.token,
        (unsigned long long)token1);
  CHECK(strcmp(b.owner, owner1) != 0, "%s: T2 got T1's owner id", what);
  /* T1, through its own object and through the other one. */
  for (int via = 0; via < 2; ++via) {
    dlock_lock *l = via ? o2 : o1;
    struct call s = on(&t1, l, OP_SEE, 0);
    CHECK(s.state == DLOCK_STATE_LOST && !s.held && s.count == 0 && s.remaining == 0,
          "%s via O%d: T1 sees state %d held %d count %d remaining %lld", what, via + 1, s.state,
          s.held, s.count, (long long)s.remaining);
    CHECK(s.token == token1 && strcmp(s.owner, owner1) == 0,
          "%s via O%d: T1 sees token %llu owner %s (its own: %llu %s)", what, via + 1,
          (unsigned long long)s.token, s.owner, (unsigned long long)token1, owner1);
  }
  const enum op acts[] = {OP_RENEW, OP_BEGIN, OP_ROLLBACK};
  for (size_t i = 0; i < sizeof acts / sizeof acts[0]; ++i) {
    struct call r = on(&t1, o1, acts[i], 0);
    CHECK(r.rc == DLOCK_E_LOST, "%s: T1's call %d on the lost hold returned %s: %s", what,
          (int)acts[i], dlock_code_name(r.rc), r.msg);
  }
  struct call x = exec_on(&t1, o1, "SELECT ?", "1");
  CHECK(x.rc == DLOCK_E_LOST, "%s: T1's exec returned %s: %s", what, dlock_code_name(x.rc), x.msg);
  struct call w = on(&t1, o1, OP_WAIT_LOST, 5000);
  CHECK(w.rc == DLOCK_E_LOST && w.took_ms < 1000, "%s: T1's wait_lost returned %s after %lld ms",
        what, dlock_code_name(w.rc), (long long)w.took_ms);
  /* T2's hold is untouched: its lease was not renewed by T1 (remaining
   * falls), it is still held and T2 renews it. */
  struct call s2 = on(&t2, o2, OP_SEE, 0);
  CHECK(s2.held && s2.count == 1 && s2.token == b.token, "%s: T2's hold after T1's calls", what);
  struct call r2 = on(&t2, o2, OP_RENEW, 0);
  CHECK(r2.rc == DLOCK_OK, "%s: T2's renew: %s", what, r2.msg);
  /* T1's release reports its loss, and leaves T2's hold alone. */
  struct call rel1 = on(&t1, o1, OP_RELEASE, 0);
  CHECK(rel1.rc == DLOCK_E_LOST, "%s: T1's release returned %s: %s", what,
        dlock_code_name(rel1.rc), rel1.msg);
  s2 = on(&t2, o1, OP_SEE, 0); /* T2 holds it through either object */
  CHECK(s2.held && s2.count == 1 && s2.token == b.token, "%s: T2's hold after T1's release", what);
  /* A new attempt by T1 (busy) is where its old loss ends. T1 then holds
   * nothing of its own: through its own object it sees nothing; through an
   * object another thread took the hold with, that hold (as a loss watcher
   * would), and it still may not act on it. */
  struct call again = on(&t1, o1, OP_TRY, 0);
  CHECK(again.rc == DLOCK_BUSY, "%s: T1's new try returned %s", what, dlock_code_name(again.rc));
  if (one_object)
    CHECK(again.state == DLOCK_STATE_HELD && again.token == b.token,
          "%s: T1 sees state %d token %llu through the object T2 took it with", what, again.state,
          (unsigned long long)again.token);
  else
    CHECK(again.state == DLOCK_STATE_IDLE && !again.held && again.token == token1,
          "%s: T1 sees state %d token %llu after its new try", what, again.state,
          (unsigned long long)again.token);
  struct call nr = on(&t1, o1, OP_RENEW, 0);
  CHECK(nr.rc == DLOCK_E_STATE, "%s: T1's renew of T2's hold returned %s", what,
        dlock_code_name(nr.rc));
  struct call rel2 = on(&t2, o2, OP_RELEASE, 0);
  CHECK(rel2.rc == DLOCK_OK, "%s: T2's release: %s", what, rel2.msg);
  struct call mine = on(&t1, o1, OP_TRY, 0);
  CHECK(mine.rc == DLOCK_OK && mine.held && mine.token > b.token, "%s: T1 takes it again: %s",
        what, mine.msg);
  on(&t1, o1, OP_RELEASE, 0);
  agent_stop(&t1);
  agent_stop(&t2);
  if (!one_object) dlock_close(o2);
  dlock_close(o1);
}

/* Finding 2 of issue 24: T1 holds the key through O1 and writes in its
 * transaction; T2's try through its own O2 is busy, and then O2 shows T2
 * nothing held, and T2's exec, rollback, begin, renew and release through O2
 * are refused: T1's transaction keeps its row, which its release commits. */
static void test_own_hold_busy(dlock_client *c, const char *mode) {
  char k[128], id[32];
  const int row = strcmp(mode, "row") == 0;
  snprintf(id, sizeof id, "%ld", (long)(getpid() % 100000) * 10 + row);
  key(k, sizeof k, row ? "own-busy-row" : "own-busy-lease");
  const char *opts[] = {"mode", mode, NULL};
  dlock_lock *o1 = lock_with(c, k, opts), *o2 = lock_with(c, k, opts);
  dlock_lock *probe = lock_with(c, key(k, sizeof k, "own-busy-probe"),
                                (const char *const[]){"mode", "row", "holder", "lock", NULL});
  if (o1 == NULL || o2 == NULL || probe == NULL) return;
  create_conc_biz(c);
  struct agent t1, t2;
  agent_start(&t1);
  agent_start(&t2);
  struct call a = on(&t1, o1, OP_TRY, 0);
  CHECK(a.rc == DLOCK_OK, "%s: T1 try: %s", mode, a.msg);
  if (!row) CHECK(on(&t1, o1, OP_BEGIN, 0).rc == DLOCK_OK, "%s: T1 begin", mode);
  struct call x = exec_on(&t1, o1, "INSERT INTO conc_biz VALUES (?, 1)", id);
  CHECK(x.rc == DLOCK_OK, "%s: T1's insert: %s", mode, x.msg);
  struct call b = on(&t2, o2, OP_TRY, 0);
  CHECK(b.rc == DLOCK_BUSY, "%s: T2's try returned %s", mode, dlock_code_name(b.rc));
  CHECK(b.state == DLOCK_STATE_IDLE && !b.held && b.count == 0 && b.token == 0 &&
            b.owner[0] == '\0' && b.remaining == (row ? -1 : 0),
        "%s: after a busy try T2 sees state %d held %d count %d token %llu owner '%s' remaining "
        "%lld through its object",
        mode, b.state, b.held, b.count, (unsigned long long)b.token, b.owner,
        (long long)b.remaining);
  struct call bx = exec_on(&t2, o2, "DELETE FROM conc_biz WHERE id = ?", id);
  CHECK(bx.rc == DLOCK_E_STATE, "%s: T2's exec in T1's transaction returned %s", mode,
        dlock_code_name(bx.rc));
  const enum op acts[] = {OP_ROLLBACK, OP_BEGIN, OP_RENEW, OP_RELEASE};
  for (size_t i = 0; i < sizeof acts / sizeof acts[0]; ++i) {
    struct call r = on(&t2, o2, acts[i], 0);
    CHECK(r.rc == DLOCK_E_STATE, "%s: T2's call %d on T1's hold returned %s: %s", mode,
          (int)acts[i], dlock_code_name(r.rc), r.msg);
  }
  struct call w = on(&t2, o2, OP_WAIT_LOST, 5000);
  CHECK(w.rc == DLOCK_OK && w.took_ms < 1000, "%s: T2's wait_lost returned %s after %lld ms", mode,
        dlock_code_name(w.rc), (long long)w.took_ms);
  /* T1's hold and transaction are whole: its release commits its row. */
  struct call s = on(&t1, o1, OP_SEE, 0);
  CHECK(s.held && s.count == 1 && s.token == a.token, "%s: T1's hold after T2's calls", mode);
  CHECK(on(&t1, o1, OP_RELEASE, 0).rc == DLOCK_OK, "%s: T1's release", mode);
  int64_t affected = -1;
  dlock_error err;
  if (dlock_try(probe, 5000, &err) == DLOCK_OK) {
    CHECK(dlock_exec(probe, "DELETE FROM conc_biz WHERE id = ?", (const char *const[]){id}, 1,
                     &affected, &err) == DLOCK_OK,
          "%s: probe delete: %s", mode, err.message);
    CHECK(affected == 1, "%s: T1's row was not committed with its release (%lld rows)", mode,
          (long long)affected);
    dlock_release(probe, NULL);
  }
  agent_stop(&t1);
  agent_stop(&t2);
  dlock_close(probe);
  dlock_close(o2);
  dlock_close(o1);
}

/* ---- dlock_client_init_schema while the client's locks are in use ---------- */

struct cycler {
  dlock_lock *l;
  volatile int stop;
  int rounds, failures;
};

static void *lock_cycler(void *p) {
  struct cycler *cy = p;
  while (!__atomic_load_n(&cy->stop, __ATOMIC_SEQ_CST)) {
    if (dlock_try(cy->l, 5000, NULL) != DLOCK_OK || dlock_release(cy->l, NULL) != DLOCK_OK)
      ++cy->failures;
    ++cy->rounds;
  }
  return NULL;
}

static void test_init_schema_in_use(dlock_client *c) {
  char kl[128], kr[128];
  dlock_error err;
  dlock_lock *lease = lock_with(c, key(kl, sizeof kl, "schema-lease"), NULL);
  dlock_lock *row = lock_with(c, key(kr, sizeof kr, "schema-row"), (const char *const[]){"mode", "row", NULL});
  if (lease == NULL || row == NULL) return;
  struct cycler cy[2] = {{lease, 0, 0, 0}, {row, 0, 0, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, lock_cycler, &cy[i]);
  int ok = 0;
  for (int i = 0; i < 20; ++i) ok += dlock_client_init_schema(c, &err) == DLOCK_OK;
  for (int i = 0; i < 2; ++i) {
    __atomic_store_n(&cy[i].stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(t[i], NULL);
  }
  CHECK(ok == 20, "init_schema beside lock traffic: %d/20 OK (%s)", ok, err.message);
  for (int i = 0; i < 2; ++i) {
    CHECK(cy[i].rounds > 0 && cy[i].failures == 0, "%s: %d of %d rounds failed beside init_schema",
          i ? "row" : "lease", cy[i].failures, cy[i].rounds);
  }
  dlock_close(lease);
  dlock_close(row);
}

static int selected(const char *name) {
  const char *only = getenv("CONC_TEST_ONLY");
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
  snprintf(g_prefix, sizeof g_prefix, "conc-%ld-%ld-", (long)getpid(), (long)time(NULL));
  dlock_client *c = client_with(NULL);
  if (c == NULL) {
    printf("0 passed, 1 failed\n");
    return 1;
  }
  RUN("race_lease", test_try_release_race(c, "lease"));
  RUN("race_row", test_try_release_race(c, "row"));
  RUN("close_lease", test_close_in_use(c, "lease"));
  RUN("close_row", test_close_in_use(c, "row"));
  RUN("owner_lease", test_owner_copy(c, "lease"));
  RUN("owner_row", test_owner_copy(c, "row"));
  RUN("txn_enders", test_txn_enders(c));
  RUN("holder_ids", test_holder_ids(c));
  RUN("wait_lost_mark", test_wait_lost_mark(c));
  RUN("shared_holds", test_shared_holds(c));
  RUN("close_reenter", (test_close_races_reentry(c, "lease"), test_close_races_reentry(c, "row")));
  RUN("own_lost", (test_own_hold_lost(c, 0), test_own_hold_lost(c, 1)));
  RUN("own_busy", (test_own_hold_busy(c, "lease"), test_own_hold_busy(c, "row")));
  RUN("init_schema", test_init_schema_in_use(c));
  RUN("cancel_lease", test_cancel_race("lease"));
  RUN("cancel_row", test_cancel_race("row"));
  if (dlock_test_server_is_ours()) {
    RUN("wait_timeout", test_wait_timeout());
    RUN("frozen", test_frozen_server());
    RUN("failed_release", test_failed_release(c));
  } else {
    printf("  (server tests skipped: not our server)\n");
  }
  dlock_client_close(c);
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
