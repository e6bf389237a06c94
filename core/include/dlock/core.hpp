// The C++ facade of dlock's core. The C API (capi/) and the Python extension
// wrap exactly this; all lock logic lives behind it.
#ifndef DLOCK_CORE_HPP_
#define DLOCK_CORE_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dlock {

// Values are part of the C ABI (dlock_code); never renumber.
enum class Code : int {
  kOk = 0,
  kBusy = 1,
  kInvalid = -1,
  kConnect = -2,
  kLost = -3,
  kReadOnly = -4,
  kUnsupported = -5,
  kDb = -6,
  kState = -7,
  kForked = -8,
  kPool = -9,
  kUnknown = -10,
  kInternal = -11,
  kTimeout = -12,
};

const char* CodeName(int code);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message, int server_errno = 0)
      : code_(code), server_errno_(server_errno), message_(std::move(message)) {}
  static Status OK() { return Status(); }
  static Status Busy(std::string m) { return Status(Code::kBusy, std::move(m)); }
  static Status Invalid(std::string m) { return Status(Code::kInvalid, std::move(m)); }
  static Status Lost(std::string m) { return Status(Code::kLost, std::move(m)); }
  static Status StateError(std::string m) { return Status(Code::kState, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  int server_errno() const { return server_errno_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::kOk;
  int server_errno_ = 0;
  std::string message_;
};

// String-keyed options. Set() validates the key and the value at once, so a
// typo is reported where it is made. Keys are listed in capi/include/dlock/dlock.h.
class Config {
 public:
  Status Set(const std::string& key, const std::string& value);
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

enum class LockState : int { kIdle = 0, kHeld = 1, kLost = 2 };

class ClientImpl;
class LockImpl;

// A client owns a bounded pool of connections to one server. Thread-safe.
class Client {
 public:
  static Status Open(const std::string& url, const Config& cfg, std::shared_ptr<Client>* out);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  ClientImpl* impl() const { return impl_.get(); }

 private:
  explicit Client(std::unique_ptr<ClientImpl> impl);
  std::unique_ptr<ClientImpl> impl_;
};

// One named lock. Thread-safe: operations are serialised per object.
class Lock {
 public:
  static Status Open(std::shared_ptr<Client> client, const std::string& key, const Config& cfg,
                     std::unique_ptr<Lock>* out);
  ~Lock();  // releases a held lock (best effort)
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  // kOk (held) or kBusy (not acquired within wait_ms), or an error.
  Status Try(int64_t wait_ms);
  Status Renew();
  Status Release();
  Status Rollback();
  // Row locks: runs sql on the lock's own transaction. nullptr param = NULL.
  Status Exec(const std::string& sql, const std::vector<const std::string*>& params,
              int64_t* affected);

  LockState state() const;
  bool held() const { return state() == LockState::kHeld; }
  std::string owner() const;
  const char* owner_cstr() const;  // valid until the next Try
  uint64_t token() const;
  const std::string& key() const;
  int64_t remaining_ms() const;

 private:
  explicit Lock(std::unique_ptr<LockImpl> impl);
  std::unique_ptr<LockImpl> impl_;
};

const char* Version();

}  // namespace dlock

#endif  // DLOCK_CORE_HPP_
