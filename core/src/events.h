// The client's event queue and counters (B6). Events are queued, never
// delivered by calling user code: the library runs no user code on its threads.
#ifndef DLOCK_CORE_EVENTS_H_
#define DLOCK_CORE_EVENTS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

#include "counter_table.h"
#include "dlock/core.hpp"
#include "thread_annotations.h"

namespace dlock {

// One atomic per row of DLOCK_COUNTERS (counter_table.h), named as the row.
struct Counters {
#define DLOCK_COUNTER_FIELD(name, doc) std::atomic<uint64_t> name{0};
  DLOCK_COUNTERS(DLOCK_COUNTER_FIELD)
#undef DLOCK_COUNTER_FIELD
};

class Events {
 public:
  explicit Events(size_t capacity) : capacity_(capacity) {}

  void Push(Event e, std::atomic<uint64_t>* dropped) EXCLUDES(mu_) {
    e.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
    MutexLock g(mu_);
    if (capacity_ == 0) {
      dropped->fetch_add(1);
      return;
    }
    if (q_.size() >= capacity_) {  // keep the newest: they describe the present
      q_.pop_front();
      dropped->fetch_add(1);
    }
    q_.push_back(std::move(e));
    cv_.notify_all();
  }

  bool Pop(std::chrono::steady_clock::time_point deadline, Event* out) EXCLUDES(mu_) {
    MutexLock g(mu_);
    while (q_.empty())
      if (cv_.wait_until(mu_, deadline) == std::cv_status::timeout && q_.empty()) return false;
    *out = std::move(q_.front());
    q_.pop_front();
    return true;
  }

 private:
  const size_t capacity_;
  Mutex mu_;
  std::condition_variable_any cv_;  // waits on mu_: an event was queued
  std::deque<Event> q_ GUARDED_BY(mu_);
};

}  // namespace dlock

#endif  // DLOCK_CORE_EVENTS_H_
