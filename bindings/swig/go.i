/*
 * go.i: the Go side of the SWIG interface. Generates package dlockc, the
 * internal low-level layer of the Go module (bindings/go/internal/dlockc);
 * regenerate with bindings/go/generate.sh. The public package dlock sits on
 * top of it.
 */
%module dlockc

/* The cgo flags are not generated: internal/dlockc's link_source.go (the
 * core compiled into the program from the module's sources) and
 * link_system.go (-tags dlock_system: the installed libdlock.so.1 through
 * pkg-config) pick them by build tag. */

/* A Go string carries the key's bytes and length; dlock_open copies them. */
%apply (char *STRING, size_t LENGTH) { (const char *key, size_t key_len) };

/* Strings handed out by dlock.h are static or owned by a handle (or are a
 * caller-owned struct's array): point a Go string header at them and copy
 * them into Go memory at once, instead of SWIG's malloc + copy + free (whose
 * uintptr-to-pointer helper `go vet` rightly questions). */
%typemap(out) char *, char[ANY], char[]
%{
  $result.p = (char *)$1;
  $result.n = $1 ? (intgo)strlen((const char *)$1) : 0;
%}
%typemap(goout) char *, char[ANY], char[]
%{ $result = string([]byte($1)) %}

/* dlock_owner_copy (1.1; added to dlock.i's allow-list here: a named
 * %rename wins over its catch-all ignore): dlock_owner may tear while another
 * goroutine's TryLock runs on the same object; the copy never does. The
 * buffer is a Go []byte, written by C only during the call. */
%rename("%s") dlock_owner_copy;
%typemap(gotype) (char *buf, size_t buf_size) "[]byte"
%typemap(in) (char *buf, size_t buf_size)
%{
  $1 = (char *)$input.array;
  $2 = (size_t)$input.len;
%}

/* `type` is a Go keyword. */
%rename(kind) dlock_event::type;

/* dlock_exec, through a shim: the SQL and its parameters cross as one Go
 * []byte (Go memory without Go pointers, which cgo lets C read during the
 * call; a slice of strings would be memory holding Go pointers):
 *   sql NUL, then per parameter either 1 value NUL or 0 (SQL NULL).
 * The package builds it and refuses NUL inside the SQL or a value. The shim
 * points dlock_exec's parameter array into the buffer; dlock_exec copies
 * what it keeps. The affected-row count comes back through a *int64. */
%rename("%s") dlockswig_exec;
%typemap(gotype) int64_t *out_affected "*int64"
%typemap(imtype) int64_t *out_affected "*int64"
%typemap(in) int64_t *out_affected
%{
  $1 = (int64_t *)$input;
%}

%include "dlock.i"

%inline %{
/* dlock_exec over a packed buffer (see above). nparams sizes the pointer
 * array; a buffer that does not hold exactly that many is refused. */
static int dlockswig_exec(dlock_lock *lock, char *buf, size_t buf_size, size_t nparams,
                          int64_t *out_affected, dlock_error *err) {
  const char *sql = buf;
  const char *end = buf + buf_size;
  const char *p = memchr(buf, 0, buf_size);
  const char **params = NULL;
  int rc;
  size_t i;
  if (nparams > 65535 || p == NULL) goto bad;
  if (nparams > 0 && (params = (const char **)calloc(nparams, sizeof *params)) == NULL) {
    if (err != NULL) {
      err->code = DLOCK_E_INTERNAL;
      err->server_errno = 0;
      snprintf(err->message, sizeof err->message, "exec: out of memory for %zu parameters",
               nparams);
    }
    return DLOCK_E_INTERNAL;
  }
  ++p;
  for (i = 0; i < nparams; ++i) {
    if (p >= end) goto bad;
    if (*p++ == 0) continue; /* SQL NULL */
    params[i] = p;
    if ((p = memchr(p, 0, (size_t)(end - p))) == NULL) goto bad;
    ++p;
  }
  if (p != end) goto bad;
  rc = dlock_exec(lock, sql, params, nparams, out_affected, err);
  free(params);
  return rc;
bad:
  free(params);
  if (err != NULL) {
    err->code = DLOCK_E_INVALID;
    err->server_errno = 0;
    snprintf(err->message, sizeof err->message,
             "exec: malformed parameter buffer (%zu bytes, %zu parameters)", buf_size, nparams);
  }
  return DLOCK_E_INVALID;
}
%}
