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

#include "dlock/core.hpp"

namespace dlock {

struct Counters {
  std::atomic<uint64_t> acquisitions{0};      // successful Try (first hold, not reentrant)
  std::atomic<uint64_t> reentries{0};         // reentrant Try on a held lock
  std::atomic<uint64_t> busy{0};              // Try that returned busy
  std::atomic<uint64_t> wait_ms{0};           // total time spent inside Try
  std::atomic<uint64_t> releases{0};
  std::atomic<uint64_t> renewals{0};          // leases extended (manual and watchdog)
  std::atomic<uint64_t> renew_ticks{0};       // watchdog ticks that renewed something
  std::atomic<uint64_t> renew_statements{0};  // statements the watchdog executed
  std::atomic<uint64_t> lost{0};
  std::atomic<uint64_t> max_hold_trips{0};
  std::atomic<uint64_t> cleanup_runs{0};
  std::atomic<uint64_t> cleanup_deleted{0};
  std::atomic<uint64_t> table_rows{0};        // rows in the lease table at the last cleanup
  std::atomic<uint64_t> events_dropped{0};
};

class Events {
 public:
  explicit Events(size_t capacity) : capacity_(capacity) {}

  void Push(Event e, std::atomic<uint64_t>* dropped) {
    e.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
    std::lock_guard<std::mutex> g(mu_);
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

  bool Pop(std::chrono::steady_clock::time_point deadline, Event* out) {
    std::unique_lock<std::mutex> g(mu_);
    if (!cv_.wait_until(g, deadline, [&] { return !q_.empty(); })) return false;
    *out = std::move(q_.front());
    q_.pop_front();
    return true;
  }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> q_;
};

}  // namespace dlock

#endif  // DLOCK_CORE_EVENTS_H_
