/* An admin session on the test server, over MariaDB Connector/C, for tests
 * that set up what the library must not do itself: users and grants, server
 * variables, and looking at the server's side (processlist, rows).
 * C99; include once per program, after dlock_check.h. */
#ifndef DLOCK_ADMIN_H_
#define DLOCK_ADMIN_H_

#include <mysql.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parts of a test URL: mysql://user[:password]@host[:port]/database[?...]
 * (no %-escapes: the fixture's and DLOCK_URL's are plain). */
typedef struct admin_url {
  char user[128], password[128], host[128], database[128], query[512];
  unsigned port;
} admin_url;

static inline int admin_parse_url(const char *url, admin_url *out) {
  memset(out, 0, sizeof *out);
  out->port = 3306;
  const char *p = strstr(url, "://");
  if (p == NULL) return -1;
  p += 3;
  const char *slash = strchr(p, '/');
  if (slash == NULL) return -1;
  const char *at = NULL;
  for (const char *q = p; q < slash; ++q)
    if (*q == '@') at = q;
  const char *hostpart = p;
  if (at != NULL) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    size_t ulen = (size_t)((colon != NULL ? colon : at) - p);
    if (ulen >= sizeof out->user) return -1;
    memcpy(out->user, p, ulen);
    if (colon != NULL) {
      size_t plen = (size_t)(at - colon - 1);
      if (plen >= sizeof out->password) return -1;
      memcpy(out->password, colon + 1, plen);
    }
    hostpart = at + 1;
  }
  const char *pcolon = memchr(hostpart, ':', (size_t)(slash - hostpart));
  size_t hlen = (size_t)((pcolon != NULL ? pcolon : slash) - hostpart);
  if (hlen >= sizeof out->host) return -1;
  memcpy(out->host, hostpart, hlen);
  if (pcolon != NULL) out->port = (unsigned)atoi(pcolon + 1);
  const char *qmark = strchr(slash, '?');
  size_t dlen = qmark != NULL ? (size_t)(qmark - slash - 1) : strlen(slash + 1);
  if (dlen >= sizeof out->database) return -1;
  memcpy(out->database, slash + 1, dlen);
  if (qmark != NULL) snprintf(out->query, sizeof out->query, "%s", qmark + 1);
  return 0;
}

/* The URL of the same server and database for another user; extra (may be
 * "") is appended as query options. */
static inline void admin_url_for(const admin_url *u, const char *user, const char *password,
                                 const char *extra, char *buf, size_t size) {
  snprintf(buf, size, "mysql://%s:%s@%s:%u/%s%s%s", user, password, u->host, u->port, u->database,
           extra[0] != '\0' ? "?" : "", extra);
}

static inline MYSQL *admin_connect(const admin_url *u) {
  MYSQL *m = mysql_init(NULL);
  if (m == NULL) return NULL;
  if (mysql_real_connect(m, u->host, u->user[0] ? u->user : NULL, u->password, u->database,
                         u->port, NULL, 0) == NULL) {
    fprintf(stderr, "admin connect: %s\n", mysql_error(m));
    mysql_close(m);
    return NULL;
  }
  return m;
}

/* Runs a statement (printf-style); 0 or the server's errno (printed). */
static inline unsigned admin_exec(MYSQL *m, const char *fmt, ...) {
  char sql[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  if (mysql_query(m, sql) != 0) {
    fprintf(stderr, "admin: %s: %s (%u)\n", sql, mysql_error(m), mysql_errno(m));
    return mysql_errno(m);
  }
  MYSQL_RES *res = mysql_store_result(m);
  if (res != NULL) mysql_free_result(res);
  return 0;
}

/* The first column of the first row as an integer; -1 on error or no row. */
static inline long long admin_scalar(MYSQL *m, const char *fmt, ...) {
  char sql[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  if (mysql_query(m, sql) != 0) {
    fprintf(stderr, "admin: %s: %s (%u)\n", sql, mysql_error(m), mysql_errno(m));
    return -1;
  }
  MYSQL_RES *res = mysql_store_result(m);
  if (res == NULL) return -1;
  MYSQL_ROW row = mysql_fetch_row(res);
  long long v = (row != NULL && row[0] != NULL) ? atoll(row[0]) : -1;
  mysql_free_result(res);
  return v;
}

/* Sessions of a user on the server (the processlist). */
static inline long long admin_sessions_of(MYSQL *m, const char *user) {
  return admin_scalar(m, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '%s'",
                      user);
}

#endif /* DLOCK_ADMIN_H_ */
