// Local waiting (B3): threads of one process waiting for the same key queue
// here in arrival order, and only the head of the queue talks to the
// database. A local release wakes the head at once.
#ifndef DLOCK_CORE_WAITERS_H_
#define DLOCK_CORE_WAITERS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "thread_annotations.h"

namespace dlock {

class WaitQueues {
 public:
  using Clock = std::chrono::steady_clock;

  // What the last busy attempt on a key told us, shared by the process.
  struct Hint {
    bool contended = false;  // busy recently, or local waiters queued: skip the blind first attempt
    Clock::time_point expiry_estimate{};    // when the holder's lease ends, by the DB
  };

  // slice: the longest a wait (WaitHead, Sleep) sleeps without being woken
  // before it looks at its stop() and deadline again. Tests lengthen it, so
  // that a wait that was not woken visibly stays asleep.
  explicit WaitQueues(Clock::duration slice = std::chrono::milliseconds(50)) : slice_(slice) {}

  // Joins key's line; *head: the ticket heads it at once (nobody was in
  // line), so WaitHead would return at once. key must live until Leave.
  uint64_t Join(const std::string& key, bool* head) EXCLUDES(mu_);
  void Leave(const std::string& key, uint64_t ticket) EXCLUDES(mu_);
  // Waits until ticket heads the key's queue (true), or until deadline or
  // stop() turns true (false).
  bool WaitHead(const std::string& key, uint64_t ticket, Clock::time_point deadline,
                const std::function<bool()>& stop) EXCLUDES(mu_);
  // Local releases of key so far; pass it to Sleep to not miss one that
  // happens between reading it and sleeping.
  uint64_t Releases(const std::string& key) EXCLUDES(mu_);
  // The head sleeps until `until`, a local release after `seen`, or stop().
  void Sleep(const std::string& key, uint64_t seen, Clock::time_point until,
             const std::function<bool()>& stop) EXCLUDES(mu_);
  // A local holder released key: wake its head (in Sleep).
  void Notify(const std::string& key) EXCLUDES(mu_);
  // Wake every thread waiting on key's line (WaitHead or Sleep), so that a
  // cancelled one sees its stop() at once.
  void WakeAll(const std::string& key) EXCLUDES(mu_);

  void NoteBusy(const std::string& key, int64_t remaining_us) EXCLUDES(mu_);
  // We waited for key and won it: keep it marked contended (expiry unknown).
  void NoteContended(const std::string& key) EXCLUDES(mu_);
  Hint GetHint(const std::string& key) EXCLUDES(mu_);

 private:
  // A Queue lives in queues_ and is touched only with mu_ held (its fields
  // are reached through queues_, which the analysis checks).
  struct Queue {
    std::deque<uint64_t> tickets;
    uint64_t releases = 0;
    std::condition_variable_any cv;  // the head's Sleep waits here, on mu_
    // The threads in WaitHead, by ticket, each on a condition variable of
    // its own (on mu_): a new head is woken alone, not the whole line (50
    // threads woken at every handoff cost each acquisition a thundering herd
    // on this mutex and on the cores).
    std::vector<std::pair<uint64_t, std::condition_variable_any*>> waiting;
  };
  struct HintEntry {
    Hint hint;
    Clock::time_point noted;
    std::list<std::string>::iterator lru;
  };
  // A line of one kept without a Queue: the uncontended acquisition, which
  // then costs no allocation (a Queue is a map node, a deque and a
  // condition variable). It is the line's head exactly as a Queue's only
  // ticket would be; a second Join, a Sleep or Releases turns it into a
  // Queue first (PromoteLocked), so every other call sees the same line.
  struct Solo {
    const std::string* key;  // the joiner's (QueuePlace's), alive until Leave
    size_t hash;
    uint64_t ticket;
  };
  size_t FindSoloLocked(const std::string& key, size_t hash) const REQUIRES(mu_);
  // key's Queue, made from its Solo if it has one (else as queues_[key]).
  Queue& PromoteLocked(const std::string& key) REQUIRES(mu_);
  static constexpr size_t kMaxSolos = 64;  // beyond: Queues, as before

  HintEntry& TouchLocked(const std::string& key) REQUIRES(mu_);
  static constexpr size_t kMaxHints = 4096;
  static constexpr std::chrono::milliseconds kHintLife{2000};

  const Clock::duration slice_;
  Mutex mu_;
  uint64_t next_ticket_ GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, Queue> queues_ GUARDED_BY(mu_);
  std::vector<Solo> solos_ GUARDED_BY(mu_);  // never a key that has a Queue
  std::unordered_map<std::string, HintEntry> hints_ GUARDED_BY(mu_);
  std::list<std::string> lru_ GUARDED_BY(mu_);  // hints_' keys, most recent first
};

}  // namespace dlock

#endif  // DLOCK_CORE_WAITERS_H_
