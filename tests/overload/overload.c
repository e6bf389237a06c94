/* Overload: how dlock behaves when there is not enough of something.
 *
 *   overload connections ADMIN_URL [CLIENTS [SECONDS]]
 *     CLIENTS (200) clients of their own, each a thread, open at once
 *     against a server whose max_connections is set to 50 (give it a server
 *     of its own: tests/overload/run.sh), and take and release leases on
 *     20 keys for SECONDS (3). Pass: those refused get DLOCK_E_CONNECT
 *     saying "Too many connections"; every call returns within its bound
 *     (nothing hangs); every lock granted is released (no row left held);
 *     afterwards the server serves a new client at once and the sessions
 *     are gone. Needs an admin URL (root) that may create users and set
 *     max_connections; restores it.
 *
 *   overload pool URL [THREADS [SECONDS [MODE [HOLDER [strict|report]]]]]
 *     (URL "-": the test server, DLOCK_URL or ctest's fixture)
 *     one client with pool=2, THREADS (100) threads each with its own lock
 *     object on one key (MODE lease or row; HOLDER lock or thread), taking
 *     and releasing it for SECONDS (3). Pass: no deadlock (every thread
 *     ends), every try returns within its wait plus 1 s, no DLOCK_E_POOL,
 *     and every thread gets the lock: in arrival order (README: threads of
 *     one process queue locally in arrival order), so the most a thread
 *     gets is at most 3 times the least. With holder=thread the objects
 *     share one hold and wait for it in its claim line, in arrival order
 *     too (fair=1, the default). "report" prints the fairness instead of
 *     checking it.
 *
 * Prints one line of figures per run. Exit 0 pass, 1 fail, 77 skipped. */
#define _GNU_SOURCE
#include <dlock/dlock.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock_check.h"
#include "dlock_admin.h"
#include "dlock_test_env.h"

#define MAX_THREADS 1000
#define WAIT_MS 500

/* The clock, a start line, and how long the slowest call took. */
static atomic_int g_go;
static atomic_llong g_slowest_ms;
static int64_t g_end_ms;

static void note_call(int64_t started) {
  long long took = (long long)(now_ms() - started);
  long long prev = atomic_load(&g_slowest_ms);
  while (took > prev && !atomic_compare_exchange_weak(&g_slowest_ms, &prev, took)) {
  }
}

static void wait_for_go(void) {
  while (!atomic_load(&g_go)) sleep_ms(1);
}

/* Joins every thread, but gives up (a hang: exit 1) after deadline_ms. */
static int join_all(pthread_t *threads, int n, int64_t deadline_ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += deadline_ms / 1000;
  for (int i = 0; i < n; ++i) {
    if (pthread_timedjoin_np(threads[i], NULL, &until) != 0) {
      fprintf(stderr, "FAIL: thread %d did not end within %lld ms: a hang\n", i,
              (long long)deadline_ms);
      return -1;
    }
  }
  return 0;
}

/* ---- connections ------------------------------------------------------ */

struct conn_result {
  int open_rc;
  char open_msg[512];
  int64_t open_ms;
  int acquired, released, busy, lock_errors, release_errors;
  int first_lock_error;
  char lock_msg[512];
};

static char g_user_url[1024];
static struct conn_result g_conn[MAX_THREADS];

static void *conn_client(void *arg) {
  struct conn_result *r = arg;
  dlock_client *client = NULL;
  dlock_error err;
  wait_for_go();
  int64_t t0 = now_ms();
  r->open_rc = dlock_client_open(&client, g_user_url, NULL, &err);
  r->open_ms = now_ms() - t0;
  note_call(t0);
  if (r->open_rc != DLOCK_OK) {
    snprintf(r->open_msg, sizeof r->open_msg, "%s", err.message);
    return NULL;
  }
  for (int i = 0; now_ms() < g_end_ms; ++i) {
    char key[32];
    snprintf(key, sizeof key, "ovl:%d", (int)(((r - g_conn) + i) % 20));
    dlock_lock *lock = NULL;
    if (dlock_open(&lock, client, key, strlen(key), NULL, &err) != DLOCK_OK) {
      ++r->lock_errors;
      continue;
    }
    int64_t t = now_ms();
    int rc = dlock_try(lock, WAIT_MS, &err);
    note_call(t);
    if (rc == DLOCK_OK) {
      ++r->acquired;
      sleep_ms(2);
      t = now_ms();
      rc = dlock_release(lock, &err);
      note_call(t);
      if (rc == DLOCK_OK) ++r->released;
      else ++r->release_errors;
    } else if (rc == DLOCK_BUSY) {
      ++r->busy;
    } else {
      if (r->lock_errors++ == 0) {
        r->first_lock_error = rc;
        snprintf(r->lock_msg, sizeof r->lock_msg, "%s", err.message);
      }
      sleep_ms(20);
    }
    dlock_close(lock);
  }
  dlock_client_close(client);
  return NULL;
}

static int run_connections(const char *admin_url_text, int clients, int seconds) {
  admin_url u;
  if (admin_parse_url(admin_url_text, &u) != 0) return 2;
  MYSQL *admin = admin_connect(&u);
  if (admin == NULL) return 2;
  long long old_max = admin_scalar(admin, "SELECT @@GLOBAL.max_connections");
  char user[64];
  snprintf(user, sizeof user, "dlock_ovl_%d", (int)getpid());
  if (admin_exec(admin, "CREATE USER '%s'@'%%' IDENTIFIED BY 'ovl-pw'", user) != 0 ||
      admin_exec(admin, "SET GLOBAL max_connections = 50") != 0) {
    printf("SKIP: the admin URL's user may not create users or set max_connections\n");
    return 77;
  }
  /* The tables exist (an admin's client made them); the user has DML only. */
  {
    dlock_client *c = NULL;
    dlock_error err;
    CHECK(dlock_client_open(&c, admin_url_text, NULL, &err) == DLOCK_OK, "admin open: %s", err.message);
    dlock_client_close(c);
  }
  const char *tables[] = {"distributed_lock", "distributed_lock_fence", "fixed_lock"};
  for (int i = 0; i < 3; ++i)
    admin_exec(admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.`%s` TO '%s'@'%%'", u.database,
               tables[i], user);
  admin_url_for(&u, user, "ovl-pw", "pool=2&connect_timeout=5&read_timeout=30", g_user_url,
                sizeof g_user_url);

  pthread_t threads[MAX_THREADS];
  memset(g_conn, 0, sizeof g_conn);
  for (int i = 0; i < clients; ++i) pthread_create(&threads[i], NULL, conn_client, &g_conn[i]);
  int64_t start = now_ms();
  g_end_ms = start + seconds * 1000LL;
  atomic_store(&g_go, 1);
  /* Bound: the run, plus one try and one release each at their documented
   * bounds (2*ct + rt, max(wait, ct) + ct + rt: 40 + 40 s), plus an open. */
  if (join_all(threads, clients, seconds * 1000LL + 90000) != 0) _exit(1);
  int64_t run_ms = now_ms() - start;

  int opened = 0, refused = 0, unclear = 0, acquired = 0, released = 0, busy = 0, lock_errors = 0,
      release_errors = 0, refused_later = 0;
  int64_t slowest_refusal = 0;
  for (int i = 0; i < clients; ++i) {
    struct conn_result *r = &g_conn[i];
    if (r->open_rc == DLOCK_OK) {
      ++opened;
    } else {
      ++refused;
      if (r->open_ms > slowest_refusal) slowest_refusal = r->open_ms;
      if (r->open_rc != DLOCK_E_CONNECT || strstr(r->open_msg, "Too many connections") == NULL) {
        if (unclear++ < 3) fprintf(stderr, "unclear refusal: %s: %s\n", dlock_code_name(r->open_rc), r->open_msg);
      }
    }
    acquired += r->acquired;
    released += r->released;
    busy += r->busy;
    release_errors += r->release_errors;
    lock_errors += r->lock_errors;
    if (r->lock_errors > 0) {
      if (r->first_lock_error == DLOCK_E_CONNECT && strstr(r->lock_msg, "Too many connections") != NULL)
        ++refused_later;
      else if (unclear++ < 6)
        fprintf(stderr, "unclear lock error: %s: %s\n", dlock_code_name(r->first_lock_error), r->lock_msg);
    }
  }
  CHECK(opened > 0 && refused > 0, "some served, some refused: %d opened, %d refused", opened, refused);
  CHECK(opened <= 50, "no more clients than max_connections: %d", opened);
  CHECK(unclear == 0, "%d refusals without a clear DLOCK_E_CONNECT 'Too many connections'", unclear);
  CHECK(acquired > 0 && released == acquired && release_errors == 0,
        "every lock granted was released: %d granted, %d released, %d release errors", acquired,
        released, release_errors);
  CHECK(admin_scalar(admin,
                     "SELECT COUNT(*) FROM `distributed_lock` WHERE lock_key LIKE 'ovl:%%' AND "
                     "owner <> '' AND expire_time > UTC_TIMESTAMP(6)") == 0,
        "no lease left held on the server");

  /* Usable at once: a new client, a lock; the overload's sessions gone. */
  int64_t t = now_ms();
  dlock_client *c = NULL;
  dlock_lock *l = NULL;
  dlock_error err;
  int rc = dlock_client_open(&c, g_user_url, NULL, &err);
  CHECK(rc == DLOCK_OK, "a new client after the overload: %s", err.message);
  if (rc == DLOCK_OK) {
    CHECK(dlock_open(&l, c, "ovl:after", 9, NULL, &err) == DLOCK_OK, "open: %s", err.message);
    CHECK(dlock_try(l, 2000, &err) == DLOCK_OK, "try after the overload: %s", err.message);
    CHECK(dlock_release(l, &err) == DLOCK_OK, "release: %s", err.message);
    dlock_close(l);
    dlock_client_close(c);
  }
  int64_t after_ms = now_ms() - t;
  long long left = -1;
  for (int64_t t0 = now_ms(); now_ms() - t0 < 10000; sleep_ms(20))
    if ((left = admin_sessions_of(admin, user)) == 0) break;
  CHECK(left == 0, "the overload's sessions closed: %lld left", left);

  admin_exec(admin, "SET GLOBAL max_connections = %lld", old_max);
  admin_exec(admin, "DROP USER '%s'@'%%'", user);
  mysql_close(admin);
  printf("overload connections: %d clients, max_connections=50: %d opened, %d refused "
         "(DLOCK_E_CONNECT 'Too many connections', slowest refusal %lld ms), %d refused a second "
         "connection later; %d leases granted and released, %d busy; slowest call %lld ms; "
         "a new client's lock after it: %lld ms; run %.1f s\n",
         clients, opened, refused, (long long)slowest_refusal, refused_later, acquired, busy,
         (long long)atomic_load(&g_slowest_ms), (long long)after_ms, run_ms / 1000.0);
  printf("overload connections: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}

/* ---- pool ------------------------------------------------------------- */

struct pool_result {
  int acquired, busy, pool_errors, other_errors, late;
  int first_error;
  char msg[600];
  int64_t longest_try_ms;
};

static dlock_client *g_client;
static const char *g_mode, *g_holder;
static char g_key[64];
static struct pool_result g_pool[MAX_THREADS];

static void *pool_thread(void *arg) {
  struct pool_result *r = arg;
  dlock_config *cfg = NULL;
  dlock_lock *lock = NULL;
  dlock_error err;
  if (dlock_config_new(&cfg, &err) != DLOCK_OK ||
      dlock_config_set(cfg, "mode", g_mode, &err) != DLOCK_OK ||
      dlock_config_set(cfg, "holder", g_holder, &err) != DLOCK_OK ||
      dlock_open(&lock, g_client, g_key, strlen(g_key), cfg, &err) != DLOCK_OK) {
    r->other_errors++;
    r->first_error = err.code;
    snprintf(r->msg, sizeof r->msg, "%s", err.message);
    dlock_config_free(cfg);
    return NULL;
  }
  dlock_config_free(cfg);
  wait_for_go();
  while (now_ms() < g_end_ms) {
    const int64_t wait = 2000;
    int64_t t = now_ms();
    int rc = dlock_try(lock, wait, &err);
    int64_t took = now_ms() - t;
    note_call(t);
    if (took > r->longest_try_ms) r->longest_try_ms = took;
    if (took > wait + 1000) ++r->late;
    if (rc == DLOCK_OK) {
      ++r->acquired;
      if (dlock_release(lock, &err) != DLOCK_OK) {
        if (r->other_errors++ == 0) {
          r->first_error = err.code;
          snprintf(r->msg, sizeof r->msg, "release: %s", err.message);
        }
      }
    } else if (rc == DLOCK_BUSY) {
      ++r->busy;
    } else if (rc == DLOCK_E_POOL) {
      ++r->pool_errors;
    } else if (r->other_errors++ == 0) {
      r->first_error = rc;
      snprintf(r->msg, sizeof r->msg, "%s", err.message);
    }
  }
  dlock_close(lock);
  return NULL;
}

static int run_pool(const char *url, int threads_n, int seconds, const char *mode,
                    const char *holder, int strict) {
  char purl[1200];
  snprintf(purl, sizeof purl, "%s%spool=2", url, strchr(url, '?') ? "&" : "?");
  dlock_error err;
  if (dlock_client_open(&g_client, purl, NULL, &err) != DLOCK_OK) {
    fprintf(stderr, "open: %s\n", err.message);
    return 1;
  }
  g_mode = mode;
  g_holder = holder;
  snprintf(g_key, sizeof g_key, "ovl-pool:%s:%d", mode, (int)getpid());
  pthread_t threads[MAX_THREADS];
  memset(g_pool, 0, sizeof g_pool);
  for (int i = 0; i < threads_n; ++i) pthread_create(&threads[i], NULL, pool_thread, &g_pool[i]);
  int64_t start = now_ms();
  g_end_ms = start + seconds * 1000LL;
  atomic_store(&g_go, 1);
  if (join_all(threads, threads_n, seconds * 1000LL + 60000) != 0) _exit(1);
  int64_t run_ms = now_ms() - start;

  int total = 0, least = 1 << 30, most = 0, busy = 0, pool_errors = 0, other = 0, late = 0;
  int64_t longest = 0;
  for (int i = 0; i < threads_n; ++i) {
    struct pool_result *r = &g_pool[i];
    total += r->acquired;
    if (r->acquired < least) least = r->acquired;
    if (r->acquired > most) most = r->acquired;
    busy += r->busy;
    pool_errors += r->pool_errors;
    late += r->late;
    if (r->longest_try_ms > longest) longest = r->longest_try_ms;
    if (r->other_errors > 0 && other++ < 3)
      fprintf(stderr, "thread %d: %s: %s\n", i, dlock_code_name(r->first_error), r->msg);
  }
  uint64_t pool_open = 0;
  (void)dlock_client_counter(g_client, "pool_open", &pool_open, &err);
  dlock_client_close(g_client);
  CHECK(other == 0, "%d threads had errors", other);
  CHECK(pool_errors == 0, "%d tries ran out of pool connections (DLOCK_E_POOL)", pool_errors);
  CHECK(late == 0, "%d tries took longer than their wait + 1 s (longest %lld ms)", late, (long long)longest);
  if (strict) {
    CHECK(least >= 1, "every thread got the lock: the least got %d", least);
    CHECK(most <= 3 * (least > 0 ? least : 1), "arrival order: most %d, least %d (at most 3:1)", most,
          least);
  } else if (least < 1 || most > 3 * least) {
    printf("NOTE: not in arrival order: most %d, least %d (reported, not checked)\n", most, least);
  }
  CHECK(pool_open <= 2, "pool bound: %llu connections", (unsigned long long)pool_open);
  printf("overload pool (%s, holder=%s): 1 client, pool=2, %d threads on one key, %.1f s: %d acquisitions "
         "(%.0f/s), per thread least %d / most %d, %d busy (2 s wait ran out), %d pool errors, "
         "longest try %lld ms, slowest call %lld ms\n",
         mode, holder, threads_n, run_ms / 1000.0, total, total * 1000.0 / run_ms, least, most, busy,
         pool_errors, (long long)longest, (long long)atomic_load(&g_slowest_ms));
  printf("overload pool: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: overload connections ADMIN_URL [CLIENTS [SECONDS]]\n"
                    "       overload pool URL [THREADS [SECONDS [lease|row]]]\n");
    return 2;
  }
  int n = argc > 3 ? atoi(argv[3]) : 0;
  int seconds = argc > 4 ? atoi(argv[4]) : 3;
  if (strcmp(argv[1], "connections") == 0)
    return run_connections(argv[2], n > 0 && n <= MAX_THREADS ? n : 200, seconds);
  if (strcmp(argv[1], "pool") == 0)
    return run_pool(strcmp(argv[2], "-") == 0 ? dlock_test_url() : argv[2], n > 0 && n <= MAX_THREADS ? n : 100, seconds,
                    argc > 5 ? argv[5] : "lease", argc > 6 ? argv[6] : "lock",
                    !(argc > 7 && strcmp(argv[7], "report") == 0));
  fprintf(stderr, "unknown run '%s'\n", argv[1]);
  return 2;
}
