/* Least privilege: a database user with only SELECT, INSERT, UPDATE and
 * DELETE on the lock tables (no CREATE) takes, renews, releases and cleans
 * up locks once an admin ran `dlock init`; a missing privilege at open is an
 * error that names the privilege and the table.
 *   privilege_test [DLOCK_COMMAND]   with the `dlock` command, the admin runs
 *                                    `dlock init`; without, opens a client
 * Needs an admin (the fixture's root) that may create users; skips (77)
 * otherwise. Its user and tables are its own (by pid) and dropped at the end. */
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
static char g_user[64], g_lease[64], g_fence[80], g_rows[64], g_tables[160];

static void grant(const char *privs, const char *table) {
  CHECK(admin_exec(g_admin, "GRANT %s ON `%s`.`%s` TO '%s'@'%%'", privs, g_url.database, table,
                   g_user) == 0,
        "grant %s on %s", privs, table);
}

static void revoke(const char *privs, const char *table) {
  CHECK(admin_exec(g_admin, "REVOKE %s ON `%s`.`%s` FROM '%s'@'%%'", privs, g_url.database, table,
                   g_user) == 0,
        "revoke %s on %s", privs, table);
}

/* The restricted user's client (extra: more URL options). */
static int open_as_user(dlock_client **out, const char *extra, dlock_error *err) {
  char url[1024], query[512];
  snprintf(query, sizeof query, "%s%s%s", g_tables, extra[0] ? "&" : "", extra);
  admin_url_for(&g_url, g_user, "lp-Pw-0", query, url, sizeof url);
  return dlock_client_open(out, url, NULL, err);
}

/* Open fails with DLOCK_E_DB naming the privilege and the table. */
static void expect_refused(const char *privilege, const char *table) {
  dlock_client *c = NULL;
  dlock_error err;
  int rc = open_as_user(&c, "", &err);
  char quoted[96];
  snprintf(quoted, sizeof quoted, "`%s`", table);
  CHECK(rc == DLOCK_E_DB && c == NULL, "open without %s on %s: %s %s", privilege, table,
        dlock_code_name(rc), err.message);
  CHECK(strstr(err.message, privilege) != NULL && strstr(err.message, quoted) != NULL &&
            strstr(err.message, "GRANT") != NULL,
        "the message names %s and %s and shows the GRANT: %s", privilege, quoted, err.message);
  CHECK(strstr(err.message, "lp-Pw-0") == NULL, "no password in: %s", err.message);
  printf("  refused as it should be: %s\n", err.message);
  dlock_client_close(c);
}

static dlock_lock *open_lock(dlock_client *c, const char *key, const char *k1, const char *v1,
                             const char *k2, const char *v2) {
  dlock_config *cfg = NULL;
  dlock_error err;
  dlock_lock *l = NULL;
  CHECK(dlock_config_new(&cfg, &err) == DLOCK_OK, "config");
  if (k1 != NULL) CHECK(dlock_config_set(cfg, k1, v1, &err) == DLOCK_OK, "%s", err.message);
  if (k2 != NULL) CHECK(dlock_config_set(cfg, k2, v2, &err) == DLOCK_OK, "%s", err.message);
  CHECK(dlock_open(&l, c, key, strlen(key), cfg, &err) == DLOCK_OK, "open %s: %s", key, err.message);
  dlock_config_free(cfg);
  return l;
}

/* Takes, renews (by hand and by the watchdog), releases and cleans up. */
static void use_locks(void) {
  dlock_client *c = NULL, *c2 = NULL;
  dlock_error err;
  int rc = open_as_user(&c, "", &err);
  CHECK(rc == DLOCK_OK, "open as the restricted user: %s", err.message);
  rc = open_as_user(&c2, "", &err);
  CHECK(rc == DLOCK_OK, "second client: %s", err.message);
  if (c == NULL || c2 == NULL) return;
  CHECK(dlock_client_init_schema(c, &err) == DLOCK_OK, "init_schema on existing tables: %s",
        err.message);

  /* lease: take, renew, another waits on it (wake-up name), release */
  dlock_lock *a = open_lock(c, "lp:job", "ttl_ms", "2000", NULL, NULL);
  dlock_lock *b = open_lock(c2, "lp:job", NULL, NULL, NULL, NULL);
  CHECK(dlock_try(a, 0, &err) == DLOCK_OK, "lease try: %s", err.message);
  uint64_t t1 = dlock_token(a);
  CHECK(dlock_renew(a, &err) == DLOCK_OK, "renew: %s", err.message);
  CHECK(dlock_try(b, 0, &err) == DLOCK_BUSY, "busy while held: %s", err.message);
  CHECK(dlock_release(a, &err) == DLOCK_OK, "release: %s", err.message);
  CHECK(dlock_try(b, 2000, &err) == DLOCK_OK && dlock_token(b) > t1, "the next holder: %s",
        err.message);
  CHECK(dlock_release(b, &err) == DLOCK_OK, "release 2: %s", err.message);
  dlock_close(b);

  /* the watchdog renews a lease past its ttl */
  dlock_lock *w = open_lock(c, "lp:watched", "ttl_ms", "600", "auto_renew", "1");
  CHECK(dlock_try(w, 0, &err) == DLOCK_OK, "auto-renewed try: %s", err.message);
  sleep_ms(1500);
  CHECK(dlock_state(w) == DLOCK_STATE_HELD, "held past 2.5 ttls: state %d", dlock_state(w));
  uint64_t renewals = 0;
  CHECK(dlock_client_counter(c, "renewals", &renewals, &err) == DLOCK_OK && renewals >= 2,
        "renewals %llu", (unsigned long long)renewals);
  CHECK(dlock_release(w, &err) == DLOCK_OK, "release: %s", err.message);
  dlock_close(w);

  /* row lock */
  dlock_lock *r = open_lock(c, "lp:row", "mode", "row", NULL, NULL);
  CHECK(dlock_try(r, 1000, &err) == DLOCK_OK, "row try: %s", err.message);
  CHECK(dlock_release(r, &err) == DLOCK_OK, "row release: %s", err.message);
  dlock_close(r);

  /* cleanup: a lease left to expire is deleted, the fencing floor kept */
  dlock_lock *x = open_lock(c, "lp:expired", "ttl_ms", "50", NULL, NULL);
  CHECK(dlock_try(x, 0, &err) == DLOCK_OK, "try: %s", err.message);
  uint64_t tx = dlock_token(x);
  dlock_close(x); /* released: the row stays, freed */
  dlock_client *janitor = NULL;
  rc = open_as_user(&janitor, "cleanup_grace_ms=0", &err);
  CHECK(rc == DLOCK_OK, "janitor: %s", err.message);
  uint64_t deleted = 0;
  if (janitor != NULL) {
    CHECK(dlock_client_cleanup(janitor, &deleted, &err) == DLOCK_OK, "cleanup: %s", err.message);
    CHECK(deleted >= 1, "cleanup deleted %llu rows", (unsigned long long)deleted);
  }
  dlock_client_close(janitor);
  CHECK(admin_scalar(g_admin, "SELECT COUNT(*) FROM `%s` WHERE lock_key = 'lp:expired'", g_lease) == 0,
        "the expired row is gone");
  x = open_lock(c, "lp:expired", NULL, NULL, NULL, NULL);
  CHECK(dlock_try(x, 0, &err) == DLOCK_OK && dlock_token(x) > tx,
        "a re-created key continues above the floor: %llu > %llu",
        (unsigned long long)dlock_token(x), (unsigned long long)tx);
  CHECK(dlock_release(x, &err) == DLOCK_OK, "release: %s", err.message);
  dlock_close(x);
  dlock_close(a);
  dlock_client_close(c2);
  dlock_client_close(c);
  CHECK(admin_scalar(g_admin,
                     "SELECT COUNT(*) FROM `%s` WHERE owner <> '' AND expire_time > UTC_TIMESTAMP(6)",
                     g_lease) == 0,
        "no lease left held");
}

int main(int argc, char **argv) {
  const char *url = dlock_test_url();
  if (admin_parse_url(url, &g_url) != 0) {
    fprintf(stderr, "cannot read the test URL\n");
    return 2;
  }
  g_admin = admin_connect(&g_url);
  if (g_admin == NULL) return 2;
  int pid = (int)getpid();
  snprintf(g_user, sizeof g_user, "dlock_lp_%d", pid);
  snprintf(g_lease, sizeof g_lease, "lp_%d_lease", pid);
  snprintf(g_fence, sizeof g_fence, "%s_fence", g_lease);
  snprintf(g_rows, sizeof g_rows, "lp_%d_rows", pid);
  snprintf(g_tables, sizeof g_tables, "table=%s&row_table=%s", g_lease, g_rows);
  if (admin_exec(g_admin, "CREATE USER '%s'@'%%' IDENTIFIED BY 'lp-Pw-0'", g_user) != 0) {
    printf("SKIP: the test server's user may not create users\n");
    return 77;
  }

  /* 1. No tables yet; an application's user (DML on the database, no
   * CREATE): the error says who must create them. */
  CHECK(admin_exec(g_admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.* TO '%s'@'%%'",
                   g_url.database, g_user) == 0,
        "grant on the database");
  expect_refused("CREATE", g_lease);
  CHECK(admin_exec(g_admin, "REVOKE SELECT, INSERT, UPDATE, DELETE ON `%s`.* FROM '%s'@'%%'",
                   g_url.database, g_user) == 0,
        "revoke on the database");

  /* 2. The admin creates them. */
  char admin_url_buf[1024];
  admin_url_for(&g_url, g_url.user, g_url.password, g_tables, admin_url_buf, sizeof admin_url_buf);
  if (argc > 1) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' init --url '%s' >/dev/null", argv[1], admin_url_buf);
    CHECK(system(cmd) == 0, "dlock init");
  } else {
    dlock_client *c = NULL;
    dlock_error err;
    CHECK(dlock_client_open(&c, admin_url_buf, NULL, &err) == DLOCK_OK, "admin open: %s", err.message);
    dlock_client_close(c);
  }
  CHECK(admin_scalar(g_admin, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
                              "DATABASE() AND TABLE_NAME IN ('%s', '%s', '%s')",
                     g_lease, g_fence, g_rows) == 3,
        "the admin created the three tables");

  /* 3. Only some privileges: each missing one is named, with its table. */
  grant("SELECT, INSERT, UPDATE", g_lease);
  expect_refused("DELETE", g_lease);
  grant("DELETE", g_lease);
  grant("SELECT, UPDATE", g_fence);
  expect_refused("INSERT", g_fence);
  grant("INSERT, DELETE", g_fence);
  grant("INSERT", g_rows);
  expect_refused("SELECT", g_rows);
  grant("SELECT, UPDATE, DELETE", g_rows);

  /* 4. The README's GRANT: everything works, without CREATE. */
  CHECK(admin_scalar(g_admin,
                     "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = "
                     "\"'%s'@'%%'\" AND PRIVILEGE_TYPE <> 'USAGE'",
                     g_user) == 0,
        "no global privileges");
  CHECK(admin_scalar(g_admin,
                     "SELECT COUNT(*) FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE = "
                     "\"'%s'@'%%'\" AND PRIVILEGE_TYPE NOT IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')",
                     g_user) == 0,
        "table privileges are SELECT/INSERT/UPDATE/DELETE only");
  use_locks();

  /* 5. No privilege at all on a table: it looks missing; the message says both. */
  revoke("ALL PRIVILEGES", g_rows);
  expect_refused("CREATE", g_rows);

  admin_exec(g_admin, "DROP USER '%s'@'%%'", g_user);
  admin_exec(g_admin, "DROP TABLE IF EXISTS `%s`, `%s`, `%s`", g_lease, g_fence, g_rows);
  mysql_close(g_admin);
  printf("privilege test: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
