// The lock objects of one client that share a lock: one LockImpl per
// identity (holder kind, mode and key) while any object uses it. With
// holder=thread (reentrant) they share the hold; with holder=lock each
// object is a holder of its own, and they share the line and the hand-over. Owned by the client; what it keeps are weak references (and the
// options the lock was made with), so a lock that every object closed is
// gone, and the registry never needs the lock's header.
#ifndef DLOCK_CORE_SHARED_LOCKS_H_
#define DLOCK_CORE_SHARED_LOCKS_H_

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "dlock/core.hpp"
#include "options.h"
#include "thread_annotations.h"

namespace dlock {

class LockImpl;

class SharedLocks {
 public:
  // *out is the live LockImpl for identity (of key), or make() a new one.
  // When the live one has other lock options: kInvalid, naming the option
  // (strict), or OK with *out null (the caller makes one of its own).
  Status Get(const std::string& identity, const std::string& key, const LockOptions& opts,
             const std::function<std::shared_ptr<LockImpl>()>& make,
             std::shared_ptr<LockImpl>* out, bool strict = true) EXCLUDES(mu_);
  // The last object of identity closed (unless a newer one took its place).
  void Forget(const std::string& identity) EXCLUDES(mu_);

 private:
  Mutex mu_;
  struct Entry {
    std::weak_ptr<LockImpl> lock;
    LockOptions opts;  // what it was made with
  };
  std::unordered_map<std::string, Entry> locks_ GUARDED_BY(mu_);
};

}  // namespace dlock

#endif  // DLOCK_CORE_SHARED_LOCKS_H_
