/*
 * ssl_mode through the C API, against two throwaway servers started by
 * tls_test.sh: one with TLS (its CA made by the script) and one without.
 *
 *   tls_test main       the TLS server presents a certificate for 127.0.0.1
 *   tls_test otherhost  it presents one for "otherhost" (same CA)
 *
 * Environment (set by tls_test.sh): DLOCK_TLS_URL, DLOCK_PLAIN_URL,
 * DLOCK_TLS_CA (the server's CA), DLOCK_TLS_WRONG_CA (an unrelated CA).
 * Both servers have the table test.tls_check(c VARCHAR(200)): an
 * INSERT ... SELECT of the session's Ssl_cipher into it, run through
 * dlock_exec on a row lock's own connection, affects one row when that
 * connection is encrypted and none when it is not (the row lock's
 * transaction is rolled back, so nothing stays behind).
 *
 * Prints "N passed, N failed"; exit status 1 when anything failed.
 */
#define _POSIX_C_SOURCE 200809L

#include "dlock/dlock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock_check.h"

static const char *env(const char *name) {
  const char *v = getenv(name);
  if (v == NULL || v[0] == '\0') {
    fprintf(stderr, "tls_test: %s is not set (run through tls_test.sh)\n", name);
    exit(2);
  }
  return v;
}

/* Opens a client on url with ssl_mode (and ssl_ca unless NULL). Returns the
 * code; *out is the client on success. */
static int open_client(dlock_client **out, const char *url, const char *mode, const char *ca,
                       dlock_error *err) {
  dlock_config *cfg = NULL;
  int rc = dlock_config_new(&cfg, err);
  if (rc == DLOCK_OK) rc = dlock_config_set(cfg, "ssl_mode", mode, err);
  if (rc == DLOCK_OK && ca != NULL) rc = dlock_config_set(cfg, "ssl_ca", ca, err);
  if (rc == DLOCK_OK) rc = dlock_client_open(out, url, cfg, err);
  dlock_config_free(cfg);
  return rc;
}

/* On a row lock of client: 1 if the lock's own connection is encrypted, 0 if
 * not, -1 on an error (reported). A lease lock is taken and released first,
 * so that the pool's connections are used as well. */
static int lock_conn_encrypted(dlock_client *client, const char *what) {
  dlock_error err;
  dlock_config *cfg = NULL;
  dlock_lock *row = NULL, *lease = NULL;
  int64_t affected = -1;
  int result = -1;
  char key[64];
  int rc;
  snprintf(key, sizeof key, "tls-test-%ld", (long)getpid());

  rc = dlock_open(&lease, client, key, strlen(key), NULL, &err);
  if (rc == DLOCK_OK) rc = dlock_try(lease, 2000, &err);
  if (rc == DLOCK_OK) rc = dlock_release(lease, &err);
  CHECK(rc == DLOCK_OK, "%s: lease try/release: %s: %s", what, dlock_code_name(rc), err.message);
  dlock_close(lease);
  if (rc != DLOCK_OK) return -1;

  rc = dlock_config_new(&cfg, &err);
  if (rc == DLOCK_OK) rc = dlock_config_set(cfg, "mode", "row", &err);
  if (rc == DLOCK_OK) rc = dlock_open(&row, client, key, strlen(key), cfg, &err);
  dlock_config_free(cfg);
  if (rc == DLOCK_OK) rc = dlock_try(row, 2000, &err);
  if (rc == DLOCK_OK)
    rc = dlock_exec(row,
                    "INSERT INTO tls_check(c) SELECT VARIABLE_VALUE FROM "
                    "information_schema.SESSION_STATUS WHERE VARIABLE_NAME='Ssl_cipher' "
                    "AND VARIABLE_VALUE<>''",
                    NULL, 0, &affected, &err);
  CHECK(rc == DLOCK_OK, "%s: row lock and the Ssl_cipher check: %s: %s", what,
        dlock_code_name(rc), err.message);
  if (rc == DLOCK_OK) {
    CHECK(affected == 0 || affected == 1, "%s: the check affected %lld rows", what,
          (long long)affected);
    result = affected == 1 ? 1 : 0;
    rc = dlock_rollback(row, &err);
    CHECK(rc == DLOCK_OK, "%s: rollback: %s: %s", what, dlock_code_name(rc), err.message);
  }
  dlock_close(row);
  return result;
}

/* The open must fail with DLOCK_E_CONNECT. */
static void expect_refused(const char *url, const char *mode, const char *ca, const char *what,
                           const char *want_in_message) {
  dlock_error err;
  dlock_client *c = NULL;
  int rc = open_client(&c, url, mode, ca, &err);
  CHECK(rc == DLOCK_E_CONNECT, "%s: got %s (%s), want DLOCK_E_CONNECT", what, dlock_code_name(rc),
        rc == DLOCK_OK ? "connected" : err.message);
  CHECK(c == NULL || rc == DLOCK_OK, "%s: a failed open left a client", what);
  if (rc == DLOCK_E_CONNECT && want_in_message != NULL)
    CHECK(strstr(err.message, want_in_message) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
          err.message, want_in_message);
  if (rc != DLOCK_E_CONNECT) printf("  %s: %s\n", what, rc == DLOCK_OK ? "connected" : err.message);
  dlock_client_close(c);
}

/* The open must work, and the lock connection must be encrypted (want 1) or
 * not (want 0). */
static void expect_works(const char *url, const char *mode, const char *ca, const char *what,
                         int want_encrypted) {
  dlock_error err;
  dlock_client *c = NULL;
  int rc = open_client(&c, url, mode, ca, &err);
  CHECK(rc == DLOCK_OK, "%s: open: %s: %s", what, dlock_code_name(rc), err.message);
  if (rc == DLOCK_OK) {
    int enc = lock_conn_encrypted(c, what);
    CHECK(enc == want_encrypted, "%s: the lock connection is %s", what,
          enc == 1 ? "encrypted" : enc == 0 ? "NOT encrypted" : "unusable");
  }
  dlock_client_close(c);
}

int main(int argc, char **argv) {
  const char *phase = argc > 1 ? argv[1] : "main";
  const char *tls = env("DLOCK_TLS_URL");
  const char *ca = env("DLOCK_TLS_CA");
  const char *wrong_ca = env("DLOCK_TLS_WRONG_CA");

  if (strcmp(phase, "main") == 0) {
    const char *plain = env("DLOCK_PLAIN_URL");
    /* A server without TLS: nothing but disable connects. */
    expect_works(plain, "disable", NULL, "plain server, disable", 0);
    expect_refused(plain, "require", NULL, "plain server, require", "not encrypted");
    expect_refused(plain, "verify", ca, "plain server, verify", NULL);
    /* The TLS server with a certificate for 127.0.0.1 from ca. */
    expect_works(tls, "disable", NULL, "TLS server, disable", 0);
    expect_works(tls, "require", NULL, "TLS server, require", 1);
    /* With ssl_ca, require also checks the chain (not the name). */
    expect_refused(tls, "require", wrong_ca, "TLS server, require, wrong CA", NULL);
    expect_works(tls, "require", ca, "TLS server, require, right CA", 1);
    expect_works(tls, "verify", ca, "TLS server, verify, right CA", 1);
    expect_refused(tls, "verify", wrong_ca, "TLS server, verify, wrong CA", NULL);
    expect_refused(tls, "verify", NULL, "TLS server, verify, system CAs only", NULL);
  } else if (strcmp(phase, "otherhost") == 0) {
    /* The certificate names "otherhost", signed by the right CA. */
    expect_refused(tls, "verify", ca, "otherhost cert, verify, right CA", NULL);
    expect_works(tls, "require", NULL, "otherhost cert, require", 1);
    expect_works(tls, "require", ca, "otherhost cert, require, right CA", 1);
    expect_refused(tls, "require", wrong_ca, "otherhost cert, require, wrong CA", NULL);
  } else {
    fprintf(stderr, "tls_test: unknown phase %s\n", phase);
    return 2;
  }
  printf("tls_test %s: %d passed, %d failed\n", phase, g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
