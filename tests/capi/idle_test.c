/* Idle lock connections close (pool_idle_ms), seen from the server: a burst
 * of row locks opens several connections; once they are back in the pool
 * and unused for pool_idle_ms, the server's processlist shows none of them
 * (all close: none is kept), the watchdog's own connection closes the same
 * way once no lease is left, and the next lock simply connects again.
 * pool_idle_ms=0 keeps them open. The client connects as a user of its own,
 * so that its sessions can be counted beside other tests' sessions. */
#define _POSIX_C_SOURCE 200809L
#include <dlock/dlock.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock_check.h"
#include "dlock_admin.h"
#include "dlock_test_env.h"

static admin_url g_url;
static MYSQL *g_admin;
static char g_user[64];

static dlock_client *open_client(const char *options) {
  char url[1024];
  dlock_error err;
  dlock_client *c = NULL;
  admin_url_for(&g_url, g_user, "idle-pw", options, url, sizeof url);
  CHECK(dlock_client_open(&c, url, NULL, &err) == DLOCK_OK, "open (%s): %s", options, err.message);
  return c;
}

static dlock_lock *open_lock(dlock_client *c, const char *key, const char *mode, int auto_renew) {
  dlock_config *cfg = NULL;
  dlock_error err;
  dlock_lock *l = NULL;
  CHECK(dlock_config_new(&cfg, &err) == DLOCK_OK, "config");
  CHECK(dlock_config_set(cfg, "mode", mode, &err) == DLOCK_OK, "%s", err.message);
  if (auto_renew) {
    CHECK(dlock_config_set(cfg, "auto_renew", "1", &err) == DLOCK_OK, "%s", err.message);
    CHECK(dlock_config_set(cfg, "ttl_ms", "3000", &err) == DLOCK_OK, "%s", err.message);
  }
  CHECK(dlock_open(&l, c, key, strlen(key), cfg, &err) == DLOCK_OK, "open %s: %s", key, err.message);
  dlock_config_free(cfg);
  return l;
}

/* Polls the processlist until the user has want sessions; returns the ms it
 * took, or -1 (and the last count in *last) when deadline_ms passed. */
static int64_t wait_sessions(long long want, int64_t deadline_ms, long long *last) {
  int64_t start = now_ms();
  for (;;) {
    *last = admin_sessions_of(g_admin, g_user);
    if (*last == want) return now_ms() - start;
    if (now_ms() - start > deadline_ms) return -1;
    sleep_ms(20);
  }
}

/* Holds n row locks at once (n connections), then releases them all. */
static void burst(dlock_client *c, int n, const char *tag) {
  dlock_lock *locks[8];
  dlock_error err;
  for (int i = 0; i < n; ++i) {
    char key[64];
    snprintf(key, sizeof key, "idle:%s:%d:%d", tag, (int)getpid(), i);
    locks[i] = open_lock(c, key, "row", 0);
    CHECK(dlock_try(locks[i], 1000, &err) == DLOCK_OK, "row lock %d: %s", i, err.message);
  }
  long long seen = admin_sessions_of(g_admin, g_user);
  CHECK(seen == n, "%d row locks held: %lld sessions", n, seen);
  for (int i = 0; i < n; ++i) {
    CHECK(dlock_release(locks[i], &err) == DLOCK_OK, "release %d: %s", i, err.message);
    dlock_close(locks[i]);
  }
}

int main(void) {
  const char *url = dlock_test_url();
  if (admin_parse_url(url, &g_url) != 0) return 2;
  g_admin = admin_connect(&g_url);
  if (g_admin == NULL) return 2;
  snprintf(g_user, sizeof g_user, "dlock_idle_%d", (int)getpid());
  if (admin_exec(g_admin, "CREATE USER '%s'@'%%' IDENTIFIED BY 'idle-pw'", g_user) != 0) {
    printf("SKIP: the test server's user may not create users\n");
    return 77;
  }
  CHECK(admin_exec(g_admin, "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `%s`.* TO '%s'@'%%'",
                   g_url.database, g_user) == 0,
        "grant");
  dlock_error err;
  long long last = 0;

  /* 1. pool_idle_ms=1500: 4 connections after the burst, none 1.5 s later. */
  dlock_client *c = open_client("pool=4&pool_idle_ms=1500");
  if (c == NULL) return 1;
  burst(c, 4, "a");
  int64_t released = now_ms();
  long long right_after = admin_sessions_of(g_admin, g_user);
  if (now_ms() - released < 1000)
    CHECK(right_after == 4, "still 4 sessions right after the release: %lld", right_after);
  int64_t took = wait_sessions(0, 10000, &last);
  int64_t idle_for = now_ms() - released;
  CHECK(took >= 0, "every idle connection closed: %lld sessions left", last);
  CHECK(idle_for >= 1400, "not before pool_idle_ms: closed after %lld ms", (long long)idle_for);
  printf("  4 idle connections closed %lld ms after their last use (pool_idle_ms=1500)\n",
         (long long)idle_for);
  uint64_t open = 99;
  CHECK(dlock_client_counter(c, "pool_open", &open, &err) == DLOCK_OK && open == 0,
        "pool_open counter %llu", (unsigned long long)open);

  /* 2. The next lock connects again: a lease and a row lock. */
  dlock_lock *lease = open_lock(c, "idle:next", "lease", 0);
  CHECK(dlock_try(lease, 1000, &err) == DLOCK_OK, "lease after the pool emptied: %s", err.message);
  CHECK(dlock_release(lease, &err) == DLOCK_OK, "release: %s", err.message);
  dlock_close(lease);
  burst(c, 2, "b");
  CHECK(wait_sessions(0, 10000, &last) >= 0, "closed again: %lld left", last);

  /* 3. The watchdog's connection closes once no lease is left to renew. */
  dlock_lock *renewed = open_lock(c, "idle:renewed", "lease", 1);
  CHECK(dlock_try(renewed, 1000, &err) == DLOCK_OK, "auto-renewed lease: %s", err.message);
  uint64_t renewals = 0;
  open = 99;
  for (int64_t t0 = now_ms(); (renewals == 0 || open != 0) && now_ms() - t0 < 10000; sleep_ms(50)) {
    (void)dlock_client_counter(c, "renewals", &renewals, &err);
    (void)dlock_client_counter(c, "pool_open", &open, &err);
  }
  CHECK(renewals > 0 && open == 0, "the watchdog renewed (%llu), the pool closed its idle one (%llu)",
        (unsigned long long)renewals, (unsigned long long)open);
  last = admin_sessions_of(g_admin, g_user);
  CHECK(last == 1, "while held: the watchdog's connection only, %lld sessions", last);
  CHECK(dlock_state(renewed) == DLOCK_STATE_HELD, "held");
  CHECK(dlock_release(renewed, &err) == DLOCK_OK, "release: %s", err.message);
  dlock_close(renewed);
  CHECK(wait_sessions(0, 10000, &last) >= 0, "the watchdog's connection closed too: %lld", last);

  /* 4. A connection lent across the closer's wake-ups (a row lock held 2.5 s,
   * longer than pool_idle_ms, right after it came back once) is still closed
   * pool_idle_ms after its release: the closer was not parked then, and a
   * Put wakes only a parked one. */
  dlock_lock *row = open_lock(c, "idle:row", "row", 0);
  CHECK(dlock_try(row, 1000, &err) == DLOCK_OK, "row lock: %s", err.message);
  CHECK(dlock_release(row, &err) == DLOCK_OK, "release: %s", err.message);
  CHECK(dlock_try(row, 1000, &err) == DLOCK_OK, "row lock again: %s", err.message);
  sleep_ms(2500); /* the hold itself, not a synchronisation */
  CHECK(dlock_release(row, &err) == DLOCK_OK, "release: %s", err.message);
  released = now_ms();
  dlock_close(row);
  took = wait_sessions(0, 10000, &last);
  idle_for = now_ms() - released;
  CHECK(took >= 0, "the row lock's connection closed after its long hold: %lld left", last);
  CHECK(idle_for >= 1400 && idle_for < 2900, "pool_idle_ms after its release: closed after %lld ms",
        (long long)idle_for);
  printf("  a connection lent 2.5 s closed %lld ms after it came back (pool_idle_ms=1500)\n",
         (long long)idle_for);
  dlock_client_close(c);

  /* 5. pool_idle_ms=0 keeps them. */
  c = open_client("pool=4&pool_idle_ms=0");
  if (c == NULL) return 1;
  burst(c, 3, "c");
  sleep_ms(1500); /* a time that would have closed them with the setting above */
  last = admin_sessions_of(g_admin, g_user);
  CHECK(last == 3, "pool_idle_ms=0: the 3 connections stay open: %lld", last);
  dlock_client_close(c);
  CHECK(wait_sessions(0, 10000, &last) >= 0, "closing the client closes them: %lld", last);

  admin_exec(g_admin, "DROP USER '%s'@'%%'", g_user);
  mysql_close(g_admin);
  printf("idle test: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
