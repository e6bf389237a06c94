/*
 * java.i: the Java side of the SWIG interface. Generates the internal,
 * low-level layer of the Java binding (package io.dlock.internal: the module
 * class DLockNative and its JNI class) plus the C wrapper that becomes
 * libdlock_jni.so, which links the core and the C API in. The public
 * classes of package io.dlock (bindings/java) sit on top of it.
 *
 *   swig -java -package io.dlock.internal -I<dlock include dir> java.i
 *
 * bindings/java/generate.sh runs exactly this; its output is committed
 * (bindings/java/src/generated, bindings/java/jni/dlock_wrap.c) and checked
 * against a fresh run by bindings/java/run-tests.sh.
 *
 * What this file settles for Java:
 *  - Handles (dlock_config, dlock_client, dlock_lock) cross as a plain Java
 *    long: the facade owns them, closes each exactly once and guards them
 *    against use after close, so no SWIG proxy object (with its ownership
 *    flag and default finalize()) is made per call.
 *  - dlock_error *err disappears from the Java signatures: the wrapper passes
 *    a dlock_error of its own and, when the call fails (a negative code),
 *    throws the exception made by io.dlock.DLockException.fromNative, the one
 *    place where a C code becomes a Java exception. A positive code
 *    (DLOCK_BUSY) is a result, returned as the int.
 *  - The key crosses as byte[] (the facade encodes it as UTF-8), so any bytes
 *    reach dlock_open exactly; dlock_open copies them.
 *  - uint64_t (fencing tokens, counters) crosses as a Java long: the bits are
 *    kept; the values dlock hands out stay far below 2^63.
 *  - dlock_event's strings cross as byte[] (a key is any bytes); struct
 *    proxies get no finalize().
 *  - The JNI library is loaded by the JNI class's static initialiser, through
 *    io.dlock.internal.NativeLoader (not generated): dlock.jni.path if set,
 *    else the copy the jar carries for the platform, else
 *    System.loadLibrary("dlock_jni") (java.library.path).
 */
%module(jniclassname = "DLockNativeJNI") DLockNative

%include <enumtypeunsafe.swg>
%javaconst(1);

/* ---- loading the JNI library ------------------------------------------- */
%pragma(java) jniclasscode = %{
  static {
    NativeLoader.load();
  }
%}
%pragma(java) moduleclassmodifiers = "public final class"
%pragma(java) jniclassclassmodifiers = "public final class"

/* ---- no finalize() ------------------------------------------------------------
 * SWIG gives struct proxies (dlock_error, dlock_event) a finalizer that frees
 * the C struct. The facade never lets one own memory past a call, and
 * finalize() is deprecated: proxies are freed by delete() only. */
%typemap(javafinalize) SWIGTYPE ""

/* ---- uint64_t as long ---------------------------------------------------- */
%apply long long { uint64_t };

/* ---- handles as long ----------------------------------------------------- */
%define DLOCK_JAVA_HANDLE(TYPE)
%typemap(jni) TYPE *, const TYPE * "jlong"
%typemap(jtype) TYPE *, const TYPE * "long"
%typemap(jstype) TYPE *, const TYPE * "long"
%typemap(javain) TYPE *, const TYPE * "$javainput"
%typemap(javaout) TYPE *, const TYPE * { return $jnicall; }
%typemap(in) TYPE *, const TYPE * %{ $1 = ($1_ltype)(intptr_t)$input; %}
%typemap(out) TYPE *, const TYPE * %{ $result = (jlong)(intptr_t)$1; %}
%enddef
DLOCK_JAVA_HANDLE(dlock_config)
DLOCK_JAVA_HANDLE(dlock_client)
DLOCK_JAVA_HANDLE(dlock_lock)

/* ---- the key as byte[] ------------------------------------------------------ */
%typemap(jni) (const char *key, size_t key_len) "jbyteArray"
%typemap(jtype) (const char *key, size_t key_len) "byte[]"
%typemap(jstype) (const char *key, size_t key_len) "byte[]"
%typemap(javain) (const char *key, size_t key_len) "$javainput"
%typemap(in) (const char *key, size_t key_len) (jbyte *bytes = NULL) %{
  if (!$input) {
    dlockjava_throw_npe(jenv, "key is null");
    return $null;
  }
  bytes = (*jenv)->GetByteArrayElements(jenv, $input, NULL);
  if (!bytes) return $null; /* OutOfMemoryError pending */
  $1 = (char *)bytes;
  $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input);
%}
%typemap(freearg) (const char *key, size_t key_len) %{
  if (bytes$argnum) (*jenv)->ReleaseByteArrayElements(jenv, $input, bytes$argnum, JNI_ABORT);
%}

/* ---- event strings as bytes ------------------------------------------------
 * dlock_event's key is any bytes (and its owner and message may quote it):
 * read them as byte[] (up to the NUL), which the facade decodes as UTF-8,
 * instead of NewStringUTF, which wants modified UTF-8. Read-only (so is
 * dlock_error::message, which the same typemaps match). */
%immutable dlock_event::key;
%immutable dlock_event::owner;
%immutable dlock_event::message;
%immutable dlock_error::message;
%typemap(jni) char key[ANY], char owner[ANY], char message[ANY] "jbyteArray"
%typemap(jtype) char key[ANY], char owner[ANY], char message[ANY] "byte[]"
%typemap(jstype) char key[ANY], char owner[ANY], char message[ANY] "byte[]"
%typemap(javaout) char key[ANY], char owner[ANY], char message[ANY] { return $jnicall; }
%typemap(out) char key[ANY], char owner[ANY], char message[ANY] %{
  {
    jsize n = (jsize)strnlen($1, $1_dim0);
    $result = (*jenv)->NewByteArray(jenv, n);
    if ($result) (*jenv)->SetByteArrayRegion(jenv, $result, 0, n, (const jbyte *)$1);
  }
%}

/* ---- calls of dlock.h 1.1 that only Java uses ---------------------------
 * Added to dlock.i's allow-list here (a named %rename wins over its
 * catch-all ignore whatever the order), with Java typemaps:
 *  - dlock_try_as / dlock_release_as: the holder is the Java thread's id, so
 *    that reentrancy is per Java thread, virtual threads included (DLock
 *    acquires with dlock_try_from, which dlock.i exposes with
 *    dlock_cancel_mark, dlock_rollback_as and dlock_hold_count_as; the
 *    holder and the cancel mark cross as long).
 *  - dlock_owner_copy: the owner without tearing, into a byte[] the facade
 *    allocates (copied back), cut and NUL-terminated by the library.
 *  - dlock_exec: the SQL and each parameter cross as UTF-8 byte[] in one
 *    byte[][] (the facade encodes them and refuses NUL), a null parameter is
 *    SQL NULL; the affected-row count comes back in a long[1]. */
%rename("%s") dlock_try_as;
%rename("%s") dlock_release_as;
/* 1.3: the work failed, on behalf of the Java thread (DLockClient.withLock). */
%rename("%s") dlock_abort_as;
%rename("%s") dlock_owner_copy;
%rename("%s") dlock_exec;

%typemap(jni) (char *buf, size_t buf_size) "jbyteArray"
%typemap(jtype) (char *buf, size_t buf_size) "byte[]"
%typemap(jstype) (char *buf, size_t buf_size) "byte[]"
%typemap(javain) (char *buf, size_t buf_size) "$javainput"
%typemap(in) (char *buf, size_t buf_size) (jbyte *bytes = NULL) %{
  if (!$input) {
    dlockjava_throw_npe(jenv, "buffer is null");
    return $null;
  }
  bytes = (*jenv)->GetByteArrayElements(jenv, $input, NULL);
  if (!bytes) return $null; /* OutOfMemoryError pending */
  $1 = (char *)bytes;
  $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input);
%}
%typemap(freearg) (char *buf, size_t buf_size) %{
  if (bytes$argnum) (*jenv)->ReleaseByteArrayElements(jenv, $input, bytes$argnum, 0);
%}

/* The SQL and its parameters cross together, as one byte[][] (element 0 the
 * SQL, then the parameters), so that one typemap copies them and one frees
 * them: a failure halfway leaves nothing allocated. */
%typemap(jni) (const char *sql, const char *const *params, size_t nparams) "jobjectArray"
%typemap(jtype) (const char *sql, const char *const *params, size_t nparams) "byte[][]"
%typemap(jstype) (const char *sql, const char *const *params, size_t nparams) "byte[][]"
%typemap(javain) (const char *sql, const char *const *params, size_t nparams) "$javainput"
%typemap(in) (const char *sql, const char *const *params, size_t nparams)
    (char **strs = NULL, jsize count = 0) %{
  if (!$input || (count = (*jenv)->GetArrayLength(jenv, $input)) < 1) {
    dlockjava_throw_npe(jenv, "no SQL");
    return $null;
  }
  strs = dlockjava_cstrings(jenv, $input, count);
  if (!strs) return $null; /* exception pending; nothing left allocated */
  if (!strs[0]) {
    dlockjava_free_cstrings(strs, count);
    dlockjava_throw_npe(jenv, "sql is null");
    return $null;
  }
  $1 = ($1_ltype)strs[0];
  $2 = ($2_ltype)(strs + 1);
  $3 = (size_t)(count - 1);
%}
%typemap(freearg) (const char *sql, const char *const *params, size_t nparams) %{
  dlockjava_free_cstrings(strs$argnum, count$argnum);
%}

/* A long[1] receives the count; null: not wanted (dlock_exec takes NULL). */
%typemap(jni) int64_t *out_affected "jlongArray"
%typemap(jtype) int64_t *out_affected "long[]"
%typemap(jstype) int64_t *out_affected "long[]"
%typemap(javain) int64_t *out_affected "$javainput"
%typemap(in) int64_t *out_affected (int64_t affected = 0) %{
  $1 = ($input && (*jenv)->GetArrayLength(jenv, $input) >= 1) ? &affected : NULL;
%}
%typemap(argout) int64_t *out_affected %{
  if ($1) {
    jlong v = (jlong)affected$argnum;
    (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &v);
  }
%}

/* ---- errors: dlock_error *err becomes an exception ----------------------- */
%typemap(in, numinputs = 0) dlock_error *err (dlock_error temp) %{
  memset(&temp, 0, sizeof temp);
  $1 = &temp;
%}
/* No early return: freearg (e.g. releasing the key bytes) still runs, and
 * the JVM ignores the return value while an exception is pending. */
%typemap(argout) dlock_error *err %{
  if (temp$argnum.code < 0) dlockjava_throw(jenv, &temp$argnum);
%}

%{
#include <stdint.h>
#include <dlock/dlock.h>
#include <stdlib.h>
#include <string.h>

static void dlockjava_throw_npe(JNIEnv *jenv, const char *what) {
  jclass npe = (*jenv)->FindClass(jenv, "java/lang/NullPointerException");
  if (npe) (*jenv)->ThrowNew(jenv, npe, what);
}

/* Throws the exception io.dlock.DLockException.fromNative makes for err.
 * The message goes as bytes: it may quote a key, which is any bytes, and
 * NewStringUTF wants modified UTF-8. */
static void dlockjava_throw(JNIEnv *jenv, const dlock_error *err) {
  jclass cls;
  jmethodID make;
  jbyteArray msg;
  jobject ex;
  size_t n = strnlen(err->message, sizeof err->message);
  cls = (*jenv)->FindClass(jenv, "io/dlock/DLockException");
  if (!cls) return; /* NoClassDefFoundError pending */
  make = (*jenv)->GetStaticMethodID(jenv, cls, "fromNative", "(II[B)Lio/dlock/DLockException;");
  if (!make) return;
  msg = (*jenv)->NewByteArray(jenv, (jsize)n);
  if (!msg) return;
  (*jenv)->SetByteArrayRegion(jenv, msg, 0, (jsize)n, (const jbyte *)err->message);
  ex = (*jenv)->CallStaticObjectMethod(jenv, cls, make, (jint)err->code,
                                       (jint)err->server_errno, msg);
  if (ex && !(*jenv)->ExceptionCheck(jenv)) (*jenv)->Throw(jenv, (jthrowable)ex);
}
/* A NUL-terminated copy of a byte[] (malloc'd), or NULL with an exception
 * pending (NullPointerException saying what, or OutOfMemoryError). */
static char *dlockjava_cstring(JNIEnv *jenv, jbyteArray a, const char *what) {
  jsize n;
  char *s;
  if (!a) {
    dlockjava_throw_npe(jenv, what);
    return NULL;
  }
  n = (*jenv)->GetArrayLength(jenv, a);
  s = (char *)malloc((size_t)n + 1);
  if (!s) {
    jclass oom = (*jenv)->FindClass(jenv, "java/lang/OutOfMemoryError");
    if (oom) (*jenv)->ThrowNew(jenv, oom, "dlock: copying a string");
    return NULL;
  }
  (*jenv)->GetByteArrayRegion(jenv, a, 0, n, (jbyte *)s);
  s[n] = '\0';
  return s;
}

static void dlockjava_free_cstrings(char **strs, jsize count) {
  jsize i;
  if (!strs) return;
  for (i = 0; i < count; i++) free(strs[i]);
  free(strs);
}

/* Copies of the count byte[] of a (a null element stays NULL: SQL NULL), or
 * NULL with an exception pending and nothing left allocated. */
static char **dlockjava_cstrings(JNIEnv *jenv, jobjectArray a, jsize count) {
  jsize i;
  char **strs = (char **)calloc(count > 0 ? (size_t)count : 1, sizeof *strs);
  if (!strs) {
    jclass oom = (*jenv)->FindClass(jenv, "java/lang/OutOfMemoryError");
    if (oom) (*jenv)->ThrowNew(jenv, oom, "dlock: copying parameters");
    return NULL;
  }
  for (i = 0; i < count; i++) {
    jbyteArray b = (jbyteArray)(*jenv)->GetObjectArrayElement(jenv, a, i);
    if ((*jenv)->ExceptionCheck(jenv)) {
      dlockjava_free_cstrings(strs, count);
      return NULL;
    }
    if (b) {
      strs[i] = dlockjava_cstring(jenv, b, "parameter");
      (*jenv)->DeleteLocalRef(jenv, b);
      if (!strs[i]) {
        dlockjava_free_cstrings(strs, count);
        return NULL;
      }
    }
  }
  return strs;
}
%}

%include "dlock.i"
