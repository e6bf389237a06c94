// Lock objects of one client for one key and mode that share a hold
// (holder=thread, reentrant) share one LockImpl: a thread holding the key
// enters again through any of them (article 6.4). They must agree on every
// lock option (option_table.h, compared row by row), or one object's ttl,
// renewal or transaction would silently be another's: a second object that
// differs is refused, naming the option. Objects with holder=lock share one
// too (each a holder of its own, waiting for the others in this process's
// line) when their options agree; one that differs gets a LockImpl of its
// own, as before.
#include "shared_locks.h"

namespace dlock {

Status SharedLocks::Get(const std::string& identity, const std::string& key, const LockOptions& opts,
                        const std::function<std::shared_ptr<LockImpl>()>& make,
                        std::shared_ptr<LockImpl>* out, bool strict) {
  MutexLock g(mu_);
  auto it = locks_.find(identity);
  if (it != locks_.end()) {
    if (std::shared_ptr<LockImpl> l = it->second.lock.lock()) {
      std::string theirs, ours;
      if (const OptionInfo* o = FirstDifference(it->second.opts, opts, &theirs, &ours)) {
        if (!strict) {
          out->reset();
          return Status::OK();
        }
        return Status::Invalid(
            "lock '" + QuoteKey(key) + "' is already open on this client with " + o->name + "=" +
            QuoteKey(theirs) + ", and this object asks for " + o->name + "=" + QuoteKey(ours) +
            ": lock objects of one key share their hold (holder=thread), so they must agree on "
            "every lock option (or use holder=lock or reentrant=0 for a holder of its own)");
      }
      *out = std::move(l);
      return Status::OK();
    }
  }
  *out = make();
  locks_[identity] = Entry{*out, opts};
  return Status::OK();
}

void SharedLocks::Forget(const std::string& identity) {
  MutexLock g(mu_);
  auto it = locks_.find(identity);
  // Only if no newer object has taken the entry meanwhile.
  if (it != locks_.end() && it->second.lock.expired()) locks_.erase(it);
}

}  // namespace dlock
