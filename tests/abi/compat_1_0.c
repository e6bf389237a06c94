/* A program built against dlock.h as released in 1.0.0 (tests/abi/v1_0,
 * taken from git history) keeps running against today's libdlock.so.1:
 * every 1.0 entry point, its structs (dlock_error, dlock_event) and codes,
 * as a 1.0 user would call them. Compiled with the 1.0 header only. */
#define _POSIX_C_SOURCE 200809L
#include "dlock/dlock.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock_check.h"
#include "dlock_test_env.h"

#if DLOCK_VERSION_MAJOR != 1 || DLOCK_VERSION_MINOR != 0
#error "compat_1_0.c must be built against the 1.0 header (tests/abi/v1_0)"
#endif

static dlock_config *config(const char *k1, const char *v1, const char *k2, const char *v2) {
  dlock_config *cfg = NULL;
  dlock_error err;
  CHECK(dlock_config_new(&cfg, &err) == DLOCK_OK, "config_new: %s", err.message);
  if (k1 != NULL) CHECK(dlock_config_set(cfg, k1, v1, &err) == DLOCK_OK, "%s: %s", k1, err.message);
  if (k2 != NULL) CHECK(dlock_config_set(cfg, k2, v2, &err) == DLOCK_OK, "%s: %s", k2, err.message);
  return cfg;
}

int main(void) {
  const char *url = dlock_test_url();
  dlock_error err;
  char key[64], row_key[64];
  snprintf(key, sizeof key, "abi10:%d", (int)getpid());
  snprintf(row_key, sizeof row_key, "abi10-row:%d", (int)getpid());

  /* library */
  CHECK(strncmp(dlock_version(), "1.", 2) == 0, "version %s", dlock_version());
  CHECK(strcmp(dlock_code_name(DLOCK_E_LOST), "DLOCK_E_LOST") == 0, "%s", dlock_code_name(-3));
  CHECK(strcmp(dlock_code_name(DLOCK_E_MAX_HOLD), "DLOCK_E_MAX_HOLD") == 0, "max hold name");

  /* config: a bad key fills the 1.0 error struct */
  dlock_config *bad = NULL;
  CHECK(dlock_config_new(&bad, &err) == DLOCK_OK, "config_new");
  memset(&err, 0x7f, sizeof err);
  CHECK(dlock_config_set(bad, "no_such_option", "1", &err) == DLOCK_E_INVALID, "unknown key");
  CHECK(err.code == DLOCK_E_INVALID && memchr(err.message, '\0', sizeof err.message) != NULL &&
            strstr(err.message, "no_such_option") != NULL,
        "error struct: code %d message %.80s", err.code, err.message);
  dlock_config_free(bad);
  dlock_config_free(NULL);

  dlock_client *client = NULL, *other = NULL;
  dlock_config *ccfg = config("pool", "4", NULL, NULL);
  int rc = dlock_client_open(&client, url, ccfg, &err);
  CHECK(rc == DLOCK_OK, "client_open: %s", err.message);
  rc = dlock_client_open(&other, url, NULL, &err);
  CHECK(rc == DLOCK_OK, "second client_open: %s", err.message);
  dlock_config_free(ccfg);
  if (client == NULL || other == NULL) {
    fprintf(stderr, "%d passed, %d failed\n", g_passed, g_failed);
    return 1;
  }

  /* a lease: try, accessors, reentry, renew, release */
  dlock_lock *lease = NULL;
  dlock_config *lcfg = config("ttl_ms", "600", NULL, NULL);
  CHECK(dlock_open(&lease, client, key, strlen(key), lcfg, &err) == DLOCK_OK, "open: %s", err.message);
  CHECK(dlock_try(lease, 0, &err) == DLOCK_OK, "try: %s", err.message);
  CHECK(dlock_held(lease) == 1 && dlock_state(lease) == DLOCK_STATE_HELD, "held");
  CHECK(dlock_token(lease) > 0, "token");
  CHECK(strchr(dlock_owner(lease), ':') != NULL, "owner %s", dlock_owner(lease));
  size_t klen = 0;
  CHECK(memcmp(dlock_key(lease, &klen), key, strlen(key)) == 0 && klen == strlen(key), "key");
  int64_t left = dlock_remaining_ms(lease);
  CHECK(left > 0 && left <= 600, "remaining %lld", (long long)left);
  CHECK(dlock_try(lease, 0, &err) == DLOCK_OK && dlock_hold_count(lease) == 2, "reentry");
  CHECK(dlock_release(lease, &err) == DLOCK_OK && dlock_hold_count(lease) == 1, "count down");
  CHECK(dlock_renew(lease, &err) == DLOCK_OK, "renew: %s", err.message);
  uint64_t token = dlock_token(lease);

  /* another client waits it out: the lease expires (no renewal), the
   * holder's release then finds it taken (DLOCK_E_LOST + an event) */
  dlock_lock *taker = NULL;
  CHECK(dlock_open(&taker, other, key, strlen(key), NULL, &err) == DLOCK_OK, "open 2");
  CHECK(dlock_try(taker, 0, &err) == DLOCK_BUSY, "busy while held: %d", err.code);
  CHECK(dlock_try(taker, 5000, &err) == DLOCK_OK, "taken after expiry: %s", err.message);
  CHECK(dlock_token(taker) > token, "token grows: %llu > %llu",
        (unsigned long long)dlock_token(taker), (unsigned long long)token);
  CHECK(dlock_release(lease, &err) == DLOCK_E_LOST, "release of a taken lease: %d", err.code);
  CHECK(dlock_state(lease) == DLOCK_STATE_LOST, "state LOST");
  dlock_event ev;
  memset(&ev, 0x7f, sizeof ev);
  rc = dlock_client_next_event(client, &ev, 2000, &err);
  CHECK(rc == DLOCK_OK, "an event: %d %s", rc, err.message);
  CHECK(ev.type == DLOCK_EVENT_RELEASE_GONE || ev.type == DLOCK_EVENT_LOST, "event type %d", ev.type);
  CHECK(ev.key_len == strlen(key) && memcmp(ev.key, key, ev.key_len) == 0 && ev.key[ev.key_len] == '\0',
        "event key");
  CHECK(memchr(ev.message, '\0', sizeof ev.message) != NULL && ev.message[0] != '\0', "event message");
  CHECK(dlock_release(taker, &err) == DLOCK_OK, "release 2: %s", err.message);
  dlock_close(taker);

  /* wait_lost and cancel on an idle lock */
  CHECK(dlock_wait_lost(lease, 10, &err) == DLOCK_OK || err.code == DLOCK_E_LOST, "wait_lost");
  CHECK(dlock_cancel(lease) == DLOCK_OK, "cancel");
  dlock_close(lease);
  dlock_config_free(lcfg);

  /* a lease's transaction */
  CHECK(dlock_open(&lease, client, key, strlen(key), NULL, &err) == DLOCK_OK, "open");
  CHECK(dlock_try(lease, 1000, &err) == DLOCK_OK, "try: %s", err.message);
  CHECK(dlock_begin(lease, &err) == DLOCK_OK, "begin: %s", err.message);
  int64_t affected = -1;
  CHECK(dlock_exec(lease, "DO ?", (const char *const[]){"1"}, 1, &affected, &err) == DLOCK_OK,
        "exec: %s", err.message);
  CHECK(dlock_rollback(lease, &err) == DLOCK_OK && dlock_held(lease), "rollback keeps the lease");
  CHECK(dlock_release(lease, &err) == DLOCK_OK, "release: %s", err.message);
  dlock_close(lease);

  /* a row lock */
  dlock_lock *row = NULL;
  dlock_config *rcfg = config("mode", DLOCK_MODE_ROW, NULL, NULL);
  CHECK(dlock_open(&row, client, row_key, strlen(row_key), rcfg, &err) == DLOCK_OK, "row open");
  CHECK(dlock_try(row, 1000, &err) == DLOCK_OK, "row try: %s", err.message);
  CHECK(dlock_token(row) == 0 && dlock_remaining_ms(row) == -1, "row accessors");
  CHECK(dlock_renew(row, &err) == DLOCK_OK, "row renew: %s", err.message);
  CHECK(dlock_rollback(row, &err) == DLOCK_OK && !dlock_held(row), "row rollback");
  dlock_close(row);
  dlock_config_free(rcfg);

  /* counters and cleanup */
  const char *const *names = dlock_counter_names();
  int n = 0;
  for (; names[n] != NULL; ++n) {
    uint64_t v = 0;
    CHECK(dlock_client_counter(client, names[n], &v, &err) == DLOCK_OK, "counter %s", names[n]);
  }
  uint64_t acquisitions = 0;
  CHECK(dlock_client_counter(client, "acquisitions", &acquisitions, &err) == DLOCK_OK &&
            acquisitions >= 3,
        "acquisitions %llu", (unsigned long long)acquisitions);
  CHECK(dlock_client_counter(client, "no_such_counter", &acquisitions, &err) == DLOCK_E_INVALID,
        "unknown counter");
  uint64_t deleted = 0;
  CHECK(dlock_client_cleanup(client, &deleted, &err) == DLOCK_OK, "cleanup: %s", err.message);

  dlock_client_close(other);
  dlock_client_close(client);
  dlock_client_close(NULL);

  printf("abi compat 1.0: %d passed, %d failed (library %s)\n", g_passed, g_failed, dlock_version());
  return g_failed == 0 ? 0 : 1;
}
