#include "waiters.h"

#include <algorithm>

namespace dlock {

namespace {
// Waits are cut into slices so a stop() request (cancel) is seen promptly
// even if nobody notifies.
constexpr auto kSlice = std::chrono::milliseconds(50);
}  // namespace

uint64_t WaitQueues::Join(const std::string& key) {
  MutexLock g(mu_);
  Queue& q = queues_[key];
  uint64_t t = q.next_ticket++;
  q.tickets.push_back(t);
  return t;
}

void WaitQueues::Leave(const std::string& key, uint64_t ticket) {
  MutexLock g(mu_);
  auto it = queues_.find(key);
  if (it == queues_.end()) return;
  Queue& q = it->second;
  q.tickets.erase(std::remove(q.tickets.begin(), q.tickets.end(), ticket), q.tickets.end());
  if (q.tickets.empty()) {
    queues_.erase(it);
  } else {
    q.cv.notify_all();  // the next in line becomes head
  }
}

bool WaitQueues::WaitHead(const std::string& key, uint64_t ticket, Clock::time_point deadline,
                          const std::function<bool()>& stop) {
  MutexLock g(mu_);
  for (;;) {
    Queue& q = queues_[key];
    if (!q.tickets.empty() && q.tickets.front() == ticket) return true;
    if (stop()) return false;
    auto now = Clock::now();
    if (now >= deadline) return false;
    q.cv.wait_until(mu_, std::min(deadline, now + kSlice));
  }
}

uint64_t WaitQueues::Releases(const std::string& key) {
  MutexLock g(mu_);
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.releases;
}

void WaitQueues::Sleep(const std::string& key, uint64_t seen, Clock::time_point until,
                       const std::function<bool()>& stop) {
  MutexLock g(mu_);
  Queue& q = queues_[key];
  for (;;) {
    if (q.releases != seen || stop()) return;
    auto now = Clock::now();
    if (now >= until) return;
    q.cv.wait_until(mu_, std::min(until, now + kSlice));
  }
}

void WaitQueues::Notify(const std::string& key) {
  MutexLock g(mu_);
  auto it = queues_.find(key);
  if (it == queues_.end()) return;
  ++it->second.releases;
  it->second.cv.notify_all();
}

WaitQueues::HintEntry& WaitQueues::TouchLocked(const std::string& key) {
  auto it = hints_.find(key);
  if (it == hints_.end()) {
    if (hints_.size() >= kMaxHints) {
      hints_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    it = hints_.emplace(key, HintEntry{Hint{}, Clock::now(), lru_.begin()}).first;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  it->second.noted = Clock::now();
  it->second.hint.contended = true;
  return it->second;
}

void WaitQueues::NoteBusy(const std::string& key, int64_t remaining_us) {
  MutexLock g(mu_);
  HintEntry& e = TouchLocked(key);
  e.hint.expiry_estimate = e.noted + std::chrono::microseconds(remaining_us);
}

void WaitQueues::NoteContended(const std::string& key) {
  MutexLock g(mu_);
  TouchLocked(key).hint.expiry_estimate = Clock::time_point{};  // a new holder: unknown
}

WaitQueues::Hint WaitQueues::GetHint(const std::string& key) {
  MutexLock g(mu_);
  Hint h;
  auto it = hints_.find(key);
  if (it != hints_.end() && Clock::now() - it->second.noted <= kHintLife) h = it->second.hint;
  auto q = queues_.find(key);
  if (q != queues_.end() && !q->second.tickets.empty()) h.contended = true;
  return h;
}

}  // namespace dlock
