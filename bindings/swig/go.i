/*
 * go.i: the Go side of the SWIG interface. Generates package dlockc, the
 * internal low-level layer of the Go module (bindings/go/internal/dlockc);
 * regenerate with bindings/go/generate.sh. The public package dlock sits on
 * top of it.
 */
%module dlockc

/* cgo finds the installed library through pkg-config and links it
 * dynamically (libdlock.so.1): no copy of the core in a Go binary. */
%insert(cgo_comment_typedefs) %{
#cgo pkg-config: dlock
%}

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

%include "dlock.i"
