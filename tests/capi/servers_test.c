/* The C API over two servers (fixtures db and db2): dlock_client_server_count
 * and dlock_client_server_of, each key's lock taken on the server they name
 * (seen from a one-server client of each), exclusion across clients listing
 * the servers in either order, bad input. C99. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock/dlock.h"
#include "dlock_check.h"
#include "dlock_test_env.h"

static dlock_client *open_url(const char *url) {
  dlock_error err;
  dlock_client *c = NULL;
  int rc = dlock_client_open(&c, url, NULL, &err);
  CHECK(rc == DLOCK_OK, "open: %s", err.message);
  if (rc != DLOCK_OK) exit(1);
  return c;
}

/* 1 when key is busy for a one-server client c (someone holds it there). */
static int busy_on(dlock_client *c, const char *k) {
  dlock_error err;
  dlock_lock *l = NULL;
  if (dlock_open(&l, c, k, strlen(k), NULL, &err) != DLOCK_OK) return -1;
  int rc = dlock_try(l, 0, &err);
  if (rc == DLOCK_OK) dlock_release(l, &err);
  dlock_close(l);
  return rc == DLOCK_BUSY;
}

int main(void) {
  const char *u1 = dlock_test_url(), *u2 = dlock_test_url2();
  if (u2 == NULL) {
    printf("SKIP: no second server (fixture db2 or DLOCK_URL2)\n");
    return 77;
  }
  static char both[2100], reverse[2100];
  snprintf(both, sizeof both, "%s;%s", u1, u2);
  snprintf(reverse, sizeof reverse, "%s;%s", u2, u1);
  dlock_client *a = open_url(both), *b = open_url(reverse);
  dlock_client *s[2] = {open_url(u1), open_url(u2)};
  CHECK(dlock_client_server_count(a) == 2, "count");
  CHECK(dlock_client_server_count(s[0]) == 1, "count of one");
  CHECK(dlock_client_server_count(NULL) == 0, "count of NULL");

  dlock_error err;
  char id[256], idb[256], k[64];
  int seen[2] = {0, 0};
  for (int i = 0; i < 40; ++i) {
    snprintf(k, sizeof k, "capi-servers:%d:%d", (int)now_ms() % 100000, i);
    size_t at = 9, atb = 9;
    CHECK(dlock_client_server_of(a, k, strlen(k), &at, id, sizeof id, &err) == DLOCK_OK, "%s",
          err.message);
    CHECK(dlock_client_server_of(b, k, strlen(k), &atb, idb, sizeof idb, &err) == DLOCK_OK, "%s",
          err.message);
    CHECK(at < 2 && atb == 1 - at, "a says %zu, b says %zu", at, atb);
    CHECK(strcmp(id, idb) == 0, "ids %s / %s", id, idb);
    seen[at]++;
    dlock_lock *l = NULL, *m = NULL;
    CHECK(dlock_open(&l, a, k, strlen(k), NULL, &err) == DLOCK_OK, "%s", err.message);
    CHECK(dlock_open(&m, b, k, strlen(k), NULL, &err) == DLOCK_OK, "%s", err.message);
    CHECK(dlock_try(l, 0, &err) == DLOCK_OK, "%s", err.message);
    CHECK(dlock_try(m, 0, &err) == DLOCK_BUSY, "other order not excluded: %s", err.message);
    /* Held on the server server_of names, not on the other. */
    CHECK(busy_on(s[at], k) == 1, "not held on server %zu", at);
    CHECK(busy_on(s[1 - at], k) == 0, "held on the other server too");
    CHECK(dlock_release(l, &err) == DLOCK_OK, "%s", err.message);
    dlock_close(l);
    dlock_close(m);
  }
  CHECK(seen[0] > 5 && seen[1] > 5, "40 keys: %d / %d", seen[0], seen[1]);

  /* Identity cut to the buffer; NULL buffer fine; bad input refused. */
  size_t at = 0;
  char small[5];
  CHECK(dlock_client_server_of(a, "x", 1, &at, small, sizeof small, &err) == DLOCK_OK, "cut");
  CHECK(strlen(small) == 4, "cut to %zu", strlen(small));
  CHECK(dlock_client_server_of(a, "x", 1, &at, NULL, 0, &err) == DLOCK_OK, "NULL buffer");
  CHECK(dlock_client_server_of(a, "", 0, &at, NULL, 0, &err) == DLOCK_E_INVALID, "empty key");
  CHECK(dlock_client_server_of(a, "x", 1, NULL, NULL, 0, &err) == DLOCK_E_INVALID, "NULL out");
  CHECK(dlock_client_server_of(NULL, "x", 1, &at, NULL, 0, &err) == DLOCK_E_INVALID, "NULL client");
  CHECK(dlock_client_server_of(s[1], "x", 1, &at, id, sizeof id, &err) == DLOCK_OK && at == 0,
        "one server: index 0");
  CHECK(strstr(id, "?table=distributed_lock&row_table=fixed_lock") != NULL, "id %s", id);

  dlock_client_close(a);
  dlock_client_close(b);
  dlock_client_close(s[0]);
  dlock_client_close(s[1]);
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
