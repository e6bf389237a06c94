/*
 * java.i: the Java side of the SWIG interface. Generates the internal,
 * low-level layer of the Java binding (package io.dlock.internal: the module
 * class DLockNative and its JNI class) plus the C wrapper that becomes
 * libdlock_jni.so, linked against the shared libdlock.so.1. The public
 * classes of package io.dlock (bindings/java) sit on top of it.
 *
 *   swig -java -package io.dlock.internal -I<dlock include dir> java.i
 *
 * bindings/java/jni/CMakeLists.txt runs exactly this at build time.
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
 *  - The JNI library is loaded by the JNI class's static initialiser: from the
 *    path in the system property dlock.jni.path if set, else
 *    System.loadLibrary("dlock_jni") (java.library.path).
 */
%module(jniclassname = "DLockNativeJNI") DLockNative

%include <enumtypeunsafe.swg>
%javaconst(1);

/* ---- loading the JNI library ------------------------------------------- */
%pragma(java) jniclasscode = %{
  static {
    String path = System.getProperty("dlock.jni.path");
    try {
      if (path != null && !path.isEmpty()) {
        System.load(path);
      } else {
        System.loadLibrary("dlock_jni");
      }
    } catch (UnsatisfiedLinkError e) {
      UnsatisfiedLinkError err = new UnsatisfiedLinkError(
          "dlock: cannot load the JNI library "
              + (path != null && !path.isEmpty() ? path : "dlock_jni from java.library.path")
              + " (set -Ddlock.jni.path=/path/to/libdlock_jni.so; it needs libdlock.so.1 on the"
              + " loader's path): " + e.getMessage());
      err.initCause(e);
      throw err;
    }
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
%}

%include "dlock.i"
