// Clang's thread-safety analysis (-Wthread-safety), as LevelDB and Abseil use
// it: which mutex guards which field is said in the code, and a clang build in
// the test command checks it. Other compilers see no-ops.
#ifndef DLOCK_CORE_THREAD_ANNOTATIONS_H_
#define DLOCK_CORE_THREAD_ANNOTATIONS_H_

#include <mutex>

#if defined(__clang__)
#define DLOCK_TSA(x) __attribute__((x))
#else
#define DLOCK_TSA(x)
#endif

#define CAPABILITY(x) DLOCK_TSA(capability(x))
#define SCOPED_CAPABILITY DLOCK_TSA(scoped_lockable)
#define GUARDED_BY(x) DLOCK_TSA(guarded_by(x))
#define REQUIRES(...) DLOCK_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) DLOCK_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) DLOCK_TSA(release_capability(__VA_ARGS__))
#define EXCLUDES(...) DLOCK_TSA(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS DLOCK_TSA(no_thread_safety_analysis)

namespace dlock {

// std::mutex with the annotations the analysis needs. BasicLockable, so a
// std::condition_variable_any waits on it directly.
class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A MutexLock that can let go of the mutex for a while (a connect, a
// statement) and take it back; the destructor releases it only if held.
// The analysis follows Unlock()/Lock(): a guarded field touched in between
// is a finding.
class SCOPED_CAPABILITY RelockableMutexLock {
 public:
  explicit RelockableMutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~RelockableMutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  void Unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }
  RelockableMutexLock(const RelockableMutexLock&) = delete;
  RelockableMutexLock& operator=(const RelockableMutexLock&) = delete;

 private:
  Mutex& mu_;
  bool held_ = true;
};

}  // namespace dlock

#endif  // DLOCK_CORE_THREAD_ANNOTATIONS_H_
