/*
 * The whole C API (capi/include/dlock/dlock.h) against a real MariaDB server.
 * Pure C99 (+ POSIX: fork, pipes, pthreads, clocks). Prints one summary line
 * "N passed, N failed" and exits non-zero when anything failed; each failure
 * is printed to stderr as "FAIL file:line: ..." with the library's message.
 *
 * The server comes from the ctest fixture (DLOCK_TEST_DB_DIR/url) or from
 * DLOCK_URL. Keys carry a per-run prefix (pid and time), so reruns against
 * the same server never collide. Besides dlock's own tables it uses
 * capi_biz (business rows written through dlock_exec) and a lease table of
 * its own, capi_lease, for the cleanup tests (cleanup_grace_ms=0 there never
 * touches other tests' leases).
 *
 * CAPI_TEST_ONLY=fork,lease,... runs only those test functions (names as in
 * main(), without "test_").
 */
#define _POSIX_C_SOURCE 200809L

#include "dlock/dlock.h"

#include <errno.h>
#include <execinfo.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlock_check.h"
#include "dlock_test_env.h"

/* Which sanitizer this build runs under (GCC says so with __SANITIZE_*__,
 * clang with __has_feature). */
#if defined(__SANITIZE_ADDRESS__)
#define CAPI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CAPI_ASAN 1
#endif
#endif
#if defined(CAPI_ASAN) || defined(__SANITIZE_THREAD__)
#include <sanitizer/common_interface_defs.h>
#define CAPI_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#include <sanitizer/common_interface_defs.h>
#define CAPI_SANITIZED 1
#endif
#endif

/* ---- checks: CHECK, now_ms, sleep_ms (shared), and expect_rc ----------- */

/* Fills an error report with junk so that a check can see the library
 * really wrote it (code, server_errno and the terminating NUL). */
static dlock_error *junk(dlock_error *e) {
  e->code = 12345;
  e->server_errno = 4242;
  memset(e->message, 'x', sizeof e->message); /* deliberately unterminated */
  return e;
}

static const char *msg_of(const dlock_error *e) {
  if (e == NULL) return "(err was NULL)";
  if (memchr(e->message, '\0', sizeof e->message) == NULL) return "(message not NUL-terminated)";
  return e->message;
}

/* rc must be want; when e is given it must match the conventions of
 * dlock.h: err->code == rc, message NUL-terminated, "" and server_errno 0 on
 * success, non-empty on an error. */
static int expect_rc(const char *file, int line, const char *expr, int rc, int want,
                     const dlock_error *e) {
  char why[256];
  why[0] = '\0';
  if (rc != want) {
    snprintf(why, sizeof why, "returned %s (%d), expected %s (%d)", dlock_code_name(rc), rc,
             dlock_code_name(want), want);
  } else if (e != NULL) {
    if (memchr(e->message, '\0', sizeof e->message) == NULL)
      snprintf(why, sizeof why, "err->message is not NUL-terminated");
    else if (e->code != rc)
      snprintf(why, sizeof why, "err->code is %d (%s), but the call returned %d", e->code,
               dlock_code_name(e->code), rc);
    else if (rc == DLOCK_OK && e->message[0] != '\0')
      snprintf(why, sizeof why, "success must leave err->message empty");
    else if (rc == DLOCK_OK && e->server_errno != 0)
      snprintf(why, sizeof why, "success must leave err->server_errno 0, got %d", e->server_errno);
    else if (rc < 0 && e->message[0] == '\0')
      snprintf(why, sizeof why, "an error must come with a message");
  }
  if (why[0] == '\0') {
    ++g_passed;
    return 1;
  }
  ++g_failed;
  fprintf(stderr, "FAIL %s:%d: %s: %s; message: \"%s\"\n", file, line, expr, why, msg_of(e));
  return 0;
}

/* In a test function with a local `dlock_error err`: pass E as the err
 * argument and check with EXPECT. */
#define E (junk(&err))
#define EXPECT(call, want) expect_rc(__FILE__, __LINE__, #call, (call), (want), &err)
#define EXPECT_NOERR(call, want) expect_rc(__FILE__, __LINE__, #call, (call), (want), NULL)

/* ---- helpers ------------------------------------------------------------- */

static char g_prefix[64];
/* A second client: another holder in the same thread. (Two objects of one
 * client for one key are the same holder in one thread: they share the hold.) */
static dlock_client *g_other;
static const char *g_url;

/* g_prefix + suffix in buf. */
static const char *key(char *buf, size_t n, const char *suffix) {
  snprintf(buf, n, "%s%s", g_prefix, suffix);
  return buf;
}

static dlock_config *make_cfg(const char *mode, const char *ttl_ms) {
  dlock_config *cfg = NULL;
  dlock_error err;
  if (!EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) return NULL;
  if (mode != NULL) EXPECT(dlock_config_set(cfg, "mode", mode, E), DLOCK_OK);
  if (ttl_ms != NULL) EXPECT(dlock_config_set(cfg, "ttl_ms", ttl_ms, E), DLOCK_OK);
  return cfg;
}

/* Opens a lock object (mode/ttl_ms may be NULL for the defaults); NULL and a
 * failure counted when it cannot. */
static dlock_lock *open_lock_n(dlock_client *c, const char *k, size_t len, const char *mode,
                               const char *ttl_ms) {
  dlock_error err;
  dlock_lock *l = NULL;
  dlock_config *cfg = (mode != NULL || ttl_ms != NULL) ? make_cfg(mode, ttl_ms) : NULL;
  int rc = dlock_open(&l, c, k, len, cfg, junk(&err));
  dlock_config_free(cfg); /* open calls copy what they need */
  if (rc != DLOCK_OK || l == NULL) {
    ++g_failed;
    fprintf(stderr, "FAIL %s:%d: dlock_open(key of %lu bytes, mode %s) returned %s: %s\n",
            __FILE__, __LINE__, (unsigned long)len, mode ? mode : "default", dlock_code_name(rc),
            msg_of(&err));
    return NULL;
  }
  return l;
}

static dlock_lock *open_lock(dlock_client *c, const char *k, const char *mode, const char *ttl_ms) {
  return open_lock_n(c, k, strlen(k), mode, ttl_ms);
}

/* A lock object that is its own holder (holder=lock): another holder than
 * the thread's other objects for the same key on the same client. */
static dlock_lock *open_lock_own_holder(dlock_client *c, const char *k) {
  dlock_error err;
  dlock_lock *l = NULL;
  dlock_config *cfg = make_cfg(NULL, NULL);
  EXPECT(dlock_config_set(cfg, "holder", "lock", E), DLOCK_OK);
  int rc = dlock_open(&l, c, k, strlen(k), cfg, junk(&err));
  dlock_config_free(cfg);
  CHECK(rc == DLOCK_OK, "dlock_open(holder=lock): %s", msg_of(&err));
  return rc == DLOCK_OK ? l : NULL;
}

static dlock_client *open_client(const char *url, dlock_config *cfg) {
  dlock_error err;
  dlock_client *c = NULL;
  if (!EXPECT(dlock_client_open(&c, url, cfg, E), DLOCK_OK)) return NULL;
  CHECK(c != NULL, "dlock_client_open returned OK but no client");
  return c;
}

/* Splits g_url = scheme "://" [userinfo "@"] hostport rest (rest = "/db?..").
 * Returns 0 when it does not look like a URL. */
struct url_parts {
  char scheme[16];
  char user[128];
  int has_password;
  char hostport[256];
  char rest[512];
};

static int split_url(const char *url, struct url_parts *p) {
  const char *sep = strstr(url, "://");
  const char *auth, *slash, *at = NULL, *q;
  memset(p, 0, sizeof *p);
  if (sep == NULL || (size_t)(sep - url) >= sizeof p->scheme) return 0;
  memcpy(p->scheme, url, (size_t)(sep - url));
  auth = sep + 3;
  slash = strchr(auth, '/');
  if (slash == NULL) return 0;
  for (q = auth; q < slash; ++q)
    if (*q == '@') at = q;
  if (at != NULL) {
    const char *colon = memchr(auth, ':', (size_t)(at - auth));
    const char *uend = colon != NULL ? colon : at;
    p->has_password = colon != NULL;
    snprintf(p->user, sizeof p->user, "%.*s", (int)(uend - auth), auth);
  }
  q = at != NULL ? at + 1 : auth;
  snprintf(p->hostport, sizeof p->hostport, "%.*s", (int)(slash - q), q);
  snprintf(p->rest, sizeof p->rest, "%s", slash);
  return 1;
}

static void create_biz_table(dlock_client *client);

/* ---- library: version and code names -------------------------------------- */

static void test_version_and_codes(void) {
  static const struct {
    int code;
    const char *name;
  } codes[] = {
      {DLOCK_OK, "DLOCK_OK"},
      {DLOCK_BUSY, "DLOCK_BUSY"},
      {DLOCK_E_INVALID, "DLOCK_E_INVALID"},
      {DLOCK_E_CONNECT, "DLOCK_E_CONNECT"},
      {DLOCK_E_LOST, "DLOCK_E_LOST"},
      {DLOCK_E_READONLY, "DLOCK_E_READONLY"},
      {DLOCK_E_UNSUPPORTED, "DLOCK_E_UNSUPPORTED"},
      {DLOCK_E_DB, "DLOCK_E_DB"},
      {DLOCK_E_STATE, "DLOCK_E_STATE"},
      {DLOCK_E_FORKED, "DLOCK_E_FORKED"},
      {DLOCK_E_POOL, "DLOCK_E_POOL"},
      {DLOCK_E_UNKNOWN, "DLOCK_E_UNKNOWN"},
      {DLOCK_E_INTERNAL, "DLOCK_E_INTERNAL"},
      {DLOCK_E_TIMEOUT, "DLOCK_E_TIMEOUT"},
      {DLOCK_E_CANCELLED, "DLOCK_E_CANCELLED"},
      {DLOCK_E_MAX_HOLD, "DLOCK_E_MAX_HOLD"},
  };
  static const int unknown[] = {2, 3, -15, -100, 100, 12345, INT_MAX, INT_MIN};
  char want[32];
  size_t i;
  const char *v = dlock_version();

  snprintf(want, sizeof want, "%d.%d.%d", DLOCK_VERSION_MAJOR, DLOCK_VERSION_MINOR,
           DLOCK_VERSION_PATCH);
  CHECK(v != NULL && strcmp(v, want) == 0, "dlock_version() is \"%s\", header says %s",
        v ? v : "(null)", want);
  CHECK(v == dlock_version(), "dlock_version() must be a static string");
  CHECK(dlock_version_number() == DLOCK_VERSION_NUMBER &&
            DLOCK_VERSION_NUMBER ==
                DLOCK_VERSION_MAJOR * 10000 + DLOCK_VERSION_MINOR * 100 + DLOCK_VERSION_PATCH,
        "dlock_version_number() is %d, the header's DLOCK_VERSION_NUMBER %d", dlock_version_number(),
        DLOCK_VERSION_NUMBER);

  /* The values are ABI: they never change. */
  CHECK(DLOCK_OK == 0 && DLOCK_BUSY == 1 && DLOCK_E_INVALID == -1 && DLOCK_E_TIMEOUT == -12 &&
            DLOCK_E_CANCELLED == -13 && DLOCK_E_MAX_HOLD == -14,
        "code values changed");
  CHECK(DLOCK_EVENT_LOST == 1 && DLOCK_EVENT_MAX_HOLD == 2 && DLOCK_EVENT_RELEASE_GONE == 3 &&
            DLOCK_EVENT_RENEW_RETRY == 4 && DLOCK_EVENT_CLEANUP == 5 && DLOCK_EVENT_TOPOLOGY == 6,
        "event type values changed");
  CHECK(DLOCK_SEVERITY_INFO == 0 && DLOCK_SEVERITY_WARNING == 1 && DLOCK_SEVERITY_CRITICAL == 2,
        "severity values changed");
  CHECK(DLOCK_STATE_IDLE == 0 && DLOCK_STATE_HELD == 1 && DLOCK_STATE_LOST == 2,
        "state values changed");

  for (i = 0; i < sizeof codes / sizeof codes[0]; ++i) {
    const char *n = dlock_code_name(codes[i].code);
    CHECK(n != NULL && strcmp(n, codes[i].name) == 0, "dlock_code_name(%d) is \"%s\", want %s",
          codes[i].code, n ? n : "(null)", codes[i].name);
  }
  for (i = 0; i < sizeof unknown / sizeof unknown[0]; ++i) {
    const char *n = dlock_code_name(unknown[i]);
    CHECK(n != NULL && strcmp(n, "DLOCK_UNKNOWN_CODE") == 0,
          "dlock_code_name(%d) is \"%s\", want DLOCK_UNKNOWN_CODE", unknown[i], n ? n : "(null)");
  }
}

/* ---- config ---------------------------------------------------------------- */

static void test_config(void) {
  static const char *const good[][2] = {
      {"pool", "1"},          {"pool", "1024"},         {"connect_timeout", "1"},
      {"connect_timeout", "3600"}, {"read_timeout", "30"}, {"table", "distributed_lock"},
      {"row_table", "fixed_lock"}, {"ssl_mode", "disable"}, {"ssl_mode", "require"},
      {"ssl_mode", "verify"},  {"mode", "lease"},        {"mode", "row"},
      {"ttl_ms", "1"},        {"ttl_ms", "30000"},      {"ttl_ms", "2592000000"},
      {"ssl_ca", "/nonexistent/ca.pem"}, {"cleanup_interval_ms", "0"},
      {"cleanup_interval_ms", "60000"}, {"cleanup_grace_ms", "0"},
      {"cleanup_grace_ms", "3600000"}, {"cleanup_batch", "1"}, {"cleanup_batch", "1000"},
      {"events", "0"},        {"events", "1024"},       {"auto_renew", "0"},
      {"auto_renew", "1"},    {"max_hold_ms", "0"},     {"max_hold_ms", "300000"},
      {"reentrant", "0"},     {"reentrant", "1"},       {"holder", "thread"},
      {"holder", "lock"},     {"shards", "0"},          {"shards", "16"},
      {"shard_group", "my-group"}, {"wakeup", "auto"},  {"wakeup", "poll"},
      {"fair", "0"},          {"fair", "1"},
  };
  static const char *const bad[][2] = {
      {"ttl_ms", "abc"},
      {"ttl_ms", "-5"},
      {"ttl_ms", "0"},
      {"ttl_ms", "99999999999999999999"},
      {"ttl_ms", "999999999999999999999999999999"},
      {"ttl_ms", "9223372036854775808"},
      {"ttl_ms", "2592000001"},
      {"ttl_ms", ""},
      {"ttl_ms", "5ms"},
      {"ttl_ms", "1e3"},
      {"ttl_ms", " 5"},
      {"mode", "other"},
      {"mode", ""},
      {"pool", "0"},
      {"pool", "1025"},
      {"connect_timeout", "0"},
      {"read_timeout", "x"},
      {"ssl_mode", "maybe"},
      {"table", "bad-name"},
      {"table", "1abc"},
      {"table", "t; DROP TABLE x"},
      {"table", ""},
      {"cleanup_interval_ms", "-1"},
      {"cleanup_grace_ms", "x"},
      {"cleanup_batch", "0"},
      {"events", "-1"},
      {"auto_renew", "2"},
      {"auto_renew", "maybe"},
      {"max_hold_ms", "-1"},
      {"reentrant", "x"},
      {"holder", "process"},
      {"shards", "-1"},
      {"shards", "x"},
      {"shard_group", ""},
      {"wakeup", "push"},
      {"fair", "2"},
      {"fence", "1"}, /* row locks carry no token: there is no such option */
  };
  dlock_error err;
  dlock_config *cfg = NULL;
  size_t i;

  if (!EXPECT(dlock_config_new(&cfg, E), DLOCK_OK) || cfg == NULL) return;
  for (i = 0; i < sizeof good / sizeof good[0]; ++i) {
    int rc = dlock_config_set(cfg, good[i][0], good[i][1], junk(&err));
    CHECK(rc == DLOCK_OK && err.code == DLOCK_OK && err.message[0] == '\0',
          "config_set(%s, \"%s\") returned %s: %s", good[i][0], good[i][1], dlock_code_name(rc),
          msg_of(&err));
  }
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    int rc = dlock_config_set(cfg, bad[i][0], bad[i][1], junk(&err));
    CHECK(rc == DLOCK_E_INVALID && err.code == DLOCK_E_INVALID,
          "config_set(%s, \"%s\") returned %s, want DLOCK_E_INVALID", bad[i][0], bad[i][1],
          dlock_code_name(rc));
    CHECK(strstr(msg_of(&err), bad[i][0]) != NULL,
          "the message for a bad %s value must name the key: \"%s\"", bad[i][0], msg_of(&err));
  }
  EXPECT(dlock_config_set(cfg, "no_such_option", "1", E), DLOCK_E_INVALID);
  CHECK(strstr(err.message, "no_such_option") != NULL, "unknown key not named: \"%s\"",
        msg_of(&err));
  EXPECT(dlock_config_set(cfg, "", "1", E), DLOCK_E_INVALID);
  EXPECT(dlock_config_set(cfg, "TTL_MS", "100", E), DLOCK_E_INVALID);
  /* err may be NULL */
  EXPECT_NOERR(dlock_config_set(cfg, "ttl_ms", "abc", NULL), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_config_set(cfg, "ttl_ms", "100", NULL), DLOCK_OK);
  dlock_config_free(cfg);
  dlock_config_free(NULL);

  cfg = NULL;
  EXPECT_NOERR(dlock_config_new(&cfg, NULL), DLOCK_OK);
  CHECK(cfg != NULL, "dlock_config_new with err NULL gave no config");
  dlock_config_free(cfg);
}

/* ---- client open ------------------------------------------------------------ */

static void test_client_open(void) {
  static const char *const malformed[] = {
      "",
      "127.0.0.1:1/test",                          /* no scheme */
      "root@127.0.0.1:1/test",                     /* no scheme */
      "http://root@127.0.0.1:1/test",              /* wrong scheme */
      "mysql://root@127.0.0.1:1",                  /* no database */
      "mysql://root@127.0.0.1:1/",                 /* empty database */
      "mysql://root@127.0.0.1:notaport/test",      /* bad port */
      "mysql://root@127.0.0.1:0/test",             /* port out of range */
      "mysql://root@127.0.0.1:65536/test",         /* port out of range */
      "mysql://root@127.0.0.1:-1/test",            /* bad port */
      "mysql://root@127.0.0.1:1/te%zzst",          /* bad %-escape */
      "mysql://root@127.0.0.1:1/test%4",           /* truncated %-escape */
      "mysql://ro%g0ot@127.0.0.1:1/test",          /* bad %-escape in the user */
      "mysql://root@127.0.0.1:1/test?bogus=1",     /* unknown query option */
      "mysql://root@127.0.0.1:1/test?pool=2&x=1",  /* unknown query option */
      "mysql://root@127.0.0.1:1/test?pool",        /* option without value */
      "mysql://root@127.0.0.1:1/test?pool=0",      /* bad option value */
      "mysql://root@127.0.0.1:1/test?pool=abc",    /* bad option value */
      "mysql://root@127.0.0.1:1/test?connect_timeout=-1",
      "mysql://root@[::1:1/test",                  /* unclosed [ */
      "mysql://root@[]:1/test",                    /* empty host in [] */
      "mysql://root@[]/test",                      /* empty host in [] */
      "mysql://root@127.0.0.1:1/test#frag",        /* a fragment */
      "mysql://root@127.0.0.1:1/test?pool=2#frag", /* a fragment after options */
  };
  const char *secret = "Secr3tPassw0rd-do-not-print";
  struct url_parts up;
  dlock_error err;
  dlock_client *c = NULL;
  dlock_config *cfg = NULL;
  char url[1200];
  size_t i;
  int64_t t0, took;

  /* The fixture's URL, without and with a config. */
  c = open_client(g_url, NULL);
  dlock_client_close(c);
  cfg = NULL;
  if (EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) {
    EXPECT(dlock_config_set(cfg, "pool", "2", E), DLOCK_OK);
    EXPECT(dlock_config_set(cfg, "connect_timeout", "3", E), DLOCK_OK);
    c = open_client(g_url, cfg);
    dlock_client_close(c);
    dlock_config_free(cfg);
  }
  /* Query options in the URL. */
  snprintf(url, sizeof url, "%s%spool=2&connect_timeout=3&read_timeout=10", g_url,
           strchr(g_url, '?') ? "&" : "?");
  c = open_client(url, NULL);
  dlock_client_close(c);
  /* err may be NULL on success too. */
  c = NULL;
  EXPECT_NOERR(dlock_client_open(&c, g_url, NULL, NULL), DLOCK_OK);
  CHECK(c != NULL, "client_open with err NULL gave no client");
  dlock_client_close(c);

  for (i = 0; i < sizeof malformed / sizeof malformed[0]; ++i) {
    int rc;
    c = (dlock_client *)&err; /* *out must be set to NULL on failure */
    t0 = now_ms();
    rc = dlock_client_open(&c, malformed[i], NULL, junk(&err));
    took = now_ms() - t0;
    CHECK(rc == DLOCK_E_INVALID && err.code == rc && err.message[0] != '\0',
          "dlock_client_open(\"%s\") returned %s (want DLOCK_E_INVALID): %s", malformed[i],
          dlock_code_name(rc), msg_of(&err));
    CHECK(c == NULL, "dlock_client_open(\"%s\") failed but left *out non-NULL", malformed[i]);
    CHECK(took < 2000, "a malformed URL took %ld ms to reject", (long)took);
    if (rc == DLOCK_OK) dlock_client_close(c);
  }

  /* A bad %-escape in the password: INVALID, and the password is not echoed. */
  c = NULL;
  EXPECT(dlock_client_open(&c, "mysql://root:Secr%zzPw@127.0.0.1:1/test", NULL, E),
         DLOCK_E_INVALID);
  CHECK(strstr(err.message, "Secr") == NULL && strstr(err.message, "zzPw") == NULL,
        "the password appears in the message: \"%s\"", msg_of(&err));

  /* '/', '?' or '#' unencoded in the password: the message names the real
   * problem, and echoes no part of the password. */
  {
    static const char *const pw_urls[] = {
        "mysql://root:Se/cretPw@127.0.0.1:1/test",
        "mysql://root:Se?cretPw@127.0.0.1:1/test",
        "mysql://root:Se?cretPw@127.0.0.1:1/test?pool=2",
        "mysql://root:Se#cretPw@127.0.0.1:1/test",
        "mysql://root:Se/cretPw@127.0.0.1",
        "mysql://root:Se/cret/Pw@127.0.0.1:1/test",
    };
    for (i = 0; i < sizeof pw_urls / sizeof pw_urls[0]; ++i) {
      c = NULL;
      EXPECT(dlock_client_open(&c, pw_urls[i], NULL, E), DLOCK_E_INVALID);
      CHECK(strstr(err.message, "password") != NULL && strstr(err.message, "percent-encode"),
            "%s: the message should name the password and the cure: \"%s\"", pw_urls[i],
            msg_of(&err));
      CHECK(strstr(err.message, "cret") == NULL && strstr(err.message, "Se") == NULL,
            "%s: the password appears in the message: \"%s\"", pw_urls[i], msg_of(&err));
      dlock_client_close(c);
    }
    /* A user name with '/' is named as such. */
    EXPECT(dlock_client_open(&c, "mysql://ro/ot@127.0.0.1:1/test", NULL, E), DLOCK_E_INVALID);
    CHECK(strstr(err.message, "user name") != NULL, "user name with '/': \"%s\"", msg_of(&err));
    /* The port is not echoed (with no '@' it may be a password). */
    EXPECT(dlock_client_open(&c, "mysql://root:PortPw9/test", NULL, E), DLOCK_E_INVALID);
    CHECK(strstr(err.message, "PortPw9") == NULL, "the port is echoed: \"%s\"", msg_of(&err));
    /* The fragment message says what is wrong. */
    EXPECT(dlock_client_open(&c, "mysql://root@127.0.0.1:1/test#frag", NULL, E), DLOCK_E_INVALID);
    CHECK(strstr(err.message, "#") != NULL && strstr(err.message, "%23") != NULL,
          "fragment: \"%s\"", msg_of(&err));
    EXPECT(dlock_client_open(&c, "mysql://root@[]:1/test", NULL, E), DLOCK_E_INVALID);
    CHECK(strstr(err.message, "empty host") != NULL, "[] as host: \"%s\"", msg_of(&err));
    /* An '@' in an option value is no password problem when the URL has a
     * user name; after a bare host:port it cannot be told from a password
     * with '/' or '?' (user:12/pw@host), so it is refused, showing nothing. */
    EXPECT(dlock_client_open(&c, "mysql://root@127.0.0.1:1/test?ssl_ca=/a@b/ca.pem&pool=0", NULL, E),
           DLOCK_E_INVALID);
    CHECK(strstr(err.message, "pool") != NULL, "'@' in an option: \"%s\"", msg_of(&err));
    EXPECT(dlock_client_open(&c, "mysql://127.0.0.1:1/test?ssl_ca=/a@b/ca.pem&pool=0", NULL, E),
           DLOCK_E_INVALID);
    CHECK(strstr(err.message, "%40") != NULL && strstr(err.message, "ca.pem") == NULL,
          "'@' after host:port: \"%s\"", msg_of(&err));
  }

  /* Wrong password: DLOCK_E_CONNECT, and the password is in no message. */
  if (split_url(g_url, &up)) {
    dlock_client *bad = NULL;
    snprintf(url, sizeof url, "%s://%s:%s@%s%s", up.scheme, up.user[0] ? up.user : "root",
             secret, up.hostport, up.rest);
    EXPECT(dlock_client_open(&bad, url, NULL, E), DLOCK_E_CONNECT);
    CHECK(bad == NULL, "a failed open left *out non-NULL");
    CHECK(err.server_errno != 0, "wrong password: server_errno should carry the server's error");
    CHECK(strstr(err.message, secret) == NULL && strstr(err.message, "Secr3t") == NULL,
          "the password appears in the message: \"%s\"", msg_of(&err));
    dlock_client_close(bad);

    /* A percent-encoded password: neither form may appear. */
    snprintf(url, sizeof url, "%s://%s:P%%40ss%%3Aw0rd-Zq9@%s%s", up.scheme,
             up.user[0] ? up.user : "root", up.hostport, up.rest);
    EXPECT(dlock_client_open(&bad, url, NULL, E), DLOCK_E_CONNECT);
    CHECK(strstr(err.message, "P@ss:w0rd-Zq9") == NULL && strstr(err.message, "w0rd-Zq9") == NULL,
          "the decoded password appears in the message: \"%s\"", msg_of(&err));
    dlock_client_close(bad);

    /* The password may come from DLOCK_PASSWORD (only testable when the
     * URL itself carries none: the URL's password wins). */
    if (!up.has_password && getenv("DLOCK_PASSWORD") == NULL) {
      const char *envpw = "EnvS3cretPw-xyz";
      setenv("DLOCK_PASSWORD", envpw, 1);
      EXPECT(dlock_client_open(&bad, g_url, NULL, E), DLOCK_E_CONNECT);
      CHECK(strstr(err.message, envpw) == NULL,
            "DLOCK_PASSWORD's value appears in the message: \"%s\"", msg_of(&err));
      dlock_client_close(bad);
      unsetenv("DLOCK_PASSWORD");
    }

    /* A database that does not exist cannot be connected to. */
    snprintf(url, sizeof url, "%s://%s%s%s/dlock_no_such_db_%ld", up.scheme, up.user,
             up.user[0] ? "@" : "", up.hostport, (long)getpid());
    if (!up.has_password) {
      const char *qm = strchr(up.rest, '?');
      if (qm != NULL) strncat(url, qm, sizeof url - strlen(url) - 1);
      EXPECT(dlock_client_open(&bad, url, NULL, E), DLOCK_E_CONNECT);
      dlock_client_close(bad);
    }
  } else {
    CHECK(0, "cannot split the test URL \"%s\"", g_url);
  }

  /* A closed port fails fast, within connect_timeout (+ slack). */
  cfg = NULL;
  if (EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) {
    dlock_client *bad = (dlock_client *)&err;
    EXPECT(dlock_config_set(cfg, "connect_timeout", "1", E), DLOCK_OK);
    t0 = now_ms();
    EXPECT(dlock_client_open(&bad, "mysql://root@127.0.0.1:1/test", cfg, E), DLOCK_E_CONNECT);
    took = now_ms() - t0;
    CHECK(took < 1000 + 2000, "connecting to a closed port took %ld ms (connect_timeout=1)",
          (long)took);
    CHECK(bad == NULL, "a failed open left *out non-NULL");
    CHECK(strstr(err.message, "127.0.0.1") != NULL,
          "the message should say where it tried: \"%s\"", msg_of(&err));
    /* A config's value overrides the URL's query. */
    t0 = now_ms();
    EXPECT(dlock_client_open(&bad, "mysql://root@127.0.0.1:1/test?connect_timeout=60", cfg, E),
           DLOCK_E_CONNECT);
    took = now_ms() - t0;
    CHECK(took < 1000 + 2000, "closed port with connect_timeout=1 in the config took %ld ms",
          (long)took);
    dlock_config_free(cfg);
  }
  dlock_client_close(NULL);
}

/* ---- messages never carry raw control bytes from input -------------------- */

static int has_control(const char *m) {
  for (; *m != '\0'; ++m)
    if ((unsigned char)*m < 0x20 || (unsigned char)*m == 0x7f) return 1;
  return 0;
}

/* The application's own settings (issue 23, 5): the fixture's URL as a
 * go-sql-driver DSN and as a JDBC URL. Each opens a client on the same tables:
 * a lock it holds is busy for a client of the mysql:// URL. */
static void test_dsn_forms(dlock_client *client) {
  struct url_parts up;
  char dsn[1400], jdbc[1400], local[1400], bad[1400], k[128];
  const char *forms[3];
  const char *names[3] = {"dsn", "jdbc", "localhost"};
  const char *query;
  size_t nforms = 2;
  const char *secret = "Secr3tPassw0rd-do-not-print";
  dlock_error err;
  dlock_client *none = NULL;
  size_t i;

  if (!split_url(g_url, &up) || up.has_password) {
    printf("  (dsn_forms: skipped, the URL has a password or is not mysql://)\n");
    return;
  }
  query = strchr(up.rest, '?');
  /* user@tcp(host:port)/db?.. and jdbc:mysql://host:port/db?..&user=.. */
  snprintf(dsn, sizeof dsn, "%s%stcp(%s)%s%sparseTime=true&timeout=5s", up.user,
           up.user[0] ? "@" : "", up.hostport, up.rest, query ? "&" : "?");
  snprintf(jdbc, sizeof jdbc, "jdbc:mysql://%s%s%suser=%s&connectTimeout=5000&useUnicode=true",
           up.hostport, up.rest, query ? "&" : "?", up.user);
  forms[0] = dsn;
  forms[1] = jdbc;
  /* mysql://user@localhost:PORT/db: TCP to 127.0.0.1:PORT in every language
   * (Connector/C alone would take its default unix socket): the lock taken
   * through it must exclude the fixture client's, on the same server. */
  if (strncmp(up.hostport, "127.0.0.1:", 10) == 0) {
    snprintf(local, sizeof local, "%s://%s%slocalhost:%s%s", up.scheme, up.user,
             up.user[0] ? "@" : "", up.hostport + 10, up.rest);
    forms[nforms++] = local;
  } else {
    printf("  (dsn_forms: localhost:PORT skipped, the server is not 127.0.0.1:PORT)\n");
  }
  for (i = 0; i < nforms; ++i) {
    dlock_client *c = open_client(forms[i], NULL);
    dlock_lock *mine, *theirs;
    if (c == NULL) {
      CHECK(0, "could not open a client from \"%s\"", forms[i]);
      continue;
    }
    key(k, sizeof k, names[i]);
    mine = open_lock(c, k, NULL, NULL);
    theirs = open_lock(client, k, NULL, NULL);
    if (mine != NULL && theirs != NULL && EXPECT(dlock_try(mine, 0, E), DLOCK_OK)) {
      EXPECT(dlock_try(theirs, 0, E), DLOCK_BUSY);
      EXPECT(dlock_release(mine, E), DLOCK_OK);
      EXPECT(dlock_try(theirs, 0, E), DLOCK_OK);
      EXPECT(dlock_release(theirs, E), DLOCK_OK);
    }
    dlock_close(mine);
    dlock_close(theirs);
    dlock_client_close(c);
  }
  /* Unknown parameters are named; a password never is. */
  snprintf(bad, sizeof bad, "%s:%s@tcp(%s)/db?fooBar=1&zap=2", up.user, secret, up.hostport);
  EXPECT(dlock_client_open(&none, bad, NULL, junk(&err)), DLOCK_E_INVALID);
  CHECK(strstr(err.message, "'fooBar', 'zap'") != NULL, "DSN error names no parameter: %s",
        msg_of(&err));
  CHECK(strstr(err.message, "Secr3t") == NULL, "the DSN's password in: %s", msg_of(&err));
  snprintf(bad, sizeof bad, "jdbc:mariadb://127.0.0.1:1/db?user=u&password=%s", secret);
  EXPECT(dlock_client_open(&none, bad, NULL, junk(&err)), DLOCK_E_CONNECT);
  CHECK(none == NULL, "a failed open left a client");
  CHECK(strstr(err.message, "Secr3t") == NULL, "the JDBC URL's password in: %s", msg_of(&err));
  /* Nothing listens on port 1: the failure is a TCP connect to 127.0.0.1,
   * never the default unix socket's. */
  EXPECT(dlock_client_open(&none, "mysql://u@localhost:1/db?connect_timeout=2", NULL, junk(&err)),
         DLOCK_E_CONNECT);
  CHECK(strstr(err.message, "127.0.0.1") != NULL && strstr(err.message, "socket") == NULL,
        "localhost:1 did not mean TCP to 127.0.0.1:1: %s", msg_of(&err));
}

static void test_messages(dlock_client *client) {
  static const char *const bad[][2] = {
      {"pool", "5\n"},       {"ttl_ms", "1\r\n"},     {"mode", "row\n"},
      {"holder", "lock\t"},  {"table", "t\nx"},       {"auto_renew", "1\x1b[31m"},
      {"no\nsuch", "1"},     {"read_timeout", "\x7f"},
  };
  dlock_error err;
  dlock_config *cfg = NULL;
  dlock_lock *row;
  struct url_parts up;
  char url[1200], k[128];
  size_t i;

  if (EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) {
    for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
      EXPECT(dlock_config_set(cfg, bad[i][0], bad[i][1], E), DLOCK_E_INVALID);
      CHECK(!has_control(err.message), "config_set(%s): raw control byte in \"%s\"", bad[i][0],
            msg_of(&err));
    }
    EXPECT(dlock_config_set(cfg, "pool", "5\n", E), DLOCK_E_INVALID);
    CHECK(strstr(err.message, "'5\\x0a'") != NULL, "pool=\"5\\n\": \"%s\"", msg_of(&err));
    dlock_config_free(cfg);
  }
  /* URL parts (here the database) in a connect error. */
  if (split_url(g_url, &up) && !up.has_password) {
    dlock_client *c = NULL;
    snprintf(url, sizeof url, "%s://%s%s%s/no%%0Asuch%%0Ddb", up.scheme, up.user,
             up.user[0] ? "@" : "", up.hostport);
    EXPECT(dlock_client_open(&c, url, NULL, E), DLOCK_E_CONNECT);
    CHECK(!has_control(err.message), "database with a newline: raw control byte in \"%s\"",
          msg_of(&err));
    CHECK(strstr(err.message, "no\\x0asuch") != NULL, "database with a newline: \"%s\"",
          msg_of(&err));
    dlock_client_close(c);
  }
  /* The server's message echoes the caller's SQL. */
  row = open_lock(client, key(k, sizeof k, "messages-row"), "row", NULL);
  if (row != NULL && EXPECT(dlock_try(row, 0, E), DLOCK_OK)) {
    EXPECT(dlock_exec(row, "SELEC\n1\t", NULL, 0, NULL, E), DLOCK_E_DB);
    CHECK(!has_control(err.message), "SQL error: raw control byte in \"%s\"", msg_of(&err));
    CHECK(strstr(err.message, "SELEC\\x0a1") != NULL, "SQL error: \"%s\"", msg_of(&err));
    dlock_rollback(row, E);
  }
  dlock_close(row);
}

/* ---- NULL pointers everywhere ------------------------------------------- */

static void test_null_pointers(dlock_client *client) {
  dlock_error err;
  dlock_config *cfg = NULL;
  dlock_client *c = NULL;
  dlock_lock *l = NULL;
  dlock_lock *lock;
  char k[128];
  const char *params[1] = {"x"};
  int64_t affected = -77;
  size_t len = 99;
  const char *s;

  key(k, sizeof k, "null");
  lock = open_lock(client, k, NULL, NULL);
  if (lock == NULL) return;

  /* config */
  EXPECT(dlock_config_new(NULL, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_config_new(NULL, NULL), DLOCK_E_INVALID);
  EXPECT(dlock_config_new(&cfg, E), DLOCK_OK);
  EXPECT(dlock_config_set(NULL, "mode", "row", E), DLOCK_E_INVALID);
  EXPECT(dlock_config_set(cfg, NULL, "row", E), DLOCK_E_INVALID);
  EXPECT(dlock_config_set(cfg, "mode", NULL, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_config_set(NULL, "mode", "row", NULL), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_config_set(cfg, NULL, NULL, NULL), DLOCK_E_INVALID);
  dlock_config_free(cfg);
  dlock_config_free(NULL);

  /* client */
  EXPECT(dlock_client_open(NULL, g_url, NULL, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_client_open(NULL, g_url, NULL, NULL), DLOCK_E_INVALID);
  c = (dlock_client *)&err;
  EXPECT(dlock_client_open(&c, NULL, NULL, E), DLOCK_E_INVALID);
  CHECK(c == NULL, "client_open(url NULL) left *out non-NULL");
  EXPECT_NOERR(dlock_client_open(&c, NULL, NULL, NULL), DLOCK_E_INVALID);
  dlock_client_close(NULL);

  /* dlock_open */
  EXPECT(dlock_open(NULL, client, k, strlen(k), NULL, E), DLOCK_E_INVALID);
  l = (dlock_lock *)&err;
  EXPECT(dlock_open(&l, NULL, k, strlen(k), NULL, E), DLOCK_E_INVALID);
  CHECK(l == NULL, "dlock_open(client NULL) left *out non-NULL");
  l = (dlock_lock *)&err;
  EXPECT(dlock_open(&l, client, NULL, 5, NULL, E), DLOCK_E_INVALID);
  CHECK(l == NULL, "dlock_open(key NULL) left *out non-NULL");
  EXPECT(dlock_open(&l, client, NULL, 0, NULL, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_open(NULL, NULL, NULL, 0, NULL, NULL), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_open(&l, client, NULL, 3, NULL, NULL), DLOCK_E_INVALID);
  dlock_close(NULL);

  /* operations */
  EXPECT(dlock_try(NULL, 0, E), DLOCK_E_INVALID);
  EXPECT(dlock_renew(NULL, E), DLOCK_E_INVALID);
  EXPECT(dlock_release(NULL, E), DLOCK_E_INVALID);
  EXPECT(dlock_rollback(NULL, E), DLOCK_E_INVALID);
  EXPECT(dlock_exec(NULL, "SELECT 1", NULL, 0, NULL, E), DLOCK_E_INVALID);
  EXPECT(dlock_exec(lock, NULL, NULL, 0, NULL, E), DLOCK_E_INVALID);
  EXPECT(dlock_exec(lock, "SELECT ?", NULL, 1, &affected, E), DLOCK_E_INVALID);
  CHECK(affected == -77, "a failed exec wrote out_affected");
  EXPECT_NOERR(dlock_try(NULL, 0, NULL), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_renew(NULL, NULL), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_release(NULL, NULL), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_rollback(NULL, NULL), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_exec(NULL, NULL, params, 1, NULL, NULL), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_exec(lock, "SELECT ?", NULL, 1, NULL, NULL), DLOCK_E_INVALID);

  EXPECT(dlock_begin(NULL, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_begin(NULL, NULL), DLOCK_E_INVALID);
  EXPECT(dlock_wait_lost(NULL, 0, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_wait_lost(NULL, 10, NULL), DLOCK_E_INVALID);
  CHECK(dlock_cancel(NULL) == DLOCK_E_INVALID, "dlock_cancel(NULL) = %d", dlock_cancel(NULL));
  {
    dlock_event ev;
    uint64_t v = 99;
    EXPECT(dlock_client_next_event(NULL, &ev, 0, E), DLOCK_E_INVALID);
    EXPECT(dlock_client_next_event(client, NULL, 0, E), DLOCK_E_INVALID);
    EXPECT_NOERR(dlock_client_next_event(NULL, NULL, 0, NULL), DLOCK_E_INVALID);
    EXPECT(dlock_client_counter(NULL, "busy", &v, E), DLOCK_E_INVALID);
    EXPECT(dlock_client_counter(client, NULL, &v, E), DLOCK_E_INVALID);
    EXPECT(dlock_client_counter(client, "busy", NULL, E), DLOCK_E_INVALID);
    EXPECT_NOERR(dlock_client_counter(NULL, NULL, NULL, NULL), DLOCK_E_INVALID);
    CHECK(v == 99, "a failed dlock_client_counter wrote *out");
    EXPECT(dlock_client_cleanup(NULL, NULL, E), DLOCK_E_INVALID);
  }

  /* accessors: safe defaults */
  CHECK(dlock_state(NULL) == DLOCK_STATE_IDLE, "dlock_state(NULL) = %d", dlock_state(NULL));
  CHECK(dlock_held(NULL) == 0, "dlock_held(NULL) = %d", dlock_held(NULL));
  CHECK(dlock_hold_count(NULL) == 0, "dlock_hold_count(NULL) = %d", dlock_hold_count(NULL));
  s = dlock_owner(NULL);
  CHECK(s != NULL && s[0] == '\0', "dlock_owner(NULL) must be \"\"");
  CHECK(dlock_token(NULL) == 0, "dlock_token(NULL) must be 0");
  s = dlock_key(NULL, &len);
  CHECK(s != NULL && s[0] == '\0' && len == 0, "dlock_key(NULL, &len) must be \"\" with len 0");
  s = dlock_key(NULL, NULL);
  CHECK(s != NULL, "dlock_key(NULL, NULL) must not return NULL");
  CHECK(dlock_remaining_ms(NULL) == 0, "dlock_remaining_ms(NULL) = %ld",
        (long)dlock_remaining_ms(NULL));
  s = dlock_key(lock, NULL);
  CHECK(s != NULL && strcmp(s, k) == 0, "dlock_key(lock, NULL) must still give the key");

  /* a whole successful round with err NULL */
  EXPECT_NOERR(dlock_try(lock, 0, NULL), DLOCK_OK);
  EXPECT_NOERR(dlock_renew(lock, NULL), DLOCK_OK);
  EXPECT_NOERR(dlock_release(lock, NULL), DLOCK_OK);
  EXPECT_NOERR(dlock_release(lock, NULL), DLOCK_E_STATE);
  dlock_close(lock);
  l = NULL;
  EXPECT_NOERR(dlock_open(&l, client, k, strlen(k), NULL, NULL), DLOCK_OK);
  dlock_close(l);
}

/* ---- lease locks -------------------------------------------------------- */

static void test_lease(dlock_client *client) {
  dlock_error err;
  char k[128], owner1[300], owner2[300], owner3[300];
  dlock_lock *a, *b;
  const char *kp;
  size_t klen = 0;
  uint64_t t1, t2, t3;
  int64_t rem, t0, took;

  key(k, sizeof k, "lease");
  a = open_lock(client, k, NULL, NULL);
  b = open_lock(g_other, k, DLOCK_MODE_LEASE, NULL);
  if (a == NULL || b == NULL) {
    dlock_close(a);
    dlock_close(b);
    return;
  }

  /* before the first acquisition */
  CHECK(dlock_state(a) == DLOCK_STATE_IDLE, "new lock state %d", dlock_state(a));
  CHECK(dlock_hold_count(a) == 0, "new lock hold count %d", dlock_hold_count(a));
  CHECK(dlock_held(a) == 0, "new lock held");
  CHECK(strcmp(dlock_owner(a), "") == 0, "owner before the first acquisition: \"%s\"",
        dlock_owner(a));
  CHECK(dlock_token(a) == 0, "token before the first acquisition: %llu",
        (unsigned long long)dlock_token(a));
  CHECK(dlock_remaining_ms(a) == 0, "remaining before the first acquisition: %ld",
        (long)dlock_remaining_ms(a));
  kp = dlock_key(a, &klen);
  CHECK(klen == strlen(k) && memcmp(kp, k, klen) == 0, "dlock_key gives back another key");
  EXPECT(dlock_release(a, E), DLOCK_E_STATE);
  EXPECT(dlock_renew(a, E), DLOCK_E_STATE);

  /* acquire */
  if (!EXPECT(dlock_try(a, 0, E), DLOCK_OK)) goto out;
  CHECK(dlock_state(a) == DLOCK_STATE_HELD, "state after try: %d", dlock_state(a));
  CHECK(dlock_held(a) == 1, "not held after try");
  CHECK(dlock_owner(a)[0] != '\0', "owner is empty while held");
  snprintf(owner1, sizeof owner1, "%s", dlock_owner(a));
  t1 = dlock_token(a);
  CHECK(t1 > 0, "token is 0 while held");
  rem = dlock_remaining_ms(a);
  CHECK(rem > 25000 && rem <= 30000, "remaining_ms right after acquiring a 30 s lease: %ld",
        (long)rem);
  CHECK(dlock_hold_count(a) == 1, "hold count after the first try: %d", dlock_hold_count(a));
  /* reentrant=1 (the default): the same holder (thread) counts up; the
   * owner and token of the hold stay the same */
  EXPECT(dlock_try(a, 0, E), DLOCK_OK);
  EXPECT(dlock_try(a, 100, E), DLOCK_OK);
  CHECK(dlock_hold_count(a) == 3, "hold count after two reentrant tries: %d",
        dlock_hold_count(a));
  CHECK(dlock_token(a) == t1 && strcmp(dlock_owner(a), owner1) == 0,
        "a reentrant try changed the owner or token of the hold");
  EXPECT(dlock_release(a, E), DLOCK_OK);
  EXPECT(dlock_release(a, E), DLOCK_OK);
  CHECK(dlock_hold_count(a) == 1 && dlock_held(a) == 1,
        "inner releases must only count down (count %d, held %d)", dlock_hold_count(a),
        dlock_held(a));

  /* busy for another object on the same key */
  EXPECT(dlock_try(b, 0, E), DLOCK_BUSY);
  CHECK(dlock_state(b) == DLOCK_STATE_IDLE && dlock_held(b) == 0, "busy left b non-idle");
  t0 = now_ms();
  EXPECT(dlock_try(b, 300, E), DLOCK_BUSY);
  took = now_ms() - t0;
  CHECK(took >= 300 && took < 300 + 1500, "try(wait 300) on a busy lease took %ld ms",
        (long)took);
  EXPECT(dlock_release(b, E), DLOCK_E_STATE);
  EXPECT(dlock_renew(b, E), DLOCK_E_STATE);
  CHECK(dlock_held(a) == 1, "b's attempts disturbed a");

  /* renew */
  EXPECT(dlock_renew(a, E), DLOCK_OK);
  rem = dlock_remaining_ms(a);
  CHECK(rem > 28000 && rem <= 30000, "remaining_ms right after renew: %ld", (long)rem);
  CHECK(dlock_token(a) == t1, "renew changed the token");
  CHECK(strcmp(dlock_owner(a), owner1) == 0, "renew changed the owner");

  /* release */
  EXPECT(dlock_release(a, E), DLOCK_OK);
  CHECK(dlock_state(a) == DLOCK_STATE_IDLE, "state after release: %d", dlock_state(a));
  CHECK(dlock_held(a) == 0, "held after release");
  CHECK(dlock_hold_count(a) == 0, "hold count after release: %d", dlock_hold_count(a));
  CHECK(dlock_remaining_ms(a) == 0, "remaining after release: %ld", (long)dlock_remaining_ms(a));
  CHECK(dlock_token(a) == t1, "the last token must stay readable after release");
  EXPECT(dlock_release(a, E), DLOCK_E_STATE);
  EXPECT(dlock_renew(a, E), DLOCK_E_STATE);

  /* the other object takes it now, with a new owner and a larger token */
  if (EXPECT(dlock_try(b, 0, E), DLOCK_OK)) {
    snprintf(owner2, sizeof owner2, "%s", dlock_owner(b));
    t2 = dlock_token(b);
    CHECK(owner2[0] != '\0' && strcmp(owner2, owner1) != 0, "b's owner \"%s\" vs a's \"%s\"",
          owner2, owner1);
    CHECK(t2 > t1, "token after a release: %llu, before: %llu", (unsigned long long)t2,
          (unsigned long long)t1);
    EXPECT(dlock_try(a, 0, E), DLOCK_BUSY);
    EXPECT(dlock_release(b, E), DLOCK_OK);

    /* the same object again: yet another owner, larger token */
    if (EXPECT(dlock_try(a, 0, E), DLOCK_OK)) {
      snprintf(owner3, sizeof owner3, "%s", dlock_owner(a));
      t3 = dlock_token(a);
      CHECK(strcmp(owner3, owner1) != 0 && strcmp(owner3, owner2) != 0,
            "the owner must change with every acquisition (\"%s\")", owner3);
      CHECK(t3 > t2, "tokens must strictly increase: %llu then %llu", (unsigned long long)t2,
            (unsigned long long)t3);
      /* closing a held lock releases it */
      dlock_close(a);
      a = NULL;
      EXPECT(dlock_try(b, 0, E), DLOCK_OK);
      CHECK(dlock_token(b) > t3, "token after close-release: %llu, before %llu",
            (unsigned long long)dlock_token(b), (unsigned long long)t3);
      EXPECT(dlock_release(b, E), DLOCK_OK);
    }
  }

  /* a wait that finds the lock free returns at once */
  if (a == NULL) a = open_lock(client, k, NULL, NULL);
  t0 = now_ms();
  EXPECT(dlock_try(a, 10000, E), DLOCK_OK);
  took = now_ms() - t0;
  CHECK(took < 2000, "try(wait 10000) on a free lock took %ld ms", (long)took);
  EXPECT(dlock_release(a, E), DLOCK_OK);

  /* reentrant=0: taking it again is a state error */
  {
    dlock_config *cfg = make_cfg(NULL, NULL);
    dlock_lock *nr = NULL;
    char k2[128];
    key(k2, sizeof k2, "lease-nonreentrant");
    if (cfg != NULL) {
      EXPECT(dlock_config_set(cfg, "reentrant", "0", E), DLOCK_OK);
      EXPECT(dlock_open(&nr, client, k2, strlen(k2), cfg, E), DLOCK_OK);
      dlock_config_free(cfg);
    }
    if (nr != NULL && EXPECT(dlock_try(nr, 0, E), DLOCK_OK)) {
      t1 = dlock_token(nr);
      EXPECT(dlock_try(nr, 0, E), DLOCK_E_STATE);
      EXPECT(dlock_try(nr, 200, E), DLOCK_E_STATE);
      CHECK(dlock_held(nr) == 1 && dlock_hold_count(nr) == 1 && dlock_token(nr) == t1,
            "a refused try changed the lock");
      EXPECT(dlock_release(nr, E), DLOCK_OK);
      EXPECT(dlock_release(nr, E), DLOCK_E_STATE);
    }
    dlock_close(nr);
  }

out:
  dlock_close(a);
  dlock_close(b);
}

/* A lease that is not renewed runs out; another object takes it; the first
 * learns it lost the lock and cannot touch the new owner's row. */
static void test_lease_lost(dlock_client *client) {
  dlock_error err;
  char k[128], k2[128];
  dlock_lock *l1, *l2, *l3, *l4;
  dlock_config *cfg = NULL;
  int64_t deadline, rem;
  uint64_t tok1;
  int rc = DLOCK_BUSY;

  key(k, sizeof k, "lost");
  /* a failed set keeps the earlier value */
  if (!EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) return;
  EXPECT(dlock_config_set(cfg, "ttl_ms", "300", E), DLOCK_OK);
  EXPECT(dlock_config_set(cfg, "ttl_ms", "abc", E), DLOCK_E_INVALID);
  l1 = NULL;
  EXPECT(dlock_open(&l1, client, k, strlen(k), cfg, E), DLOCK_OK);
  dlock_config_free(cfg);
  l2 = open_lock(g_other, k, NULL, NULL); /* another holder (another client) */
  if (l1 == NULL || l2 == NULL) {
    dlock_close(l1);
    dlock_close(l2);
    return;
  }

  if (!EXPECT(dlock_try(l1, 0, E), DLOCK_OK)) goto out;
  tok1 = dlock_token(l1);
  rem = dlock_remaining_ms(l1);
  CHECK(rem > 0 && rem <= 300, "remaining_ms of a 300 ms lease: %ld", (long)rem);

  /* no renew: the second object polls until it gets it */
  deadline = now_ms() + 15000;
  while (now_ms() < deadline) {
    rc = dlock_try(l2, 500, junk(&err));
    if (rc != DLOCK_BUSY) break;
  }
  CHECK(rc == DLOCK_OK, "a second object never took an expired 300 ms lease: %s: %s",
        dlock_code_name(rc), msg_of(&err));
  if (rc != DLOCK_OK) goto out;
  CHECK(dlock_token(l2) > tok1, "the taker's token %llu must exceed the loser's %llu",
        (unsigned long long)dlock_token(l2), (unsigned long long)tok1);
  CHECK(dlock_state(l1) == DLOCK_STATE_LOST, "state of an expired lease: %d (want LOST)",
        dlock_state(l1));
  CHECK(dlock_held(l1) == 0, "an expired lease reports held");
  CHECK(dlock_remaining_ms(l1) == 0, "remaining of an expired lease: %ld",
        (long)dlock_remaining_ms(l1));

  EXPECT(dlock_renew(l1, E), DLOCK_E_LOST);
  CHECK(dlock_state(l1) == DLOCK_STATE_LOST, "state after a lost renew: %d", dlock_state(l1));
  EXPECT(dlock_release(l1, E), DLOCK_E_LOST);
  CHECK(dlock_held(l2) == 1, "the new holder lost it when the old one released");
  EXPECT(dlock_renew(l2, E), DLOCK_OK); /* its row was left alone */
  EXPECT(dlock_try(l1, 0, E), DLOCK_BUSY);
  EXPECT(dlock_release(l2, E), DLOCK_OK);

  /* expired by its own clock, nobody took it: release reports LOST, and the
   * lock is free right after */
  key(k2, sizeof k2, "lost2");
  l3 = open_lock(client, k2, NULL, "200");
  l4 = open_lock(g_other, k2, NULL, NULL);
  if (l3 != NULL && l4 != NULL && EXPECT(dlock_try(l3, 0, E), DLOCK_OK)) {
    deadline = now_ms() + 5000;
    while (dlock_state(l3) == DLOCK_STATE_HELD && now_ms() < deadline) sleep_ms(20);
    CHECK(dlock_state(l3) == DLOCK_STATE_LOST, "a 200 ms lease is not LOST after 5 s: %d",
          dlock_state(l3));
    EXPECT(dlock_release(l3, E), DLOCK_E_LOST);
    CHECK(dlock_state(l3) == DLOCK_STATE_LOST, "state after a LOST release: %d",
          dlock_state(l3));
    EXPECT(dlock_try(l4, 0, E), DLOCK_OK);
    EXPECT(dlock_release(l4, E), DLOCK_OK);
    /* a lost lock object may acquire again */
    EXPECT(dlock_try(l3, 0, E), DLOCK_OK);
    CHECK(dlock_state(l3) == DLOCK_STATE_HELD, "re-acquired lock state %d", dlock_state(l3));
    EXPECT(dlock_release(l3, E), DLOCK_OK);
  }
  dlock_close(l3);
  dlock_close(l4);

out:
  dlock_close(l1);
  dlock_close(l2);
}

/* ---- row locks ---------------------------------------------------------- */

static void test_row(dlock_client *client) {
  dlock_error err;
  char k[128], krow[128], k1[128], k2[128], k3[128], kn[128], kd[128];
  dlock_lock *r1, *r2, *lease;
  const char *p[2];
  int64_t affected, t0, took;
  uint64_t t1;
  const char *ins = "INSERT INTO capi_biz (k, v) VALUES (?, ?)";

  key(k, sizeof k, "row");
  key(k1, sizeof k1, "biz-commit");
  key(k2, sizeof k2, "biz-rollback");
  key(k3, sizeof k3, "biz-close");
  key(kn, sizeof kn, "biz-null");
  key(kd, sizeof kd, "biz-%");
  r1 = open_lock(client, k, DLOCK_MODE_ROW, NULL);
  r2 = open_lock(g_other, k, DLOCK_MODE_ROW, NULL);
  if (r1 == NULL || r2 == NULL) goto out;

  create_biz_table(client);

  /* before acquisition: no exec, rollback or release */
  EXPECT(dlock_exec(r1, ins, NULL, 0, NULL, E), DLOCK_E_STATE);
  EXPECT(dlock_rollback(r1, E), DLOCK_E_STATE);
  EXPECT(dlock_release(r1, E), DLOCK_E_STATE);

  /* acquire */
  if (!EXPECT(dlock_try(r1, 0, E), DLOCK_OK)) goto out;
  t1 = dlock_token(r1);
  CHECK(dlock_state(r1) == DLOCK_STATE_HELD && dlock_held(r1) == 1, "row lock not held");
  CHECK(dlock_remaining_ms(r1) == -1, "remaining_ms of a row lock: %ld (want -1)",
        (long)dlock_remaining_ms(r1));
  CHECK(t1 == 0, "a row lock has token %llu (want 0: row locks carry none)", (unsigned long long)t1);
  CHECK(dlock_owner(r1)[0] != '\0', "row lock owner is empty");
  EXPECT(dlock_try(r1, 0, E), DLOCK_OK); /* reentrant */
  CHECK(dlock_hold_count(r1) == 2 && dlock_token(r1) == t1, "row reentry: count %d",
        dlock_hold_count(r1));
  EXPECT(dlock_release(r1, E), DLOCK_OK); /* inner: no COMMIT yet */
  CHECK(dlock_held(r1) == 1 && dlock_hold_count(r1) == 1, "an inner release freed the row lock");
  EXPECT(dlock_renew(r1, E), DLOCK_OK);
  EXPECT(dlock_begin(r1, E), DLOCK_OK); /* row locks are always in their transaction */

  /* busy for another object */
  EXPECT(dlock_try(r2, 0, E), DLOCK_BUSY);
  t0 = now_ms();
  EXPECT(dlock_try(r2, 300, E), DLOCK_BUSY);
  took = now_ms() - t0;
  CHECK(took >= 300 && took < 300 + 1500, "row try(wait 300) on a busy lock took %ld ms",
        (long)took);
  CHECK(dlock_held(r2) == 0, "busy left r2 held");

  /* work inside the lock's transaction */
  p[0] = k1;
  p[1] = "committed";
  affected = -1;
  EXPECT(dlock_exec(r1, ins, p, 2, &affected, E), DLOCK_OK);
  CHECK(affected == 1, "INSERT affected %ld rows", (long)affected);
  p[0] = kn;
  p[1] = NULL; /* SQL NULL */
  EXPECT(dlock_exec(r1, ins, p, 2, NULL, E), DLOCK_OK);
  /* a statement error is reported and leaves the lock held */
  EXPECT(dlock_exec(r1, "INSERT INTO capi_no_such_table_xyz VALUES (1)", NULL, 0, NULL, E),
         DLOCK_E_DB);
  CHECK(err.server_errno == 1146, "missing table: server_errno %d (want 1146)", err.server_errno);
  p[0] = k1;
  CHECK(dlock_exec(r1, ins, p, 1, NULL, junk(&err)) < 0,
        "exec with too few parameters must fail");
  CHECK(dlock_held(r1) == 1, "a failed statement dropped the row lock");
  EXPECT(dlock_try(r2, 0, E), DLOCK_BUSY);

  /* release = COMMIT: the rows are visible to the next holder */
  EXPECT(dlock_release(r1, E), DLOCK_OK);
  CHECK(dlock_state(r1) == DLOCK_STATE_IDLE, "row state after release: %d", dlock_state(r1));
  EXPECT(dlock_release(r1, E), DLOCK_E_STATE);
  EXPECT(dlock_rollback(r1, E), DLOCK_E_STATE);
  EXPECT(dlock_exec(r1, ins, p, 2, NULL, E), DLOCK_E_STATE);
  if (EXPECT(dlock_try(r2, 0, E), DLOCK_OK)) {
    CHECK(dlock_token(r2) == 0, "a row lock has token %llu (want 0: row locks carry none)",
          (unsigned long long)dlock_token(r2));
    p[0] = k1;
    affected = -1;
    EXPECT(dlock_exec(r2, "UPDATE capi_biz SET v = 'changed' WHERE k = ? AND v = 'committed'", p,
                      1, &affected, E),
           DLOCK_OK);
    CHECK(affected == 1, "the committed row is not visible after release (affected %ld)",
          (long)affected);
    p[0] = kn;
    affected = -1;
    EXPECT(dlock_exec(r2, "UPDATE capi_biz SET v = 'x' WHERE k = ? AND v IS NULL", p, 1, &affected,
                      E),
           DLOCK_OK);
    CHECK(affected == 1, "a NULL parameter was not stored as SQL NULL (affected %ld)",
          (long)affected);
    /* rollback discards this round's changes */
    EXPECT(dlock_rollback(r2, E), DLOCK_OK);
    CHECK(dlock_state(r2) == DLOCK_STATE_IDLE, "row state after rollback: %d", dlock_state(r2));
    EXPECT(dlock_rollback(r2, E), DLOCK_E_STATE);
  }

  /* rollback discards an insert (and ends every reentrant hold); the
   * earlier update was discarded too */
  if (EXPECT(dlock_try(r1, 0, E), DLOCK_OK)) {
    EXPECT(dlock_try(r1, 0, E), DLOCK_OK);
    p[0] = k2;
    p[1] = "rolled back";
    EXPECT(dlock_exec(r1, ins, p, 2, &affected, E), DLOCK_OK);
    EXPECT(dlock_rollback(r1, E), DLOCK_OK);
    CHECK(dlock_state(r1) == DLOCK_STATE_IDLE && dlock_hold_count(r1) == 0,
          "rollback must end the transaction and every hold (state %d, count %d)",
          dlock_state(r1), dlock_hold_count(r1));
  }
  if (EXPECT(dlock_try(r1, 0, E), DLOCK_OK)) {
    p[0] = k2;
    affected = -1;
    EXPECT(dlock_exec(r1, "DELETE FROM capi_biz WHERE k = ?", p, 1, &affected, E), DLOCK_OK);
    CHECK(affected == 0, "a rolled-back insert is visible (deleted %ld rows)", (long)affected);
    p[0] = k1;
    affected = -1;
    EXPECT(dlock_exec(r1, "UPDATE capi_biz SET v = 'again' WHERE k = ? AND v = 'committed'", p, 1,
                      &affected, E),
           DLOCK_OK);
    CHECK(affected == 1, "a rolled-back update is visible (affected %ld)", (long)affected);
    p[0] = kn;
    affected = -1;
    EXPECT(dlock_exec(r1, "UPDATE capi_biz SET v = 'y' WHERE k = ? AND v IS NULL", p, 1,
                      &affected, E),
           DLOCK_OK);
    CHECK(affected == 1, "a rolled-back update of the NULL row is visible (affected %ld)",
          (long)affected);
    EXPECT(dlock_release(r1, E), DLOCK_OK);
  }

  /* closing a held row lock rolls back and frees it */
  if (EXPECT(dlock_try(r1, 0, E), DLOCK_OK)) {
    p[0] = k3;
    p[1] = "closed";
    EXPECT(dlock_exec(r1, ins, p, 2, NULL, E), DLOCK_OK);
    dlock_close(r1);
    r1 = NULL;
    if (EXPECT(dlock_try(r2, 0, E), DLOCK_OK)) {
      affected = -1;
      p[0] = k3;
      EXPECT(dlock_exec(r2, "DELETE FROM capi_biz WHERE k = ?", p, 1, &affected, E), DLOCK_OK);
      CHECK(affected == 0, "closing a held row lock committed its work (deleted %ld)",
            (long)affected);
      /* clean up this run's rows */
      p[0] = kd;
      EXPECT(dlock_exec(r2, "DELETE FROM capi_biz WHERE k LIKE ?", p, 1, &affected, E), DLOCK_OK);
      EXPECT(dlock_release(r2, E), DLOCK_OK);
    }
  }

  /* exec and rollback belong to row locks only */
  key(krow, sizeof krow, "row-vs-lease");
  lease = open_lock(client, krow, DLOCK_MODE_LEASE, NULL);
  if (lease != NULL) {
    EXPECT(dlock_exec(lease, "SELECT 1", NULL, 0, NULL, E), DLOCK_E_STATE);
    EXPECT(dlock_rollback(lease, E), DLOCK_E_STATE);
    if (EXPECT(dlock_try(lease, 0, E), DLOCK_OK)) {
      EXPECT(dlock_exec(lease, "SELECT 1", NULL, 0, NULL, E), DLOCK_E_STATE);
      EXPECT(dlock_rollback(lease, E), DLOCK_E_STATE);
      CHECK(dlock_held(lease) == 1, "a refused rollback dropped the lease");
      EXPECT(dlock_release(lease, E), DLOCK_OK);
    }
    dlock_close(lease);
  }

out:
  dlock_close(r1);
  dlock_close(r2);
}

/* ---- keys ------------------------------------------------------------------ */

/* Both keys can be held at once: they are different locks. */
static void expect_distinct(dlock_client *client, const char *mode, const char *a, size_t alen,
                            const char *b, size_t blen, const char *what) {
  dlock_error err;
  dlock_lock *la = open_lock_n(client, a, alen, mode, NULL);
  dlock_lock *lb = open_lock_n(client, b, blen, mode, NULL);
  if (la != NULL && lb != NULL) {
    int ra = dlock_try(la, 0, junk(&err));
    int rb = dlock_try(lb, 0, junk(&err));
    CHECK(ra == DLOCK_OK && rb == DLOCK_OK,
          "%s (%s): both must be held at once, got %s and %s: %s", what, mode,
          dlock_code_name(ra), dlock_code_name(rb), msg_of(&err));
    if (ra == DLOCK_OK) EXPECT(dlock_release(la, E), DLOCK_OK);
    if (rb == DLOCK_OK) EXPECT(dlock_release(lb, E), DLOCK_OK);
  }
  dlock_close(la);
  dlock_close(lb);
}

/* A key round-trips: acquire, the accessor gives the same bytes, another
 * object is busy, release. */
static void expect_key_works(dlock_client *client, const char *mode, const char *k, size_t len,
                             const char *what) {
  dlock_error err;
  size_t got_len = 0;
  const char *got;
  dlock_lock *a = open_lock_n(client, k, len, mode, NULL);
  dlock_lock *b = open_lock_n(g_other, k, len, mode, NULL);
  if (a != NULL && b != NULL) {
    int rc = dlock_try(a, 0, junk(&err));
    CHECK(rc == DLOCK_OK, "key %s (%s): try returned %s: %s", what, mode, dlock_code_name(rc),
          msg_of(&err));
    got = dlock_key(a, &got_len);
    CHECK(got_len == len && memcmp(got, k, len) == 0, "key %s: dlock_key gives other bytes",
          what);
    if (rc == DLOCK_OK) {
      rc = dlock_try(b, 0, junk(&err));
      CHECK(rc == DLOCK_BUSY, "key %s (%s): a second object got %s, want BUSY", what, mode,
            dlock_code_name(rc));
      if (rc == DLOCK_OK) dlock_release(b, NULL);
      EXPECT(dlock_release(a, E), DLOCK_OK);
    }
  }
  dlock_close(a);
  dlock_close(b);
}

static void test_keys(dlock_client *client) {
  static const char *const nasty[] = {
      "'; DROP TABLE distributed_lock; --",
      "'; DROP TABLE fixed_lock; --",
      "\\",
      "\\\\'",
      "'",
      "''",
      "\"",
      "`",
      "%",
      "_",
      "a%b_c",
      "' OR '1'='1",
      "\\0\\n\\Z",
      "\x01\x02\n\r\t\x7f",
      "\xff\xfe\xc3\x28",
      "${x}$(x)",
  };
  static const char *const modes[] = {DLOCK_MODE_LEASE, DLOCK_MODE_ROW};
  dlock_error err;
  dlock_lock *l;
  char big[600], a[128], b[128], kk[160];
  size_t i, m;
  char withnul[64];
  size_t nlen;
  char *huge;

  /* invalid keys */
  l = (dlock_lock *)&err;
  EXPECT(dlock_open(&l, client, "", 0, NULL, E), DLOCK_E_INVALID);
  CHECK(l == NULL, "a refused open left *out non-NULL");
  EXPECT(dlock_open(&l, client, "abc", 0, NULL, E), DLOCK_E_INVALID);
  memset(big, 'k', sizeof big);
  memcpy(big, g_prefix, strlen(g_prefix));
  EXPECT(dlock_open(&l, client, big, 513, NULL, E), DLOCK_E_INVALID);
  CHECK(strstr(err.message, "maximum") != NULL, "a 513-byte key: the message should say the "
        "maximum: \"%s\"", msg_of(&err));
  huge = (char *)malloc(100000);
  if (huge != NULL) {
    memset(huge, 'h', 100000);
    EXPECT(dlock_open(&l, client, huge, 100000, NULL, E), DLOCK_E_INVALID);
    free(huge);
  }
  nlen = (size_t)snprintf(withnul, sizeof withnul, "%sab", g_prefix);
  withnul[nlen] = '\0';
  memcpy(withnul + nlen + 1, "cd", 3);
  EXPECT(dlock_open(&l, client, withnul, nlen + 3, NULL, E), DLOCK_E_INVALID);
  CHECK(l == NULL, "a refused open left *out non-NULL");
  nlen = 2;
  EXPECT(dlock_open(&l, client, "\0x", nlen, NULL, E), DLOCK_E_INVALID);

  for (m = 0; m < 2; ++m) {
    const char *mode = modes[m];
    /* 512 bytes is the maximum and works (a distinct 512-byte key per mode) */
    big[strlen(g_prefix)] = mode[0];
    expect_key_works(client, mode, big, 512, "of 512 bytes");

    /* byte-for-byte comparison */
    snprintf(a, sizeof a, "%sKey-%s", g_prefix, mode);
    snprintf(b, sizeof b, "%skey-%s", g_prefix, mode);
    expect_distinct(client, mode, a, strlen(a), b, strlen(b), "Key vs key");
    snprintf(a, sizeof a, "%sk-%s", g_prefix, mode);
    snprintf(b, sizeof b, "%sk-%s ", g_prefix, mode);
    expect_distinct(client, mode, a, strlen(a), b, strlen(b), "trailing space");
    snprintf(a, sizeof a, "%s\xc3\xa9-%s", g_prefix, mode); /* é, NFC */
    snprintf(b, sizeof b, "%se-%s", g_prefix, mode);
    expect_distinct(client, mode, a, strlen(a), b, strlen(b), "NFC e-acute vs e");
    snprintf(b, sizeof b, "%se\xcc\x81-%s", g_prefix, mode); /* é, NFD */
    expect_distinct(client, mode, a, strlen(a), b, strlen(b), "NFC vs NFD e-acute");
    snprintf(a, sizeof a, "%sa-%s", g_prefix, mode);
    snprintf(b, sizeof b, "%sa-%s\x01", g_prefix, mode);
    expect_distinct(client, mode, a, strlen(a), b, strlen(b), "trailing control byte");

    /* SQL metacharacters are just bytes */
    for (i = 0; i < sizeof nasty / sizeof nasty[0]; ++i) {
      snprintf(kk, sizeof kk, "%s#%s%s", nasty[i], g_prefix, mode);
      expect_key_works(client, mode, kk, strlen(kk), nasty[i]);
    }
    /* wildcards do not match other keys: "%", "_" and "a" at once */
    snprintf(a, sizeof a, "%%%s-wild-%s", g_prefix, mode);
    snprintf(b, sizeof b, "x%s-wild-%s", g_prefix, mode);
    expect_distinct(client, mode, a, strlen(a), b, strlen(b), "% vs x");
    snprintf(a, sizeof a, "_%s-wild-%s", g_prefix, mode);
    expect_distinct(client, mode, a, strlen(a), b, strlen(b), "_ vs x");
  }

  /* the lock tables survived all that */
  for (m = 0; m < 2; ++m) {
    snprintf(kk, sizeof kk, "%safter-nasty-%s", g_prefix, modes[m]);
    l = open_lock(client, kk, modes[m], NULL);
    if (l != NULL) {
      int rc = dlock_try(l, 0, junk(&err));
      CHECK(rc == DLOCK_OK, "%s lock after the SQL-metacharacter keys: %s: %s (table dropped?)",
            modes[m], dlock_code_name(rc), msg_of(&err));
      if (rc == DLOCK_OK) EXPECT(dlock_release(l, E), DLOCK_OK);
      dlock_close(l);
    }
  }
}

/* ---- wait_ms bounds ------------------------------------------------------ */

/* Every wait is a wait: a negative one is no limit (see test_no_limit for a
 * busy lock), and so is one past the clock's range; on a free lock each
 * returns at once, holding it. */
static void test_wait_bounds(dlock_client *client) {
  static const int64_t waits[] = {-1, -1000, INT64_MIN, 0, 86400001, INT64_MAX};
  dlock_error err;
  char k[128];
  size_t i, m;
  static const char *const modes[] = {DLOCK_MODE_LEASE, DLOCK_MODE_ROW};

  for (m = 0; m < 2; ++m) {
    dlock_lock *l;
    snprintf(k, sizeof k, "%swait-%s", g_prefix, modes[m]);
    l = open_lock(client, k, modes[m], NULL);
    if (l == NULL) continue;
    for (i = 0; i < sizeof waits / sizeof waits[0]; ++i) {
      int64_t t0 = now_ms();
      int rc = dlock_try(l, waits[i], junk(&err));
      CHECK(rc == DLOCK_OK && now_ms() - t0 < 2000,
            "%s try(wait_ms %lld) on a free lock returned %s after %ld ms: %s", modes[m],
            (long long)waits[i], dlock_code_name(rc), (long)(now_ms() - t0), msg_of(&err));
      EXPECT(dlock_wait_lost(l, 0, E), DLOCK_E_TIMEOUT);
      EXPECT(dlock_release(l, E), DLOCK_OK);
      EXPECT(dlock_wait_lost(l, waits[i], E), DLOCK_OK); /* not held: at once, any wait */
    }
    dlock_close(l);
  }
}

/* ---- options: client keys on a lock, pool bound --------------------------- */

static void test_options(void) {
  dlock_error err;
  dlock_config *cfg = NULL;
  dlock_client *c;
  dlock_lock *row, *lease, *l = NULL;
  char k1[128], k2[128];
  int rc;
  int64_t t0;

  if (!EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) return;
  EXPECT(dlock_config_set(cfg, "pool", "1", E), DLOCK_OK);
  c = open_client(g_url, cfg);
  if (c == NULL) {
    dlock_config_free(cfg);
    return;
  }
  /* a client option is not a lock option */
  key(k1, sizeof k1, "opt");
  EXPECT(dlock_open(&l, c, k1, strlen(k1), cfg, E), DLOCK_E_INVALID);
  CHECK(l == NULL, "a refused open left *out non-NULL");
  dlock_config_free(cfg);

  /* pool=1: a held row lock keeps the only connection; others get POOL */
  key(k1, sizeof k1, "pool-row");
  key(k2, sizeof k2, "pool-lease");
  row = open_lock(c, k1, DLOCK_MODE_ROW, NULL);
  lease = open_lock(c, k2, NULL, NULL);
  if (row != NULL && lease != NULL && EXPECT(dlock_try(row, 0, E), DLOCK_OK)) {
    t0 = now_ms();
    rc = dlock_try(lease, 0, junk(&err));
    CHECK(rc == DLOCK_E_POOL, "pool=1 with a held row lock: try returned %s: %s (want POOL)",
          dlock_code_name(rc), msg_of(&err));
    CHECK(now_ms() - t0 < 5000, "waiting for a pool connection took %ld ms",
          (long)(now_ms() - t0));
    if (rc == DLOCK_OK) dlock_release(lease, NULL);
    EXPECT(dlock_release(row, E), DLOCK_OK);
    EXPECT(dlock_try(lease, 0, E), DLOCK_OK);
    EXPECT(dlock_release(lease, E), DLOCK_OK);
  }
  dlock_close(row);
  dlock_close(lease);
  dlock_client_close(c);
}

/* ---- a background thread running a few calls on one lock ----------------- */

enum { BG_TRY, BG_RELEASE, BG_WAIT_LOST, BG_ABORT };

struct bg {
  pthread_t th;
  pthread_mutex_t mu;
  int done;
  dlock_lock *lock;
  int nops;
  int op[4];
  int64_t arg[4];
  int rc[4];
  int64_t took[4]; /* ms */
  char msg[4][512];
};

static void *bg_main(void *p) {
  struct bg *b = (struct bg *)p;
  int i;
  for (i = 0; i < b->nops; ++i) {
    dlock_error err;
    int64_t t0 = now_ms();
    int rc = DLOCK_E_INTERNAL;
    switch (b->op[i]) {
      case BG_TRY: rc = dlock_try(b->lock, b->arg[i], &err); break;
      case BG_RELEASE: rc = dlock_release(b->lock, &err); break;
      case BG_WAIT_LOST: rc = dlock_wait_lost(b->lock, b->arg[i], &err); break;
      case BG_ABORT: rc = dlock_abort(b->lock, &err); break;
      default: err.message[0] = '\0'; break;
    }
    b->rc[i] = rc;
    b->took[i] = now_ms() - t0;
    snprintf(b->msg[i], sizeof b->msg[i], "%s", err.message);
  }
  pthread_mutex_lock(&b->mu);
  b->done = 1;
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* Starts a thread running ops (pairs of op, arg) on lock. */
static int bg_start(struct bg *b, dlock_lock *lock, int nops, const int *ops, const int64_t *args) {
  int i;
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  b->lock = lock;
  b->nops = nops;
  for (i = 0; i < nops; ++i) {
    b->op[i] = ops[i];
    b->arg[i] = args[i];
  }
  if (pthread_create(&b->th, NULL, bg_main, b) != 0) {
    CHECK(0, "pthread_create failed");
    return 0;
  }
  return 1;
}

static int bg_done(struct bg *b) {
  int d;
  pthread_mutex_lock(&b->mu);
  d = b->done;
  pthread_mutex_unlock(&b->mu);
  return d;
}

static void bg_join(struct bg *b) {
  pthread_join(b->th, NULL);
  pthread_mutex_destroy(&b->mu);
}

/* Calls dlock_cancel on the thread's lock until the thread is done (a cancel
 * only affects calls already running, so it is repeated); 1 when it finished
 * within limit_ms. */
static int cancel_until_done(struct bg *b, int64_t limit_ms) {
  int64_t deadline = now_ms() + limit_ms;
  int bad = DLOCK_OK;
  while (!bg_done(b) && now_ms() < deadline) {
    int rc = dlock_cancel(b->lock);
    if (rc != DLOCK_OK) bad = rc;
    sleep_ms(20);
  }
  CHECK(bad == DLOCK_OK, "dlock_cancel returned %s", dlock_code_name(bad));
  return bg_done(b);
}

/* ---- the business table ------------------------------------------------ */

/* DDL on an admin connection: a row lock's transaction, in a lock round of
 * its own. dlock_exec refuses DDL (it commits implicitly, ending the lock's
 * transaction); hidden in an executable comment (slash-star-bang) it passes the
 * keyword check, and the server's in-transaction flag then reports the row
 * lock as lost. */
static void admin_ddl(dlock_client *client, const char *ddl) {
  dlock_error err;
  char k[128];
  dlock_lock *r = open_lock(client, key(k, sizeof k, "admin-ddl"), DLOCK_MODE_ROW, NULL);
  if (r != NULL && EXPECT(dlock_try(r, 5000, E), DLOCK_OK)) {
    int rc = dlock_exec(r, ddl, NULL, 0, NULL, E);
    CHECK(rc == DLOCK_E_LOST || rc == DLOCK_OK, "%s returned %s: %s", ddl, dlock_code_name(rc),
          msg_of(&err));
    rc = dlock_release(r, E);
    CHECK(rc == DLOCK_E_LOST || rc == DLOCK_OK, "release returned %s", dlock_code_name(rc));
  }
  dlock_close(r);
}

static void create_biz_table(dlock_client *client) {
  admin_ddl(client,
            "/*!CREATE TABLE IF NOT EXISTS capi_biz (k VARCHAR(200) NOT NULL PRIMARY KEY, "
            "v VARCHAR(200) NULL) ENGINE=InnoDB */");
}

/* Rows of capi_biz with this k (and v, unless v is NULL), counted by a
 * DELETE that is rolled back; -1 when it cannot tell. */
static int64_t biz_count(dlock_client *client, const char *k, const char *v) {
  dlock_error err;
  char vk[128];
  int64_t n = -1;
  const char *p[2];
  dlock_lock *r = open_lock(client, key(vk, sizeof vk, "biz-verify"), DLOCK_MODE_ROW, NULL);
  if (r != NULL && EXPECT(dlock_try(r, 5000, E), DLOCK_OK)) {
    p[0] = k;
    p[1] = v;
    if (v != NULL)
      EXPECT(dlock_exec(r, "DELETE FROM capi_biz WHERE k = ? AND v = ?", p, 2, &n, E), DLOCK_OK);
    else
      EXPECT(dlock_exec(r, "DELETE FROM capi_biz WHERE k = ?", p, 1, &n, E), DLOCK_OK);
    EXPECT(dlock_rollback(r, E), DLOCK_OK);
  }
  dlock_close(r);
  return n;
}

/* ---- lease transactions: begin / exec / release commits both ------------- */

static void test_lease_txn(dlock_client *client) {
  dlock_error err;
  char k[128], kb1[128], kb2[128], kb3[128], kl[128];
  const char *p[2];
  const char *ins = "INSERT INTO capi_biz (k, v) VALUES (?, ?)";
  int64_t affected, deadline;
  int rc = DLOCK_BUSY;
  dlock_lock *l = open_lock(client, key(k, sizeof k, "txn"), NULL, NULL);
  dlock_lock *l1 = NULL, *l2 = NULL;

  key(kb1, sizeof kb1, "txn-commit");
  key(kb2, sizeof kb2, "txn-rollback");
  key(kb3, sizeof kb3, "txn-lost");
  if (l == NULL) return;
  EXPECT(dlock_begin(l, E), DLOCK_E_STATE); /* not held */
  if (!EXPECT(dlock_try(l, 0, E), DLOCK_OK)) goto out;
  EXPECT(dlock_exec(l, ins, NULL, 0, NULL, E), DLOCK_E_STATE); /* no transaction yet */
  EXPECT(dlock_rollback(l, E), DLOCK_E_STATE);
  EXPECT(dlock_begin(l, E), DLOCK_OK);
  EXPECT(dlock_begin(l, E), DLOCK_E_STATE); /* one transaction at a time */
  p[0] = kb1;
  p[1] = "lease-txn";
  affected = -1;
  EXPECT(dlock_exec(l, ins, p, 2, &affected, E), DLOCK_OK);
  CHECK(affected == 1, "INSERT in a lease transaction affected %ld", (long)affected);
  EXPECT(dlock_release(l, E), DLOCK_OK); /* commits both */
  CHECK(dlock_state(l) == DLOCK_STATE_IDLE, "state after a transactional release: %d",
        dlock_state(l));
  CHECK(biz_count(client, kb1, "lease-txn") == 1,
        "release did not commit the lease transaction's insert");

  /* rollback discards the transaction and keeps the lease */
  if (EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
    EXPECT(dlock_begin(l, E), DLOCK_OK);
    p[0] = kb2;
    EXPECT(dlock_exec(l, ins, p, 2, NULL, E), DLOCK_OK);
    EXPECT(dlock_rollback(l, E), DLOCK_OK);
    CHECK(dlock_held(l) == 1, "rollback of a lease transaction dropped the lease");
    EXPECT(dlock_exec(l, ins, p, 2, NULL, E), DLOCK_E_STATE); /* the transaction is over */
    EXPECT(dlock_renew(l, E), DLOCK_OK);
    EXPECT(dlock_release(l, E), DLOCK_OK);
    CHECK(biz_count(client, kb2, NULL) == 0, "a rolled-back lease transaction was committed");
  }

  /* a lost lease rolls its transaction back and release says LOST */
  key(kl, sizeof kl, "txn-lost");
  l1 = open_lock(client, kl, NULL, "300");
  l2 = open_lock(g_other, kl, NULL, NULL);
  if (l1 != NULL && l2 != NULL && EXPECT(dlock_try(l1, 0, E), DLOCK_OK)) {
    EXPECT(dlock_begin(l1, E), DLOCK_OK);
    p[0] = kb3;
    EXPECT(dlock_exec(l1, ins, p, 2, NULL, E), DLOCK_OK);
    deadline = now_ms() + 15000;
    while (now_ms() < deadline && (rc = dlock_try(l2, 500, junk(&err))) == DLOCK_BUSY) {
    }
    CHECK(rc == DLOCK_OK, "nobody took the expired lease: %s: %s", dlock_code_name(rc),
          msg_of(&err));
    EXPECT(dlock_release(l1, E), DLOCK_E_LOST);
    CHECK(dlock_held(l2) == 1, "the new holder lost it");
    if (rc == DLOCK_OK) EXPECT(dlock_release(l2, E), DLOCK_OK);
    CHECK(biz_count(client, kb3, NULL) == 0,
          "the transaction of a lost lease was committed (must roll back)");
  }

out:
  dlock_close(l);
  dlock_close(l1);
  dlock_close(l2);
}

/* ---- dlock_abort: failed work is rolled back, the lock is free at once ------ */

static void test_abort(dlock_client *client) {
  static const struct {
    const char *name, *mode;
    int begin;       /* dlock_begin after the acquisition */
    int transaction; /* option transaction=1 */
  } forms[] = {
      {"row", DLOCK_MODE_ROW, 0, 0},
      {"lease+begin", DLOCK_MODE_LEASE, 1, 0},
      {"lease transaction=1", DLOCK_MODE_LEASE, 0, 1},
      {"lease", DLOCK_MODE_LEASE, 0, 0},
  };
  static const int ops_abort[] = {BG_ABORT};
  static const int64_t args_abort[] = {0};
  const char *ins = "INSERT INTO capi_biz (k, v) VALUES (?, ?)";
  dlock_error err;
  size_t f;

  EXPECT(dlock_abort(NULL, E), DLOCK_E_INVALID);
  EXPECT(dlock_abort_as(NULL, 7, E), DLOCK_E_INVALID);
  for (f = 0; f < sizeof forms / sizeof forms[0]; ++f) {
    char k[128], kfail[160], kok[160], suffix[64];
    const char *p[2];
    const int writes = forms[f].begin || forms[f].transaction || !strcmp(forms[f].mode, "row");
    dlock_config *cfg = make_cfg(forms[f].mode, NULL);
    dlock_lock *l = NULL, *other;
    struct bg b;
    int rc;
    snprintf(suffix, sizeof suffix, "abort-%zu", f);
    key(k, sizeof k, suffix);
    snprintf(kfail, sizeof kfail, "%s-failed", k);
    snprintf(kok, sizeof kok, "%s-ok", k);
    if (cfg != NULL && forms[f].transaction)
      EXPECT(dlock_config_set(cfg, "transaction", "1", E), DLOCK_OK);
    if (cfg != NULL) EXPECT(dlock_open(&l, client, k, strlen(k), cfg, E), DLOCK_OK);
    dlock_config_free(cfg);
    other = open_lock(g_other, k, forms[f].mode, NULL); /* another client: its own connections */
    if (l == NULL || other == NULL) goto next;

    EXPECT(dlock_abort(l, E), DLOCK_E_STATE); /* not held */
    /* work that writes a row, then fails: abort */
    if (!EXPECT(dlock_try(l, 0, E), DLOCK_OK)) goto next;
    if (forms[f].begin) EXPECT(dlock_begin(l, E), DLOCK_OK);
    p[0] = kfail;
    p[1] = "failed";
    if (writes) EXPECT(dlock_exec(l, ins, p, 2, NULL, E), DLOCK_OK);
    EXPECT(dlock_abort(l, E), DLOCK_OK);
    CHECK(dlock_state(l) == DLOCK_STATE_IDLE && dlock_hold_count(l) == 0,
          "%s: after abort: state %d, count %d", forms[f].name, dlock_state(l),
          dlock_hold_count(l));
    rc = dlock_try(other, 0, junk(&err)); /* free at once, for another client */
    CHECK(rc == DLOCK_OK, "%s: after abort another client's try(0) returned %s: %s",
          forms[f].name, dlock_code_name(rc), msg_of(&err));
    if (rc == DLOCK_OK) EXPECT(dlock_release(other, E), DLOCK_OK);
    if (writes)
      CHECK(biz_count(g_other, kfail, NULL) == 0, "%s: abort committed the failed work's row",
            forms[f].name);
    EXPECT(dlock_release(l, E), DLOCK_E_STATE); /* the hold is over */

    /* work that succeeds: release commits */
    if (writes && EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
      if (forms[f].begin) EXPECT(dlock_begin(l, E), DLOCK_OK);
      p[0] = kok;
      p[1] = "ok";
      EXPECT(dlock_exec(l, ins, p, 2, NULL, E), DLOCK_OK);
      EXPECT(dlock_release(l, E), DLOCK_OK);
      CHECK(biz_count(g_other, kok, "ok") == 1, "%s: release did not commit the work",
            forms[f].name);
    }

    /* reentrant: an abort ends every level at once; the outer release finds
     * nothing held */
    if (EXPECT(dlock_try(l, 0, E), DLOCK_OK) && EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
      CHECK(dlock_hold_count(l) == 2, "%s: count %d", forms[f].name, dlock_hold_count(l));
      EXPECT(dlock_abort(l, E), DLOCK_OK);
      CHECK(dlock_hold_count(l) == 0 && dlock_held(l) == 0, "%s: abort left count %d",
            forms[f].name, dlock_hold_count(l));
      EXPECT(dlock_release(l, E), DLOCK_E_STATE);
      EXPECT(dlock_try(other, 0, E), DLOCK_OK);
      EXPECT(dlock_release(other, E), DLOCK_OK);
    }

    /* holder=thread: another thread may not abort this thread's hold */
    if (EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
      if (bg_start(&b, l, 1, ops_abort, args_abort)) {
        bg_join(&b);
        CHECK(b.rc[0] == DLOCK_E_STATE, "%s: abort from another thread returned %s: %s",
              forms[f].name, dlock_code_name(b.rc[0]), b.msg[0]);
      }
      CHECK(dlock_held(l) == 1, "%s: another thread's abort ended the hold", forms[f].name);
      EXPECT(dlock_abort_as(l, 77, E), DLOCK_E_STATE); /* an id is another holder */
      EXPECT(dlock_abort(l, E), DLOCK_OK);
    }
    /* ... and the same id aborts what it took */
    if (EXPECT(dlock_try_as(l, 77, 0, E), DLOCK_OK)) {
      EXPECT(dlock_abort_as(l, 77, E), DLOCK_OK);
      CHECK(dlock_held(l) == 0, "%s: abort_as left it held", forms[f].name);
    }
  next:
    dlock_close(l);
    dlock_close(other);
  }
}

/* ---- no limit: a negative wait ends when acquired, cancelled or closed ------- */

/* 1 when b finished within limit_ms. */
static int bg_wait_done(struct bg *b, int64_t limit_ms) {
  int64_t deadline = now_ms() + limit_ms;
  while (!bg_done(b) && now_ms() < deadline) sleep_ms(10);
  return bg_done(b);
}

static void test_no_limit(dlock_client *client) {
  static const char *const modes[] = {DLOCK_MODE_LEASE, DLOCK_MODE_ROW};
  static const int ops_try[] = {BG_TRY};
  static const int64_t args_try[] = {-1};
  static const int ops_wait[] = {BG_WAIT_LOST};
  static const int64_t args_wait[] = {-1};
  dlock_error err;
  char k[128];
  struct bg b;
  size_t m;

  for (m = 0; m < 2; ++m) {
    dlock_lock *holder, *waiter;
    snprintf(k, sizeof k, "%snolimit-%s", g_prefix, modes[m]);
    holder = open_lock(client, k, modes[m], NULL);
    waiter = open_lock(g_other, k, modes[m], NULL);
    if (holder == NULL || waiter == NULL || !EXPECT(dlock_try(holder, 0, E), DLOCK_OK)) goto next;
    /* waits while it is held, and gets it at the release */
    if (bg_start(&b, waiter, 1, ops_try, args_try)) {
      sleep_ms(1500);
      CHECK(!bg_done(&b), "%s: try(-1) on a held lock returned %s after %ld ms", modes[m],
            dlock_code_name(b.rc[0]), (long)b.took[0]);
      EXPECT(dlock_release(holder, E), DLOCK_OK);
      CHECK(bg_wait_done(&b, 10000), "%s: try(-1) still waited 10 s after the release", modes[m]);
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_OK, "%s: try(-1) returned %s: %s", modes[m],
            dlock_code_name(b.rc[0]), b.msg[0]);
    }
    /* (the waiter is held by the background thread, which is gone: close
     * gives it back) */
    dlock_close(waiter);
    waiter = open_lock(g_other, k, modes[m], NULL);
    if (waiter == NULL || !EXPECT(dlock_try(holder, 5000, E), DLOCK_OK)) goto next;
    /* a cancel ends it */
    if (bg_start(&b, waiter, 1, ops_try, args_try)) {
      CHECK(cancel_until_done(&b, 5000), "%s: a cancelled try(-1) still waited", modes[m]);
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_E_CANCELLED, "%s: cancelled try(-1) returned %s: %s", modes[m],
            dlock_code_name(b.rc[0]), b.msg[0]);
    }
    /* wait_lost(-1): until released or cancelled */
    if (bg_start(&b, holder, 1, ops_wait, args_wait)) {
      CHECK(cancel_until_done(&b, 5000), "%s: a cancelled wait_lost(-1) still waited", modes[m]);
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_E_CANCELLED, "%s: cancelled wait_lost(-1) returned %s: %s",
            modes[m], dlock_code_name(b.rc[0]), b.msg[0]);
    }
    CHECK(dlock_held(holder) == 1, "%s: the cancels changed the hold", modes[m]);
    EXPECT(dlock_release(holder, E), DLOCK_OK);
  next:
    dlock_close(holder);
    dlock_close(waiter);
  }
}

/* ---- dlock_mode, and auto_renew on a row lock ---------------------------------- */

static void test_mode(dlock_client *client) {
  dlock_error err;
  char k1[128], k2[128], k3[128];
  dlock_config *cfg = make_cfg(DLOCK_MODE_ROW, NULL);
  dlock_lock *lease = open_lock(client, key(k1, sizeof k1, "mode-lease"), NULL, NULL);
  dlock_lock *row = open_lock(client, key(k2, sizeof k2, "mode-row"), DLOCK_MODE_ROW, NULL);
  dlock_lock *renewing = NULL;

  CHECK(lease != NULL && strcmp(dlock_mode(lease), DLOCK_MODE_LEASE) == 0, "dlock_mode(lease): %s",
        lease ? dlock_mode(lease) : "-");
  CHECK(row != NULL && strcmp(dlock_mode(row), DLOCK_MODE_ROW) == 0, "dlock_mode(row): %s",
        row ? dlock_mode(row) : "-");
  CHECK(strcmp(dlock_mode(NULL), "") == 0, "dlock_mode(NULL) is \"%s\"", dlock_mode(NULL));
  CHECK(lease == NULL || dlock_mode(lease) == dlock_mode(lease), "dlock_mode: not a static string");
  /* auto_renew=1 on a row lock: accepted, a no-op (it has no expiry) */
  if (cfg != NULL) {
    EXPECT(dlock_config_set(cfg, "auto_renew", "1", E), DLOCK_OK);
    key(k3, sizeof k3, "mode-row-auto-renew");
    EXPECT(dlock_open(&renewing, client, k3, strlen(k3), cfg, E), DLOCK_OK);
    dlock_config_free(cfg);
  }
  if (renewing != NULL && EXPECT(dlock_try(renewing, 0, E), DLOCK_OK)) {
    CHECK(dlock_remaining_ms(renewing) == -1, "row lock with auto_renew=1: remaining %ld",
          (long)dlock_remaining_ms(renewing));
    EXPECT(dlock_renew(renewing, E), DLOCK_OK);
    EXPECT(dlock_release(renewing, E), DLOCK_OK);
  }
  dlock_close(renewing);
  dlock_close(lease);
  dlock_close(row);
}

/* ---- wait_lost ------------------------------------------------------------- */

static void test_wait_lost(dlock_client *client) {
  dlock_error err;
  char k[128], k2[128], k3[128];
  int64_t t0, took;
  struct bg b;
  static const int ops_wait[] = {BG_WAIT_LOST};
  static const int64_t args_wait[] = {10000};
  dlock_lock *a = open_lock(client, key(k, sizeof k, "waitlost"), NULL, NULL);
  dlock_lock *s = open_lock(client, key(k2, sizeof k2, "waitlost-short"), NULL, "300");
  dlock_lock *r = open_lock(client, key(k3, sizeof k3, "waitlost-row"), DLOCK_MODE_ROW, NULL);
  if (a == NULL || s == NULL || r == NULL) goto out;

  /* not held: returns at once */
  t0 = now_ms();
  EXPECT(dlock_wait_lost(a, 0, E), DLOCK_OK);
  EXPECT(dlock_wait_lost(a, 5000, E), DLOCK_OK);
  CHECK(now_ms() - t0 < 1000, "wait_lost on an idle lock took %ld ms", (long)(now_ms() - t0));
  EXPECT(dlock_wait_lost(a, -1, E), DLOCK_OK); /* no limit, and nothing to wait for */
  EXPECT(dlock_wait_lost(a, 86400001, E), DLOCK_OK);

  /* held: times out */
  if (EXPECT(dlock_try(a, 0, E), DLOCK_OK)) {
    t0 = now_ms();
    EXPECT(dlock_wait_lost(a, 200, E), DLOCK_E_TIMEOUT);
    took = now_ms() - t0;
    CHECK(took >= 200 && took < 200 + 1500, "wait_lost(200) on a held lock took %ld ms",
          (long)took);
    /* released by its holder while another thread waits: OK */
    if (bg_start(&b, a, 1, ops_wait, args_wait)) {
      EXPECT(dlock_release(a, E), DLOCK_OK);
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_OK, "wait_lost in another thread returned %s after release: %s",
            dlock_code_name(b.rc[0]), b.msg[0]);
      CHECK(b.took[0] < 3000, "wait_lost noticed the release after %ld ms", (long)b.took[0]);
    } else {
      dlock_release(a, NULL);
    }
  }

  /* a lease that is not renewed: LOST soon after its ttl */
  if (EXPECT(dlock_try(s, 0, E), DLOCK_OK)) {
    t0 = now_ms();
    EXPECT(dlock_wait_lost(s, 10000, E), DLOCK_E_LOST);
    took = now_ms() - t0;
    CHECK(took < 2000, "wait_lost noticed a 300 ms lease's expiry after %ld ms", (long)took);
    CHECK(dlock_state(s) == DLOCK_STATE_LOST, "state after wait_lost said LOST: %d",
          dlock_state(s));
    dlock_release(s, NULL);
  }

  /* a row lock does not expire */
  if (EXPECT(dlock_try(r, 0, E), DLOCK_OK)) {
    EXPECT(dlock_wait_lost(r, 100, E), DLOCK_E_TIMEOUT);
    EXPECT(dlock_release(r, E), DLOCK_OK);
  }

out:
  dlock_close(a);
  dlock_close(s);
  dlock_close(r);
}

/* ---- threads: holder=thread|lock, cancel ----------------------------------- */

/* Objects of one client and key that share a hold (holder=thread,
 * reentrant) must agree on every lock option; a holder of its own is never
 * refused. (Every option: tests/core/test_exclusion.cc.) */
static void test_holders_agree(dlock_client *client) {
  dlock_error err;
  char k[128];
  int rc;
  dlock_lock *a = open_lock(client, key(k, sizeof k, "holders-agree"), NULL, NULL);
  dlock_lock *same = NULL, *own = NULL, *longer = NULL;
  dlock_config *cfg = make_cfg(NULL, "20000");

  if (a == NULL || cfg == NULL) goto out;
  rc = dlock_open(&longer, client, k, strlen(k), cfg, junk(&err));
  CHECK(rc == DLOCK_E_INVALID && longer == NULL && strstr(err.message, "ttl_ms=") != NULL &&
            strstr(err.message, "20000") != NULL,
        "a second object with another ttl_ms: %s: %s", dlock_code_name(rc), msg_of(&err));
  EXPECT(dlock_config_set(cfg, "holder", "lock", E), DLOCK_OK);
  EXPECT(dlock_open(&own, client, k, strlen(k), cfg, E), DLOCK_OK);
  same = open_lock(client, k, NULL, NULL);
  if (same != NULL && own != NULL && EXPECT(dlock_try(a, 0, E), DLOCK_OK)) {
    EXPECT(dlock_try(same, 0, E), DLOCK_OK); /* the same hold */
    CHECK(dlock_hold_count(a) == 2, "objects with equal options: count %d", dlock_hold_count(a));
    EXPECT(dlock_try(own, 0, E), DLOCK_BUSY); /* holder=lock: another holder */
    EXPECT(dlock_release(same, E), DLOCK_OK);
    EXPECT(dlock_release(a, E), DLOCK_OK);
  }
  /* once every sharing object is closed, other options are fine */
  dlock_close(a);
  dlock_close(same);
  a = same = NULL;
  EXPECT(dlock_config_set(cfg, "holder", "thread", E), DLOCK_OK);
  EXPECT(dlock_open(&longer, client, k, strlen(k), cfg, E), DLOCK_OK);
out:
  dlock_config_free(cfg);
  dlock_close(a);
  dlock_close(same);
  dlock_close(own);
  dlock_close(longer);
}

static void test_holders(dlock_client *client) {
  dlock_error err;
  char k[128], k2[128], k3[128];
  struct bg b;
  dlock_lock *t, *l, *nr;
  dlock_config *cfg;
  static const int ops_other[] = {BG_RELEASE, BG_TRY, BG_TRY};
  static const int64_t args_other[] = {0, 0, 200};
  static const int ops_lock[] = {BG_TRY, BG_RELEASE, BG_RELEASE};
  static const int64_t args_lock[] = {0, 0, 0};
  static const int ops_try[] = {BG_TRY};
  static const int64_t args_try[] = {0};

  /* holder=thread (the default): another thread neither re-enters nor
   * releases */
  t = open_lock(client, key(k, sizeof k, "holder-thread"), NULL, NULL);
  if (t != NULL && EXPECT(dlock_try(t, 0, E), DLOCK_OK)) {
    if (bg_start(&b, t, 3, ops_other, args_other)) {
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_E_STATE, "holder=thread: release from another thread returned %s: %s",
            dlock_code_name(b.rc[0]), b.msg[0]);
      CHECK(b.rc[1] == DLOCK_BUSY, "holder=thread: try(0) from another thread returned %s: %s",
            dlock_code_name(b.rc[1]), b.msg[1]);
      CHECK(b.rc[2] == DLOCK_BUSY && b.took[2] >= 200 && b.took[2] < 1700,
            "holder=thread: try(200) from another thread returned %s after %ld ms",
            dlock_code_name(b.rc[2]), (long)b.took[2]);
    }
    CHECK(dlock_held(t) == 1 && dlock_hold_count(t) == 1,
          "another thread's calls changed the hold (held %d, count %d)", dlock_held(t),
          dlock_hold_count(t));
    EXPECT(dlock_release(t, E), DLOCK_OK);
  }
  dlock_close(t);

  /* holder=lock: any thread is the same holder */
  cfg = make_cfg(NULL, NULL);
  l = NULL;
  nr = NULL;
  if (cfg != NULL) {
    EXPECT(dlock_config_set(cfg, "holder", "lock", E), DLOCK_OK);
    key(k2, sizeof k2, "holder-lock");
    EXPECT(dlock_open(&l, client, k2, strlen(k2), cfg, E),
           DLOCK_OK);
    EXPECT(dlock_config_set(cfg, "reentrant", "0", E), DLOCK_OK);
    key(k3, sizeof k3, "holder-lock-nr");
    EXPECT(dlock_open(&nr, client, k3, strlen(k3), cfg, E),
           DLOCK_OK);
    dlock_config_free(cfg);
  }
  if (l != NULL && EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
    if (bg_start(&b, l, 3, ops_lock, args_lock)) {
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_OK && b.rc[1] == DLOCK_OK && b.rc[2] == DLOCK_OK,
            "holder=lock: another thread's try/release/release returned %s/%s/%s: %s",
            dlock_code_name(b.rc[0]), dlock_code_name(b.rc[1]), dlock_code_name(b.rc[2]),
            b.msg[2]);
    }
    CHECK(dlock_held(l) == 0 && dlock_state(l) == DLOCK_STATE_IDLE,
          "holder=lock: released by another thread, but still held");
    EXPECT(dlock_release(l, E), DLOCK_E_STATE);
  }
  dlock_close(l);
  if (nr != NULL && EXPECT(dlock_try(nr, 0, E), DLOCK_OK)) {
    if (bg_start(&b, nr, 1, ops_try, args_try)) {
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_E_STATE, "holder=lock reentrant=0: try from another thread: %s",
            dlock_code_name(b.rc[0]));
    }
    EXPECT(dlock_release(nr, E), DLOCK_OK);
  }
  dlock_close(nr);
  test_holders_agree(client);
}

static void test_cancel(dlock_client *client) {
  static const char *const modes[] = {DLOCK_MODE_LEASE, DLOCK_MODE_ROW};
  static const int ops_try[] = {BG_TRY};
  static const int64_t args_try[] = {20000};
  static const int ops_wait[] = {BG_WAIT_LOST};
  static const int64_t args_wait[] = {20000};
  dlock_error err;
  char k[128];
  struct bg b;
  size_t m;

  for (m = 0; m < 2; ++m) {
    dlock_lock *holder, *waiter;
    snprintf(k, sizeof k, "%scancel-%s", g_prefix, modes[m]);
    holder = open_lock(client, k, modes[m], NULL);
    waiter = open_lock(g_other, k, modes[m], NULL);
    if (holder == NULL || waiter == NULL || !EXPECT(dlock_try(holder, 0, E), DLOCK_OK)) {
      dlock_close(holder);
      dlock_close(waiter);
      continue;
    }
    /* nothing running: a cancel is a no-op */
    CHECK(dlock_cancel(waiter) == DLOCK_OK, "dlock_cancel with nothing running");
    if (bg_start(&b, waiter, 1, ops_try, args_try)) {
      int finished = cancel_until_done(&b, 5000);
      CHECK(finished, "%s: a cancelled try(20000) was still waiting after 5 s", modes[m]);
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_E_CANCELLED, "%s: cancelled try returned %s: %s", modes[m],
            dlock_code_name(b.rc[0]), b.msg[0]);
      CHECK(b.took[0] < 5000, "%s: cancelled try returned after %ld ms", modes[m],
            (long)b.took[0]);
    }
    CHECK(dlock_held(waiter) == 0 && dlock_held(holder) == 1, "%s: cancel changed who holds it",
          modes[m]);
    /* a cancelled wait_lost */
    if (bg_start(&b, holder, 1, ops_wait, args_wait)) {
      int finished = cancel_until_done(&b, 5000);
      CHECK(finished, "%s: a cancelled wait_lost(20000) still waited after 5 s", modes[m]);
      bg_join(&b);
      CHECK(b.rc[0] == DLOCK_E_CANCELLED, "%s: cancelled wait_lost returned %s: %s", modes[m],
            dlock_code_name(b.rc[0]), b.msg[0]);
    }
    CHECK(dlock_held(holder) == 1, "%s: a cancelled wait_lost dropped the lock", modes[m]);
    EXPECT(dlock_release(holder, E), DLOCK_OK);
    /* calls started after a cancel are not affected */
    EXPECT(dlock_try(waiter, 1000, E), DLOCK_OK);
    EXPECT(dlock_release(waiter, E), DLOCK_OK);
    dlock_close(holder);
    dlock_close(waiter);
  }
}

/* A waiter in another thread gets the lock soon after the holder releases,
 * with either wake-up scheme. */
static void test_wakeup(dlock_client *client) {
  static const char *const schemes[] = {"auto", "poll"};
  static const int ops[] = {BG_TRY, BG_RELEASE};
  static const int64_t args[] = {10000, 0};
  dlock_error err;
  char k[128];
  struct bg b;
  size_t i;

  for (i = 0; i < 2; ++i) {
    dlock_config *cfg = make_cfg(NULL, NULL);
    dlock_lock *holder = NULL, *waiter = NULL;
    snprintf(k, sizeof k, "%swakeup-%s", g_prefix, schemes[i]);
    if (cfg != NULL) {
      EXPECT(dlock_config_set(cfg, "wakeup", schemes[i], E), DLOCK_OK);
      EXPECT(dlock_open(&holder, client, k, strlen(k), cfg, E), DLOCK_OK);
      EXPECT(dlock_open(&waiter, client, k, strlen(k), cfg, E), DLOCK_OK);
      dlock_config_free(cfg);
    }
    if (holder != NULL && waiter != NULL && EXPECT(dlock_try(holder, 0, E), DLOCK_OK)) {
      if (bg_start(&b, waiter, 2, ops, args)) {
        EXPECT(dlock_release(holder, E), DLOCK_OK);
        bg_join(&b);
        CHECK(b.rc[0] == DLOCK_OK && b.took[0] < 3000,
              "wakeup=%s: the waiter got %s after %ld ms (holder released at once): %s",
              schemes[i], dlock_code_name(b.rc[0]), (long)b.took[0], b.msg[0]);
        CHECK(b.rc[1] == DLOCK_OK, "wakeup=%s: the waiter's release: %s", schemes[i],
              dlock_code_name(b.rc[1]));
      } else {
        dlock_release(holder, NULL);
      }
    }
    dlock_close(holder);
    dlock_close(waiter);
  }
}

/* ---- lock options set on a client config become its defaults -------------- */

static void test_client_defaults(void) {
  dlock_error err;
  dlock_config *cfg = NULL;
  dlock_client *c;
  dlock_lock *l;
  char k[128];
  int64_t rem;

  if (!EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) return;
  EXPECT(dlock_config_set(cfg, "ttl_ms", "4000", E), DLOCK_OK);
  c = open_client(g_url, cfg);
  dlock_config_free(cfg);
  if (c == NULL) return;
  l = open_lock(c, key(k, sizeof k, "client-default-ttl"), NULL, NULL);
  if (l != NULL && EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
    rem = dlock_remaining_ms(l);
    CHECK(rem > 0 && rem <= 4000, "ttl_ms=4000 on the client config: remaining %ld", (long)rem);
    EXPECT(dlock_release(l, E), DLOCK_OK);
  }
  dlock_close(l);
  /* the lock's own config overrides the client's default */
  l = open_lock(c, key(k, sizeof k, "client-default-override"), NULL, "20000");
  if (l != NULL && EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
    rem = dlock_remaining_ms(l);
    CHECK(rem > 15000 && rem <= 20000, "ttl_ms=20000 on the lock: remaining %ld", (long)rem);
    EXPECT(dlock_release(l, E), DLOCK_OK);
  }
  dlock_close(l);
  dlock_client_close(c);

  cfg = NULL;
  if (!EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) return;
  EXPECT(dlock_config_set(cfg, "mode", "row", E), DLOCK_OK);
  c = open_client(g_url, cfg);
  dlock_config_free(cfg);
  if (c == NULL) return;
  l = open_lock(c, key(k, sizeof k, "client-default-row"), NULL, NULL);
  if (l != NULL && EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
    CHECK(dlock_remaining_ms(l) == -1, "mode=row on the client config: remaining %ld (want -1)",
          (long)dlock_remaining_ms(l));
    CHECK(strcmp(dlock_mode(l), DLOCK_MODE_ROW) == 0, "mode=row on the client config: dlock_mode %s",
          dlock_mode(l));
    EXPECT(dlock_release(l, E), DLOCK_OK);
  }
  dlock_close(l);
  dlock_client_close(c);
}

/* ---- shards (row locks) ---------------------------------------------------- */

static void test_shards(dlock_client *client) {
  dlock_error err;
  dlock_config *cfg = make_cfg(DLOCK_MODE_ROW, NULL);
  dlock_lock *s1 = NULL, *s2 = NULL;
  char k1[128], k2[128], grp[128];
  const char *kp;
  size_t len = 0;

  if (cfg == NULL) return;
  EXPECT(dlock_config_set(cfg, "shards", "1", E), DLOCK_OK);
  EXPECT(dlock_config_set(cfg, "shard_group", key(grp, sizeof grp, "grp"), E), DLOCK_OK);
  key(k1, sizeof k1, "shard-a");
  EXPECT(dlock_open(&s1, client, k1, strlen(k1), cfg, E), DLOCK_OK);
  key(k2, sizeof k2, "shard-b");
  EXPECT(dlock_open(&s2, client, k2, strlen(k2), cfg, E), DLOCK_OK);
  dlock_config_free(cfg);
  if (s1 != NULL && s2 != NULL && EXPECT(dlock_try(s1, 0, E), DLOCK_OK)) {
    /* one shard: two different keys exclude each other */
    EXPECT(dlock_try(s2, 0, E), DLOCK_BUSY);
    kp = dlock_key(s2, &len);
    CHECK(len == strlen(k2) && memcmp(kp, k2, len) == 0, "dlock_key must give the user's key");
    EXPECT(dlock_release(s1, E), DLOCK_OK);
    EXPECT(dlock_try(s2, 0, E), DLOCK_OK);
    EXPECT(dlock_release(s2, E), DLOCK_OK);
  }
  dlock_close(s1);
  dlock_close(s2);
}

/* ---- counters and events ---------------------------------------------------- */

static int counter(dlock_client *c, const char *name, uint64_t *v) {
  dlock_error err;
  *v = 0;
  return EXPECT(dlock_client_counter(c, name, v, E), DLOCK_OK);
}

/* Pops events until one of this type comes (others are skipped); 1 if found. */
static int next_event_of(dlock_client *c, int type, int64_t wait_ms, dlock_event *ev) {
  dlock_error err;
  int64_t deadline = now_ms() + wait_ms;
  for (;;) {
    int64_t left = deadline - now_ms();
    int rc = dlock_client_next_event(c, ev, left > 0 ? left : 0, &err);
    if (rc != DLOCK_OK) return 0;
    if (ev->type == type) return 1;
  }
}

static void check_event(const dlock_event *ev, int severity, const char *k, uint64_t token,
                        const char *owner, const char *what) {
  int64_t wall = (int64_t)time(NULL) * 1000;
  CHECK(ev->severity == severity, "%s event: severity %d, want %d", what, ev->severity, severity);
  CHECK(ev->key_len == strlen(k) && memcmp(ev->key, k, ev->key_len) == 0 &&
            ev->key[ev->key_len] == '\0',
        "%s event: key \"%.*s\" (%lu bytes), want \"%s\"", what, (int)ev->key_len, ev->key,
        (unsigned long)ev->key_len, k);
  CHECK(token == 0 || ev->token == token, "%s event: token %llu, want %llu", what,
        (unsigned long long)ev->token, (unsigned long long)token);
  CHECK(owner == NULL || strcmp(ev->owner, owner) == 0, "%s event: owner \"%s\", want \"%s\"",
        what, ev->owner, owner ? owner : "");
  CHECK(memchr(ev->message, '\0', sizeof ev->message) != NULL && ev->message[0] != '\0',
        "%s event: empty or unterminated message", what);
  CHECK(ev->unix_ms > wall - 3600000 && ev->unix_ms < wall + 3600000,
        "%s event: unix_ms %lld is not about now (%lld)", what, (long long)ev->unix_ms,
        (long long)wall);
}

static void test_counters_events(void) {
  static const char *const documented[] = {
      "acquisitions", "reentries", "busy", "wait_ms", "releases", "handovers", "renewals", "renew_ticks",
      "renew_statements", "lost", "max_hold_trips", "cleanup_runs", "cleanup_deleted",
      "table_rows", "events_dropped", "statements", "pool_open"};
  dlock_error err;
  dlock_client *c, *quiet;
  dlock_config *cfg;
  dlock_event ev;
  const char *const *names = dlock_counter_names();
  const char *const *n;
  uint64_t v, acq0, re0, busy0, rel0, st0, trips0, lost0, v2;
  size_t i, count = 0;
  char k[128], k2[128], owner[300];
  dlock_lock *a, *b, *m, *g1, *g2;
  int64_t t0, took, deadline;
  uint64_t tok;
  int rc = DLOCK_BUSY;

  /* the names: static, NULL-terminated, exactly the documented ones */
  CHECK(names != NULL && names == dlock_counter_names(), "dlock_counter_names must be static");
  if (names == NULL) return;
  for (n = names; *n != NULL && count < 1000; ++n) ++count;
  CHECK(count == sizeof documented / sizeof documented[0], "%lu counter names, documented %lu",
        (unsigned long)count, (unsigned long)(sizeof documented / sizeof documented[0]));
  for (i = 0; i < sizeof documented / sizeof documented[0]; ++i) {
    int found = 0;
    for (n = names; *n != NULL; ++n) found |= strcmp(*n, documented[i]) == 0;
    CHECK(found, "counter \"%s\" is documented but not in dlock_counter_names()", documented[i]);
  }

  c = open_client(g_url, NULL);
  if (c == NULL) return;
  for (n = names; *n != NULL; ++n) {
    int ok = EXPECT(dlock_client_counter(c, *n, &v, E), DLOCK_OK);
    if (!ok) fprintf(stderr, "  (counter %s)\n", *n);
  }
  v = 77;
  EXPECT(dlock_client_counter(c, "no_such_counter", &v, E), DLOCK_E_INVALID);
  CHECK(strstr(err.message, "no_such_counter") != NULL, "unknown counter not named: \"%s\"",
        msg_of(&err));
  EXPECT(dlock_client_counter(c, "", &v, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_client_counter(c, "busy", &v, NULL), DLOCK_OK);

  /* a fresh client has no events */
  EXPECT(dlock_client_next_event(c, &ev, 0, E), DLOCK_E_TIMEOUT);
  t0 = now_ms();
  EXPECT(dlock_client_next_event(c, &ev, 200, E), DLOCK_E_TIMEOUT);
  took = now_ms() - t0;
  CHECK(took >= 200 && took < 200 + 1500, "next_event(200) with none took %ld ms", (long)took);
  EXPECT(dlock_client_next_event(c, &ev, -1, E), DLOCK_E_INVALID);

  /* counters follow what happens */
  counter(c, "acquisitions", &acq0);
  counter(c, "reentries", &re0);
  counter(c, "busy", &busy0);
  counter(c, "releases", &rel0);
  counter(c, "statements", &st0);
  a = open_lock(c, key(k, sizeof k, "counters"), NULL, NULL);
  b = open_lock_own_holder(c, k); /* another holder on the same client */
  if (a != NULL && b != NULL && EXPECT(dlock_try(a, 0, E), DLOCK_OK)) {
    EXPECT(dlock_try(a, 0, E), DLOCK_OK);
    EXPECT(dlock_try(b, 0, E), DLOCK_BUSY);
    EXPECT(dlock_release(a, E), DLOCK_OK);
    EXPECT(dlock_release(a, E), DLOCK_OK);
    counter(c, "acquisitions", &v);
    CHECK(v == acq0 + 1, "acquisitions went from %llu to %llu (want +1)",
          (unsigned long long)acq0, (unsigned long long)v);
    counter(c, "reentries", &v);
    CHECK(v == re0 + 1, "reentries went from %llu to %llu (want +1)", (unsigned long long)re0,
          (unsigned long long)v);
    counter(c, "busy", &v);
    CHECK(v == busy0 + 1, "busy went from %llu to %llu (want +1)", (unsigned long long)busy0,
          (unsigned long long)v);
    counter(c, "releases", &v);
    CHECK(v == rel0 + 1, "releases went from %llu to %llu (want +1: only the outer release)",
          (unsigned long long)rel0, (unsigned long long)v);
    counter(c, "statements", &v);
    CHECK(v >= st0 + 3, "statements went from %llu to %llu", (unsigned long long)st0,
          (unsigned long long)v);
    counter(c, "pool_open", &v);
    CHECK(v >= 1 && v <= 8, "pool_open is %llu", (unsigned long long)v);
  }
  dlock_close(a);
  dlock_close(b);

  /* max hold: a manual renew past max_hold_ms is refused, with a critical event */
  cfg = make_cfg(NULL, NULL);
  m = NULL;
  if (cfg != NULL) {
    EXPECT(dlock_config_set(cfg, "max_hold_ms", "100", E), DLOCK_OK);
    key(k, sizeof k, "maxhold");
    EXPECT(dlock_open(&m, c, k, strlen(k), cfg, E), DLOCK_OK);
    dlock_config_free(cfg);
  }
  counter(c, "max_hold_trips", &trips0);
  if (m != NULL && EXPECT(dlock_try(m, 0, E), DLOCK_OK)) {
    t0 = now_ms();
    EXPECT(dlock_renew(m, E), DLOCK_OK); /* within max hold */
    while (now_ms() - t0 < 200) sleep_ms(20); /* let max_hold_ms pass (a duration, not a sync) */
    EXPECT(dlock_renew(m, E), DLOCK_E_MAX_HOLD);
    CHECK(dlock_held(m) == 1, "a refused renew must leave the lease held until it expires");
    counter(c, "max_hold_trips", &v);
    CHECK(v == trips0 + 1, "max_hold_trips went from %llu to %llu", (unsigned long long)trips0,
          (unsigned long long)v);
    if (next_event_of(c, DLOCK_EVENT_MAX_HOLD, 2000, &ev))
      check_event(&ev, DLOCK_SEVERITY_CRITICAL, k, dlock_token(m), dlock_owner(m), "max hold");
    else
      CHECK(0, "no DLOCK_EVENT_MAX_HOLD after a refused renew");
    EXPECT(dlock_release(m, E), DLOCK_OK);
  }
  dlock_close(m);

  /* release after the lease was taken: LOST, a warning event, lost counter */
  key(k2, sizeof k2, "release-gone");
  g1 = open_lock(c, k2, NULL, "200");
  g2 = open_lock_own_holder(c, k2); /* another holder on the same client */
  counter(c, "lost", &lost0);
  if (g1 != NULL && g2 != NULL && EXPECT(dlock_try(g1, 0, E), DLOCK_OK)) {
    tok = dlock_token(g1);
    snprintf(owner, sizeof owner, "%s", dlock_owner(g1));
    deadline = now_ms() + 15000;
    while (now_ms() < deadline && (rc = dlock_try(g2, 500, junk(&err))) == DLOCK_BUSY) {
    }
    CHECK(rc == DLOCK_OK, "nobody took the expired lease: %s", dlock_code_name(rc));
    EXPECT(dlock_release(g1, E), DLOCK_E_LOST);
    if (next_event_of(c, DLOCK_EVENT_RELEASE_GONE, 2000, &ev))
      check_event(&ev, DLOCK_SEVERITY_WARNING, k2, tok, owner, "release gone");
    else
      CHECK(0, "no DLOCK_EVENT_RELEASE_GONE after releasing a taken lease");
    counter(c, "lost", &v);
    /* Once per hold, whatever found the loss. */
    CHECK(v == lost0 + 1, "the lost counter moved by %lld, want 1",
          (long long)(v - lost0));
    if (rc == DLOCK_OK) EXPECT(dlock_release(g2, E), DLOCK_OK);
  }
  dlock_close(g1);
  dlock_close(g2);
  dlock_client_close(c);

  /* events=0: nothing is queued, everything is counted as dropped */
  cfg = make_cfg(NULL, NULL);
  if (cfg == NULL) return;
  EXPECT(dlock_config_set(cfg, "events", "0", E), DLOCK_OK);
  EXPECT(dlock_config_set(cfg, "max_hold_ms", "50", E), DLOCK_OK); /* a lock default */
  quiet = open_client(g_url, cfg);
  dlock_config_free(cfg);
  if (quiet == NULL) return;
  m = open_lock(quiet, key(k, sizeof k, "events-none"), NULL, NULL);
  if (m != NULL && EXPECT(dlock_try(m, 0, E), DLOCK_OK)) {
    t0 = now_ms();
    while (now_ms() - t0 < 100) sleep_ms(20);
    EXPECT(dlock_renew(m, E), DLOCK_E_MAX_HOLD);
    EXPECT(dlock_client_next_event(quiet, &ev, 0, E), DLOCK_E_TIMEOUT);
    counter(quiet, "events_dropped", &v2);
    CHECK(v2 >= 1, "events=0: events_dropped is %llu", (unsigned long long)v2);
    EXPECT(dlock_release(m, E), DLOCK_OK);
  }
  dlock_close(m);
  dlock_client_close(quiet);
}

/* ---- the watchdog: auto_renew and max hold ---------------------------------- */

static void test_auto_renew(void) {
  dlock_error err;
  dlock_client *c = open_client(g_url, NULL);
  dlock_config *cfg;
  dlock_lock *ar = NULL, *other = NULL, *mh = NULL;
  dlock_event ev;
  char k[128], k2[128], owner[300];
  int64_t t0, took;
  int drops = 0;
  uint64_t v, tok;

  if (c == NULL) return;
  /* ttl 1000 (both leases): the watchdog renews every ttl/3, so a renewal
   * may come up to 2/3 ttl late before the lease runs out. With ttl 500 that
   * was 333 ms, which a loaded CI machine running sanitizer builds side by
   * side does not always give a thread (a process stopped for 300 ms at
   * random lost the 500 ms lease in 4 runs of 10, the 500 ms max-hold one
   * before its 800 ms in 1 of 20); 667 ms it does. */
  cfg = make_cfg(NULL, "1000");
  if (cfg != NULL) {
    EXPECT(dlock_config_set(cfg, "auto_renew", "1", E), DLOCK_OK);
    key(k, sizeof k, "auto-renew");
    EXPECT(dlock_open(&ar, c, k, strlen(k), cfg, E), DLOCK_OK);
    EXPECT(dlock_config_set(cfg, "max_hold_ms", "800", E), DLOCK_OK);
    key(k2, sizeof k2, "auto-maxhold");
    EXPECT(dlock_open(&mh, c, k2, strlen(k2), cfg, E), DLOCK_OK);
    dlock_config_free(cfg);
  }
  other = open_lock_own_holder(c, k); /* another holder on the same client */

  /* a 1000 ms lease stays held for 3 ttl without manual renewal */
  if (ar != NULL && other != NULL && EXPECT(dlock_try(ar, 0, E), DLOCK_OK)) {
    t0 = now_ms();
    while (now_ms() - t0 < 3000) {
      if (dlock_held(ar) != 1) ++drops;
      sleep_ms(25);
    }
    CHECK(drops == 0, "auto_renew: the 1000 ms lease was not held at %d of the checks", drops);
    EXPECT(dlock_try(other, 0, E), DLOCK_BUSY);
    CHECK(dlock_remaining_ms(ar) > 0, "auto_renew: remaining_ms is 0");
    counter(c, "renew_ticks", &v);
    CHECK(v >= 2, "auto_renew: renew_ticks is %llu after 3 s of a 1000 ms lease",
          (unsigned long long)v);
    EXPECT(dlock_release(ar, E), DLOCK_OK);
    EXPECT(dlock_try(other, 0, E), DLOCK_OK);
    EXPECT(dlock_release(other, E), DLOCK_OK);
  }

  /* with max_hold_ms the watchdog stops, the lease runs out: events
   * MAX_HOLD then LOST, and wait_lost says LOST */
  if (mh != NULL && EXPECT(dlock_try(mh, 0, E), DLOCK_OK)) {
    tok = dlock_token(mh);
    snprintf(owner, sizeof owner, "%s", dlock_owner(mh));
    t0 = now_ms();
    EXPECT(dlock_wait_lost(mh, 10000, E), DLOCK_E_LOST);
    took = now_ms() - t0;
    CHECK(took >= 800 && took < 800 + 1000 + 2000,
          "auto_renew + max_hold_ms=800 (ttl 1000): lost after %ld ms", (long)took);
    if (next_event_of(c, DLOCK_EVENT_MAX_HOLD, 2000, &ev))
      check_event(&ev, DLOCK_SEVERITY_CRITICAL, k2, tok, owner, "watchdog max hold");
    else
      CHECK(0, "no DLOCK_EVENT_MAX_HOLD from the watchdog");
    if (next_event_of(c, DLOCK_EVENT_LOST, 2000, &ev))
      check_event(&ev, DLOCK_SEVERITY_CRITICAL, k2, tok, owner, "watchdog lost");
    else
      CHECK(0, "no DLOCK_EVENT_LOST after the watchdog stopped");
    EXPECT(dlock_renew(mh, E), DLOCK_E_LOST);
    EXPECT(dlock_release(mh, E), DLOCK_E_LOST);
  }
  dlock_close(ar);
  dlock_close(other);
  dlock_close(mh);
  dlock_client_close(c);
}

/* ---- cleanup ------------------------------------------------------------- */

/* On a lease table of its own (capi_lease), so that other tests' rows are
 * not touched. */
static void test_cleanup(void) {
  dlock_error err;
  dlock_config *cfg = NULL;
  dlock_client *c, *j;
  dlock_lock *l, *held;
  dlock_event ev;
  char k[128], k2[128];
  uint64_t t1, deleted = 12345, runs0, v;
  int64_t deadline;

  if (!EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) return;
  EXPECT(dlock_config_set(cfg, "table", "capi_lease", E), DLOCK_OK);
  EXPECT(dlock_config_set(cfg, "cleanup_grace_ms", "0", E), DLOCK_OK);
  c = open_client(g_url, cfg);
  if (c == NULL) {
    dlock_config_free(cfg);
    return;
  }
  EXPECT(dlock_client_cleanup(NULL, &deleted, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_client_cleanup(NULL, NULL, NULL), DLOCK_E_INVALID);

  l = open_lock(c, key(k, sizeof k, "cleanup"), NULL, NULL);
  held = open_lock(c, key(k2, sizeof k2, "cleanup-held"), NULL, NULL);
  if (l != NULL && held != NULL && EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
    t1 = dlock_token(l);
    EXPECT(dlock_release(l, E), DLOCK_OK);
    EXPECT(dlock_try(held, 0, E), DLOCK_OK);
    counter(c, "cleanup_runs", &runs0);
    deleted = 12345;
    EXPECT(dlock_client_cleanup(c, &deleted, E), DLOCK_OK);
    CHECK(deleted >= 1 && deleted != 12345,
          "cleanup with grace 0 deleted %llu rows (a released lease was there)",
          (unsigned long long)deleted);
    counter(c, "cleanup_runs", &v);
    CHECK(v == runs0 + 1, "cleanup_runs went from %llu to %llu", (unsigned long long)runs0,
          (unsigned long long)v);
    counter(c, "cleanup_deleted", &v);
    CHECK(v >= deleted, "cleanup_deleted is %llu, the run deleted %llu", (unsigned long long)v,
          (unsigned long long)deleted);
    counter(c, "table_rows", &v);
    CHECK(v >= 1, "table_rows after cleanup is %llu (a held lease is there)",
          (unsigned long long)v);
    if (next_event_of(c, DLOCK_EVENT_CLEANUP, 2000, &ev))
      CHECK(ev.severity == DLOCK_SEVERITY_INFO && ev.message[0] != '\0',
            "cleanup event: severity %d, message \"%s\"", ev.severity, ev.message);
    else
      CHECK(0, "no DLOCK_EVENT_CLEANUP after a cleanup that deleted rows");
    /* a held lease survives */
    CHECK(dlock_held(held) == 1, "cleanup dropped a held lease");
    EXPECT(dlock_renew(held, E), DLOCK_OK);
    /* a deleted key comes back with a larger token */
    if (EXPECT(dlock_try(l, 0, E), DLOCK_OK)) {
      CHECK(dlock_token(l) > t1, "token after cleanup deleted the key: %llu, before %llu",
            (unsigned long long)dlock_token(l), (unsigned long long)t1);
      EXPECT(dlock_release(l, E), DLOCK_OK);
    }
    EXPECT(dlock_release(held, E), DLOCK_OK);
    EXPECT(dlock_client_cleanup(c, NULL, E), DLOCK_OK); /* out_deleted may be NULL */
  }
  dlock_close(l);
  dlock_close(held);
  dlock_client_close(c);

  /* cleanup_interval_ms: the client's own thread cleans */
  EXPECT(dlock_config_set(cfg, "cleanup_interval_ms", "100", E), DLOCK_OK);
  j = open_client(g_url, cfg);
  dlock_config_free(cfg);
  if (j == NULL) return;
  deadline = now_ms() + 10000;
  v = 0;
  while (now_ms() < deadline && dlock_client_counter(j, "cleanup_runs", &v, NULL) == DLOCK_OK &&
         v == 0)
    sleep_ms(20);
  CHECK(v >= 1, "cleanup_interval_ms=100: no cleanup ran within 10 s");
  dlock_client_close(j);
}

/* ---- dlock_client_init_schema: the tables again, on an open client ------- */

/* A client of its own tables (capi_is_lease, capi_is_lease_fence,
 * capi_is_row), dropped and made again under it through an admin
 * connection (g_other, on the default tables). */
static void test_init_schema(void) {
  static const char *const drop =
      "/*!DROP TABLE IF EXISTS capi_is_lease, capi_is_lease_fence, capi_is_row */";
  dlock_error err;
  dlock_config *cfg = NULL;
  dlock_client *c;
  dlock_lock *lease, *row;
  char k[128], k2[128];
  int rc;

  EXPECT(dlock_client_init_schema(NULL, E), DLOCK_E_INVALID);
  EXPECT_NOERR(dlock_client_init_schema(NULL, NULL), DLOCK_E_INVALID);
  admin_ddl(g_other, drop); /* a clean start, whatever an earlier run left */
  if (!EXPECT(dlock_config_new(&cfg, E), DLOCK_OK)) return;
  EXPECT(dlock_config_set(cfg, "table", "capi_is_lease", E), DLOCK_OK);
  EXPECT(dlock_config_set(cfg, "row_table", "capi_is_row", E), DLOCK_OK);
  c = open_client(g_url, cfg); /* creates the three tables */
  dlock_config_free(cfg);
  if (c == NULL) return;
  EXPECT(dlock_client_init_schema(c, E), DLOCK_OK); /* idempotent */
  lease = open_lock(c, key(k, sizeof k, "init-schema-lease"), NULL, NULL);
  row = open_lock(c, key(k2, sizeof k2, "init-schema-row"), DLOCK_MODE_ROW, NULL);
  if (lease != NULL && row != NULL) {
    /* The row lock's row is known to the client before the drop. */
    if (EXPECT(dlock_try(row, 0, E), DLOCK_OK)) EXPECT(dlock_release(row, E), DLOCK_OK);

    admin_ddl(g_other, drop);
    rc = dlock_try(lease, 0, E);
    CHECK(rc == DLOCK_E_DB && err.server_errno == 1146,
          "try on a dropped lease table returned %s (server errno %d): %s", dlock_code_name(rc),
          err.server_errno, msg_of(&err));

    EXPECT(dlock_client_init_schema(c, E), DLOCK_OK);
    if (EXPECT(dlock_try(lease, 0, E), DLOCK_OK)) {
      CHECK(dlock_token(lease) >= 1, "token after init_schema: %llu",
            (unsigned long long)dlock_token(lease));
      EXPECT(dlock_release(lease, E), DLOCK_OK);
    }
    /* The client forgot the row it knew: the row lock creates it again. */
    if (EXPECT(dlock_try(row, 0, E), DLOCK_OK)) EXPECT(dlock_release(row, E), DLOCK_OK);

    /* A table of that name that is not dlock's: a clear E_DB naming it. */
    admin_ddl(g_other, "/*!DROP TABLE IF EXISTS capi_is_row */");
    admin_ddl(g_other,
              "/*!CREATE TABLE capi_is_row (lock_name INT NOT NULL PRIMARY KEY, "
              "updated_time DATETIME(6) NULL) ENGINE=InnoDB */");
    rc = dlock_client_init_schema(c, E);
    CHECK(rc == DLOCK_E_DB && err.code == DLOCK_E_DB, "init_schema over a foreign table returned %s",
          dlock_code_name(rc));
    CHECK(strstr(msg_of(&err), "capi_is_row") != NULL && strstr(msg_of(&err), "lock_name") != NULL &&
              strstr(msg_of(&err), "varbinary") != NULL,
          "the message should name the table, the column and what dlock needs: \"%s\"",
          msg_of(&err));
    /* The lease tables were fine all along: leases still work. */
    if (EXPECT(dlock_try(lease, 0, E), DLOCK_OK)) EXPECT(dlock_release(lease, E), DLOCK_OK);
  }
  dlock_close(lease);
  dlock_close(row);
  dlock_client_close(c);
  admin_ddl(g_other, drop);
}

/* ---- fork ---------------------------------------------------------------- */

/* The child tells the parent how far it got ("stage NAME") and its results
 * ("result PASSED FAILED") through a pipe. */
static void child_say(int fd, const char *what) {
  size_t n = strlen(what);
  if (write(fd, what, n) != (ssize_t)n) _exit(3);
}

/* A stuck child prints where it is stuck before it dies: the parent sends
 * SIGALRM when its 20 s run out (and alarm() does at 60 s). */
static void child_stuck(int sig) {
  static const char msg[] = "capi_test: the forked child is stuck here:\n";
  (void)sig;
  if (write(2, msg, sizeof msg - 1) < 0) _exit(4);
#ifdef CAPI_SANITIZED
  __sanitizer_print_stack_trace();
#else
  {
    void *frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  }
#endif
  _exit(4);
}

static void child_side(int fd, dlock_client *client, dlock_lock *lease, dlock_lock *row,
                       dlock_lock *autol, dlock_lock *rwait, const char *klease,
                       const char *krow) {
  dlock_error err;
  dlock_lock *l = (dlock_lock *)&err;
  dlock_client *c2 = NULL;
  const char *p[2] = {"x", "y"};
  char buf[64];
  int n;

  signal(SIGALRM, child_stuck);
  alarm(60); /* never hang the parent */
  g_passed = 0;
  g_failed = 0;
  EXPECT(dlock_release(lease, E), DLOCK_E_FORKED);
  EXPECT(dlock_try(lease, 0, E), DLOCK_E_FORKED);
  EXPECT(dlock_renew(lease, E), DLOCK_E_FORKED);
  EXPECT(dlock_begin(lease, E), DLOCK_E_FORKED);
  EXPECT(dlock_wait_lost(lease, 0, E), DLOCK_E_FORKED);
  EXPECT(dlock_renew(autol, E), DLOCK_E_FORKED);
  EXPECT(dlock_release(autol, E), DLOCK_E_FORKED);
  EXPECT(dlock_release(row, E), DLOCK_E_FORKED);
  EXPECT(dlock_rollback(row, E), DLOCK_E_FORKED);
  EXPECT(dlock_renew(row, E), DLOCK_E_FORKED);
  EXPECT(dlock_exec(row, "INSERT INTO capi_biz (k, v) VALUES (?, ?)", p, 2, NULL, E),
         DLOCK_E_FORKED);
  EXPECT(dlock_try(row, 0, E), DLOCK_E_FORKED);
  EXPECT(dlock_open(&l, client, klease, strlen(klease), NULL, E), DLOCK_E_FORKED);
  CHECK(l == NULL, "a refused open left *out non-NULL");
  /* dlock_cancel too, and it sends nothing: rwait's copy says a parent
   * thread is in a server wait, which a KILL QUERY (on a new connection,
   * counted in "statements") would interrupt. */
  {
    uint64_t before = 0, after = 0;
    int have = dlock_client_counter(client, "statements", &before, NULL) == DLOCK_OK;
    EXPECT_NOERR(dlock_cancel(rwait), DLOCK_E_FORKED);
    EXPECT_NOERR(dlock_cancel(lease), DLOCK_E_FORKED);
    EXPECT_NOERR(dlock_cancel(row), DLOCK_E_FORKED);
    if (have && dlock_client_counter(client, "statements", &after, NULL) == DLOCK_OK)
      CHECK(after == before, "dlock_cancel in the child sent %lu statements",
            (unsigned long)(after - before));
  }
  /* the parent's client must not send statements from the child either:
   * its pooled connections are the parent's sockets */
  {
    int rc = dlock_client_cleanup(client, NULL, junk(&err));
    CHECK(rc == DLOCK_E_FORKED,
          "dlock_client_cleanup on the parent's client in a forked child returned %s (want "
          "DLOCK_E_FORKED): it ran its statements on the parent's pooled connections",
          dlock_code_name(rc));
  }
  /* closing in the child only frees memory (the client has a watchdog
   * thread in the parent, which the child does not have) */
  child_say(fd, "stage dlock_close(lease)\n");
  dlock_close(lease);
  child_say(fd, "stage dlock_close(row lock)\n");
  dlock_close(row);
  child_say(fd, "stage dlock_close(auto-renewed lease)\n");
  dlock_close(autol);
  child_say(fd, "stage dlock_close(row lock a parent thread waits on)\n");
  dlock_close(rwait);
  child_say(fd, "stage dlock_client_close(parent's client, which runs a watchdog thread)\n");
  dlock_client_close(client);
  child_say(fd, "stage a client of the child's own\n");
#ifndef CAPI_ASAN

  /* a client of the child's own works, and sees the parent's locks. Its
   * pool keeps idle connections (pool_idle_ms=0), so it starts no closer
   * thread: ThreadSanitizer does not support starting threads in the child
   * of a multi-threaded fork (a real program may; TSan cannot watch it). */
  dlock_config *c2cfg = NULL;
  EXPECT(dlock_config_new(&c2cfg, E), DLOCK_OK);
  EXPECT(dlock_config_set(c2cfg, "pool_idle_ms", "0", E), DLOCK_OK);
  if (EXPECT(dlock_client_open(&c2, g_url, c2cfg, E), DLOCK_OK)) {
    dlock_lock *a = open_lock(c2, klease, NULL, NULL);
    dlock_lock *b = open_lock(c2, krow, DLOCK_MODE_ROW, NULL);
    if (a != NULL) EXPECT(dlock_try(a, 0, E), DLOCK_BUSY);
    if (b != NULL) EXPECT(dlock_try(b, 0, E), DLOCK_BUSY);
    dlock_close(a);
    dlock_close(b);
    dlock_client_close(c2);
  }
  dlock_config_free(c2cfg);
#else
  /* Not under ASan: GCC 12's AddressSanitizer takes no lock of its
   * allocator around fork() (LLVM added that in llvm-project PR 75290, for
   * LLVM 18), so a child that allocates much after a fork can find an
   * allocator lock that one of the parent's other threads (here the
   * watchdog renewing autol) held at that instant, and wait forever. It
   * did once in CI, in this stage (a new client's connections allocate far
   * more than anything above). glibc's malloc is fork-safe: the plain
   * build runs this stage. */
  (void)c2;
  (void)klease;
  (void)krow;
#endif
  n = snprintf(buf, sizeof buf, "result %d %d\n", g_passed, g_failed);
  if (n > 0) child_say(fd, buf);
  close(fd);
  fflush(stderr);
  _exit(0);
}

struct fork_waiter {
  dlock_lock *lock;
  int rc;
};

/* Waits for the row lock the parent holds, and releases it once it has it. */
static void *fork_waiter_main(void *arg) {
  struct fork_waiter *w = (struct fork_waiter *)arg;
  w->rc = dlock_try(w->lock, 20000, NULL);
  if (w->rc == DLOCK_OK) dlock_release(w->lock, NULL);
  return NULL;
}

/* 1 once a transaction waits for a row lock of held's transaction (polled
 * through InnoDB's lock waits, on held's own connection), 0 after 10 s. */
static int wait_for_row_waiter(dlock_lock *held, const char *mark) {
  dlock_error err;
  const char *p[1];
  int64_t affected = 0, deadline = now_ms() + 10000;
  p[0] = mark;
  while (now_ms() < deadline) {
    if (!EXPECT(dlock_exec(held,
                           "INSERT INTO capi_biz (k, v) SELECT ?, 'waiter' FROM "
                           "information_schema.INNODB_LOCK_WAITS w JOIN "
                           "information_schema.INNODB_TRX t ON w.blocking_trx_id = t.trx_id "
                           "WHERE t.trx_mysql_thread_id = CONNECTION_ID() LIMIT 1",
                           p, 1, &affected, E),
                DLOCK_OK))
      return 0;
    if (affected == 1) {
      EXPECT(dlock_exec(held, "DELETE FROM capi_biz WHERE k = ?", p, 1, NULL, E), DLOCK_OK);
      return 1;
    }
    /* InnoDB refreshes these tables only after 100 ms without a read: a
     * faster poll would keep reading the snapshot taken before the wait. */
    sleep_ms(200);
  }
  return 0;
}

static void test_fork(dlock_client *client) {
  dlock_error err;
  char kmark[128];
  dlock_lock *rwait = NULL;
  struct fork_waiter waiter;
  pthread_t waiter_thread;
  int waiter_started = 0;
  char klease[128], krow[128];
  char kauto[128], report[4096], stage[256];
  dlock_lock *lease, *row, *other, *autol;
  dlock_config *cfg;
  int fds[2], status = 0, cp = -1, cf = 0, drops = 0, exited = 0;
  size_t got = 0;
  int64_t t0, deadline;
  char *line;
  ssize_t n;
  pid_t pid;
  const char *p[2];

  create_biz_table(client);
  key(klease, sizeof klease, "fork-lease");
  key(krow, sizeof krow, "fork-row");
  lease = open_lock(client, klease, NULL, NULL);
  row = open_lock(client, krow, DLOCK_MODE_ROW, NULL);
  autol = NULL;
  /* ttl 1500: a renewal may come up to 1 s late (2/3 ttl). With 600 ms
   * (400 ms of slack) the lease ran out once in 10 runs of the TSan build
   * with every core busy (scripts/repeat.sh capi_test --busy), as in
   * test_auto_renew. */
  cfg = make_cfg(NULL, "1500");
  if (cfg != NULL) {
    EXPECT(dlock_config_set(cfg, "auto_renew", "1", E), DLOCK_OK);
    key(kauto, sizeof kauto, "fork-auto");
    EXPECT(dlock_open(&autol, client, kauto, strlen(kauto), cfg,
                      E),
           DLOCK_OK);
    dlock_config_free(cfg);
  }
  if (lease == NULL || row == NULL || autol == NULL) goto out;
  if (!EXPECT(dlock_try(lease, 0, E), DLOCK_OK)) goto out;
  if (!EXPECT(dlock_try(row, 0, E), DLOCK_OK)) goto out;
  if (!EXPECT(dlock_try(autol, 0, E), DLOCK_OK)) goto out;
  /* A thread of ours waits on the server for the row lock while we fork. */
  rwait = open_lock(g_other, krow, DLOCK_MODE_ROW, NULL); /* another holder */
  if (rwait == NULL) goto out;
  waiter.lock = rwait;
  waiter.rc = 12345;
  if (pthread_create(&waiter_thread, NULL, fork_waiter_main, &waiter) != 0) {
    CHECK(0, "pthread_create failed");
    goto out;
  }
  waiter_started = 1;
  CHECK(wait_for_row_waiter(row, key(kmark, sizeof kmark, "fork-waiting")),
        "the waiting thread did not reach the server's lock wait in 10 s");
  if (pipe(fds) != 0) {
    CHECK(0, "pipe() failed");
    goto out;
  }
  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    CHECK(0, "fork() failed");
    close(fds[0]);
    close(fds[1]);
    goto out;
  }
  if (pid == 0) {
    close(fds[0]);
    child_side(fds[1], client, lease, row, autol, rwait, klease, krow);
  }
  close(fds[1]);
  /* wait for the child, with a deadline well inside the parent's 30 s lease */
  deadline = now_ms() + 20000;
  while (now_ms() < deadline) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) {
      exited = 1;
      break;
    }
    sleep_ms(20);
  }
  if (!exited) {
    /* let it print where it is stuck (child_stuck), then kill it */
    kill(pid, SIGALRM);
    deadline = now_ms() + 5000;
    while (now_ms() < deadline && waitpid(pid, &status, WNOHANG) == 0) sleep_ms(20);
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  while (got < sizeof report - 1 && (n = read(fds[0], report + got, sizeof report - 1 - got)) > 0)
    got += (size_t)n;
  report[got] = '\0';
  close(fds[0]);
  snprintf(stage, sizeof stage, "(none)");
  for (line = strtok(report, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    if (strncmp(line, "stage ", 6) == 0) snprintf(stage, sizeof stage, "%s", line + 6);
    if (sscanf(line, "result %d %d", &cp, &cf) == 2) {
      g_passed += cp;
      g_failed += cf;
    }
  }
  CHECK(exited, "the forked child hung for 20 s (killed) in: %s", stage);
  CHECK(!exited || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
        "the forked child did not exit cleanly (status %d), last stage: %s", status, stage);
  CHECK(cp >= 0, "the forked child reported no results (last stage: %s)", stage);

  /* the parent still holds both */
  CHECK(dlock_held(lease) == 1 && dlock_held(row) == 1, "the parent's locks look released");
  EXPECT(dlock_renew(lease, E), DLOCK_OK);
  EXPECT(dlock_renew(row, E), DLOCK_OK); /* the row lock's own connection survived */
  p[0] = krow;
  p[1] = "after fork";
  EXPECT(dlock_exec(row, "DELETE FROM capi_biz WHERE k = ?", p, 1, NULL, E), DLOCK_OK);
  other = open_lock(g_other, klease, NULL, NULL);
  if (other != NULL) EXPECT(dlock_try(other, 0, E), DLOCK_BUSY);
  dlock_close(other);
  other = open_lock(g_other, krow, DLOCK_MODE_ROW, NULL);
  if (other != NULL) EXPECT(dlock_try(other, 0, E), DLOCK_BUSY);
  dlock_close(other);
  EXPECT(dlock_release(lease, E), DLOCK_OK);
  EXPECT(dlock_release(row, E), DLOCK_OK);
  /* our waiting thread was not cancelled from the child: it gets the row */
  pthread_join(waiter_thread, NULL);
  waiter_started = 0;
  CHECK(waiter.rc == DLOCK_OK, "the parent's waiting thread got %s", dlock_code_name(waiter.rc));
  /* the parent's watchdog still renews its 1500 ms lease (2 ttl) */
  t0 = now_ms();
  while (now_ms() - t0 < 3000) {
    if (dlock_held(autol) != 1) ++drops;
    sleep_ms(25);
  }
  CHECK(drops == 0, "after the fork the auto-renewed lease was not held at %d checks", drops);
  EXPECT(dlock_renew(autol, E), DLOCK_OK);
  EXPECT(dlock_release(autol, E), DLOCK_OK);

out:
  dlock_close(lease);
  dlock_close(row);
  if (waiter_started) pthread_join(waiter_thread, NULL); /* ends once row is closed */
  dlock_close(rwait);
  dlock_close(autol);
}

/* CAPI_TEST_ONLY=name[,name...] runs only those test functions (for
 * debugging); unset runs everything. */
static int want(const char *name) {
  const char *only = getenv("CAPI_TEST_ONLY");
  const char *p;
  size_t n = strlen(name);
  if (only == NULL || only[0] == '\0') return 1;
  for (p = only; (p = strstr(p, name)) != NULL; p += n)
    if ((p == only || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
  return 0;
}

#define RUN(call, name) \
  do {                    \
    if (want(name)) call; \
  } while (0)

int main(void) {
  dlock_client *client;

  g_url = dlock_test_url();
  snprintf(g_prefix, sizeof g_prefix, "capi-%ld-%ld-", (long)getpid(), (long)time(NULL));
  signal(SIGPIPE, SIG_IGN);

  RUN(test_version_and_codes(), "version_and_codes");
  RUN(test_config(), "config");
  RUN(test_client_open(), "client_open");
  client = open_client(g_url, NULL);
  g_other = open_client(g_url, NULL);
  if (client != NULL && g_other != NULL) {
    RUN(test_null_pointers(client), "null_pointers");
    RUN(test_messages(client), "messages");
    RUN(test_dsn_forms(client), "dsn_forms");
    RUN(test_lease(client), "lease");
    RUN(test_lease_lost(client), "lease_lost");
    RUN(test_row(client), "row");
    RUN(test_keys(client), "keys");
    RUN(test_wait_bounds(client), "wait_bounds");
    RUN(test_lease_txn(client), "lease_txn");
    RUN(test_wait_lost(client), "wait_lost");
    RUN(test_abort(client), "abort");
    RUN(test_no_limit(client), "no_limit");
    RUN(test_mode(client), "mode");
    RUN(test_holders(client), "holders");
    RUN(test_cancel(client), "cancel");
    RUN(test_wakeup(client), "wakeup");
    RUN(test_shards(client), "shards");
    RUN(test_init_schema(), "init_schema");
    RUN(test_fork(client), "fork");
    dlock_client_close(client);
  }
  RUN(test_options(), "options");
  RUN(test_client_defaults(), "client_defaults");
  RUN(test_counters_events(), "counters_events");
  RUN(test_auto_renew(), "auto_renew");
  RUN(test_cleanup(), "cleanup");

  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
