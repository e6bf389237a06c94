// One lock object: the state machine shared by both schemes, reentrancy,
// local waiting, and the hooks the watchdog calls.
#ifndef DLOCK_CORE_LOCK_IMPL_H_
#define DLOCK_CORE_LOCK_IMPL_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client_impl.h"
#include "dlock/core.hpp"

namespace dlock {

class LockImpl {
 public:
  LockImpl(std::shared_ptr<Client> client, std::string key, LockOptions opts);
  ~LockImpl();

  Status Try(int64_t wait_ms);
  Status Renew();
  Status Release();
  Status Rollback();
  Status Begin();
  Status Exec(const std::string& sql, const std::vector<const std::string*>& params,
              int64_t* affected);
  Status WaitLost(int64_t timeout_ms);
  void Cancel();

  LockState CurrentState() const;
  std::string Owner() const;
  const char* OwnerCstr() const;
  uint64_t Token() const;
  const std::string& key() const { return key_; }
  int64_t RemainingMs() const;
  int HoldCount() const;
  bool forked() const { return getpid() != pid_; }

  // Watchdog hooks; called with the watchdog's mutex held, never with ours.
  void OnRenewed(const std::string& owner, Clock::time_point deadline);
  void OnLost(const std::string& owner, const std::string& why);

 private:
  std::string Name() const;
  Status CheckPid() const;
  bool IsHolderLocked() const;
  LockState StateLocked() const;
  std::string LostWhyLocked() const;
  void SetLostLocked(std::string why);
  bool Cancelled(uint64_t seen) const { return cancel_seq_.load() != seen; }

  // The database part of an acquisition; no mutex of ours held.
  Status LeaseAcquire(Clock::time_point deadline, uint64_t cancel_seen, uint64_t* fence,
                      std::string* owner, Clock::time_point* lease_deadline);
  Status RowAcquire(Clock::time_point deadline, uint64_t cancel_seen, uint64_t* fence);
  // Waits for the wake-up name on conn (GET_LOCK), at most timeout; true
  // when we got it.
  Status GetWakeName(Conn& conn, Clock::time_point until, uint64_t cancel_seen, bool* got);
  void DropWakeName();
  Status LeaseReleaseDb(Status* business);
  Status RowEnd(const char* how);
  Status CommitOrRollbackTxn(const char* how);

  std::shared_ptr<Client> client_;
  ClientImpl* c_;
  const std::string key_;      // the user's key
  const std::string db_key_;   // the row it maps to (differs with shards=N)
  const std::string wake_name_;
  const LockOptions opts_;
  const pid_t pid_;

  std::mutex op_mu_;  // serialises Renew/Release/Rollback/Begin/Exec
  mutable std::mutex st_mu_;
  std::condition_variable cv_;  // state changes: acquired, released, lost
  LockState state_ = LockState::kIdle;
  bool acquiring_ = false;
  std::thread::id holder_;
  int count_ = 0;
  bool released_ = false;  // the database side of the last hold was released
  std::string owner_;
  std::string lost_why_;
  uint64_t fence_ = 0;
  Clock::time_point acquired_at_{};
  Clock::time_point deadline_{};
  std::atomic<uint64_t> cancel_seq_{0};
  std::atomic<unsigned long> server_wait_id_{0};  // connection id blocked in a server wait

  // Connections this lock holds while it is held (owned by the op in
  // progress or by the held lock; guarded by op_mu_ / acquiring_):
  PooledConn row_conn_;   // row lock: the transaction
  bool row_dirty_ = false;  // Exec ran statements in the row lock's transaction
  PooledConn own_conn_;   // lease: the lock's own connection, when it needs one
  bool has_wake_name_ = false;  // own_conn_ holds the wake-up name (GET_LOCK)
  bool txn_open_ = false;       // Begin() opened a transaction on own_conn_
};

}  // namespace dlock

#endif  // DLOCK_CORE_LOCK_IMPL_H_
