// Who holds a lock for reentrancy: the OS thread, or an id a binding passes
// for the call (HolderScope).
#include <atomic>
#include <cstdint>

#include "lock_impl.h"

namespace dlock {

namespace {
thread_local bool t_has_holder = false;
thread_local uint64_t t_holder = 0;
std::atomic<uint64_t> g_next_thread_holder{1};
std::atomic<uint64_t> g_next_object{1};
}  // namespace

HolderId HolderId::Current() {
  HolderId h;
  if (t_has_holder) {
    h.explicit_id = true;
    h.id = t_holder;
    return h;
  }
  // A number per OS thread, never reused (a thread id may be, once the
  // thread ended).
  thread_local const uint64_t self = g_next_thread_holder.fetch_add(1);
  h.id = self;
  return h;
}

uint64_t HolderId::NewObjectId() { return g_next_object.fetch_add(1); }

HolderScope::HolderScope(uint64_t id) : had_(t_has_holder), prev_(t_holder) {
  t_has_holder = id != 0;  // 0: the calling OS thread
  t_holder = id;
}

HolderScope::~HolderScope() {
  t_has_holder = had_;
  t_holder = prev_;
}

}  // namespace dlock
