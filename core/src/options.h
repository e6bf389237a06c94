// Parsed, validated options for clients and locks.
#ifndef DLOCK_CORE_OPTIONS_H_
#define DLOCK_CORE_OPTIONS_H_

#include <cstdint>
#include <string>

#include "dlock/core.hpp"

namespace dlock {

constexpr size_t kMaxKeyBytes = 512;
constexpr int64_t kMaxTtlMs = 30LL * 24 * 3600 * 1000;  // 30 days
constexpr int64_t kMaxWaitMs = 24LL * 3600 * 1000;      // 1 day: nobody waits forever

enum class SslMode { kDisable, kRequire, kVerify };

struct ClientOptions {
  std::string user;
  std::string password;  // never printed
  std::string host = "127.0.0.1";
  unsigned port = 3306;
  std::string database;
  std::string socket;
  int pool = 8;
  int connect_timeout_s = 5;
  int read_timeout_s = 30;
  std::string table = "distributed_lock";
  std::string row_table = "fixed_lock";
  SslMode ssl_mode = SslMode::kDisable;
  std::string ssl_ca;
  int64_t cleanup_interval_ms = 0;       // 0 = no periodic cleanup
  int64_t cleanup_grace_ms = 3600000;    // delete leases expired longer ago than this
  int cleanup_batch = 1000;              // rows per cleanup transaction
  int events = 1024;                     // event queue capacity (oldest dropped)

  // "host:port/db" or "socket/db": safe to print (no user, no password).
  std::string Where() const;
};

enum class LockMode { kLease, kRow };

enum class Holder { kThread, kLock };
enum class Wakeup { kAuto, kPoll };

struct LockOptions {
  LockMode mode = LockMode::kLease;
  int64_t ttl_ms = 30000;
  bool auto_renew = false;
  int64_t max_hold_ms = 300000;  // 0 = no limit (A9: default 5 minutes)
  bool reentrant = true;
  // Lease: each acquisition also opens its transaction (A7), as if begin
  // followed; if that fails, the lease is released again.
  bool transaction = false;
  Holder holder = Holder::kThread;
  int shards = 0;                // 0 = the key is the lock row itself
  std::string shard_group = "dlock-shard";
  Wakeup wakeup = Wakeup::kAuto;
};

// Parses mysql://user[:password]@host[:port]/database[?k=v&...].
Status ParseUrl(const std::string& url, ClientOptions* out);
// Applies one option (from the URL query or a Config) to client options.
Status ApplyClientOption(const std::string& key, const std::string& value, ClientOptions* out);
Status ApplyLockOption(const std::string& key, const std::string& value, LockOptions* out);
bool IsClientKey(const std::string& key);
bool IsLockKey(const std::string& key);

// Table names: [A-Za-z_][A-Za-z0-9_]*, at most 58 bytes (a suffix is added
// for the lease table's companion).
Status ValidateIdentifier(const std::string& name, const char* what);
Status ValidateKey(const std::string& key);
// Whole decimal integer in [lo, hi]; what names the option in the message.
Status ParseInt(const std::string& s, int64_t lo, int64_t hi, const char* what, int64_t* out);
// A printable, bounded rendering of a key for messages.
std::string QuoteKey(const std::string& key);

}  // namespace dlock

#endif  // DLOCK_CORE_OPTIONS_H_
