#include "waiters.h"

#include <algorithm>

namespace dlock {

size_t WaitQueues::FindSoloLocked(const std::string& key, size_t hash) const {
  for (size_t i = 0; i < solos_.size(); ++i)
    if (solos_[i].hash == hash && *solos_[i].key == key) return i;
  return solos_.size();
}

WaitQueues::Queue& WaitQueues::PromoteLocked(const std::string& key) {
  if (!solos_.empty()) {
    const size_t i = FindSoloLocked(key, std::hash<std::string>{}(key));
    if (i < solos_.size()) {
      const uint64_t ticket = solos_[i].ticket;
      solos_[i] = solos_.back();
      solos_.pop_back();
      Queue& q = queues_[key];  // none yet: a key has a Solo or a Queue
      q.tickets.push_back(ticket);
      return q;
    }
  }
  return queues_[key];
}

uint64_t WaitQueues::Join(const std::string& key, bool* head) {
  MutexLock g(mu_);
  const uint64_t t = next_ticket_++;
  auto it = queues_.find(key);
  if (it == queues_.end()) {
    const size_t hash = std::hash<std::string>{}(key);
    if (FindSoloLocked(key, hash) == solos_.size() && solos_.size() < kMaxSolos) {
      if (solos_.capacity() == 0) solos_.reserve(kMaxSolos);  // once: no allocation per Join
      solos_.push_back(Solo{&key, hash, t});
      *head = true;
      return t;
    }
  }
  Queue& q = it != queues_.end() ? it->second : PromoteLocked(key);
  q.tickets.push_back(t);
  *head = q.tickets.front() == t;
  return t;
}

void WaitQueues::Leave(const std::string& key, uint64_t ticket) {
  MutexLock g(mu_);
  for (size_t i = 0; i < solos_.size(); ++i) {
    if (solos_[i].ticket == ticket) {  // alone in line: nobody to wake
      solos_[i] = solos_.back();
      solos_.pop_back();
      return;
    }
  }
  auto it = queues_.find(key);
  if (it == queues_.end()) return;
  Queue& q = it->second;
  const bool was_head = !q.tickets.empty() && q.tickets.front() == ticket;
  q.tickets.erase(std::remove(q.tickets.begin(), q.tickets.end(), ticket), q.tickets.end());
  if (q.tickets.empty()) {
    queues_.erase(it);
  } else if (was_head) {
    // The next in line becomes head: wake it (if it waits yet; if not, its
    // WaitHead finds itself at the front).
    for (const auto& w : q.waiting)
      if (w.first == q.tickets.front()) w.second->notify_one();
  }
}

bool WaitQueues::WaitHead(const std::string& key, uint64_t ticket, Clock::time_point deadline,
                          const std::function<bool()>& stop) {
  MutexLock g(mu_);
  std::condition_variable_any cv;  // ours alone: Leave wakes us when we head the line
  bool registered = false;
  // Our ticket stays in key's Queue until our Leave (after this returns), so
  // the Queue we registered in is still there.
  auto done = [&](bool head) REQUIRES(mu_) {
    if (registered) {
      auto& w = PromoteLocked(key).waiting;
      w.erase(std::find_if(w.begin(), w.end(), [&](const auto& e) { return e.first == ticket; }));
    }
    return head;
  };
  for (;;) {
    Queue& q = PromoteLocked(key);
    if (!q.tickets.empty() && q.tickets.front() == ticket) return done(true);
    if (stop()) return done(false);
    auto now = Clock::now();
    if (now >= deadline) return done(false);
    if (!registered) {
      q.waiting.emplace_back(ticket, &cv);
      registered = true;
    }
    cv.wait_until(mu_, std::min(deadline, now + slice_));
  }
}

uint64_t WaitQueues::Releases(const std::string& key) {
  MutexLock g(mu_);
  // A line of one becomes a Queue here, so that Notify counts the releases
  // from now on (Sleep compares with them).
  if (!solos_.empty() && FindSoloLocked(key, std::hash<std::string>{}(key)) < solos_.size())
    return PromoteLocked(key).releases;
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.releases;
}

void WaitQueues::Sleep(const std::string& key, uint64_t seen, Clock::time_point until,
                       const std::function<bool()>& stop) {
  MutexLock g(mu_);
  Queue& q = PromoteLocked(key);
  for (;;) {
    if (q.releases != seen || stop()) return;
    auto now = Clock::now();
    if (now >= until) return;
    q.cv.wait_until(mu_, std::min(until, now + slice_));
  }
}

void WaitQueues::Notify(const std::string& key) {
  MutexLock g(mu_);
  auto it = queues_.find(key);
  if (it == queues_.end()) return;
  ++it->second.releases;
  it->second.cv.notify_all();  // the head, in Sleep: the others wait to head the line
}

void WaitQueues::WakeAll(const std::string& key) {
  MutexLock g(mu_);
  auto it = queues_.find(key);
  if (it == queues_.end()) return;
  it->second.cv.notify_all();
  for (const auto& w : it->second.waiting) w.second->notify_all();
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
  if (!solos_.empty() && FindSoloLocked(key, std::hash<std::string>{}(key)) < solos_.size())
    h.contended = true;
  return h;
}

}  // namespace dlock
