// The C++ facade of dlock's core. The C API (capi/) and the Python extension
// wrap exactly this; all lock logic lives behind it.
#ifndef DLOCK_CORE_HPP_
#define DLOCK_CORE_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dlock/code_table.h"

namespace dlock {

// Values are part of the C ABI (dlock_code); never renumber. One row per
// code in dlock/code_table.h.
enum class Code : int {
#define DLOCK_CODE_ENUMERATOR(enumerator, value, c_name, doc) enumerator = value,
  DLOCK_CODES(DLOCK_CODE_ENUMERATOR)
#undef DLOCK_CODE_ENUMERATOR
};

// One code of the table, for bindings that list them (Python's code map).
struct CodeInfo {
  int value;
  const char* name;  // "DLOCK_E_LOST"
  const char* doc;
};
// Every code, in the table's order; *count gets their number.
const CodeInfo* Codes(size_t* count);

// "DLOCK_E_LOST"; "DLOCK_UNKNOWN_CODE" for a value not in the table.
const char* CodeName(int code);

class [[nodiscard]] Status {
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

// Values are part of the C ABI (dlock_event_type / dlock_severity).
enum class EventType : int {
  kLost = 1,          // a held lease was lost (expired by the DB clock or taken)
  kMaxHold = 2,       // the max-hold breaker stopped renewing a lease
  kReleaseGone = 3,   // release found the row no longer ours
  kRenewRetry = 4,    // a renewal failed transiently and is being retried
  kCleanup = 5,       // cleanup removed expired rows
  kTopology = 6,      // a setting does not fit the server's topology (a short ttl on Galera)
};
enum class Severity : int { kInfo = 0, kWarning = 1, kCritical = 2 };

struct Event {
  EventType type = EventType::kLost;
  Severity severity = Severity::kInfo;
  int64_t unix_ms = 0;  // wall-clock time the event was raised (for logs only)
  uint64_t token = 0;
  std::string key;
  std::string owner;
  std::string message;
};

class ClientImpl;
class LockImpl;
struct ServerSpec;
struct LockCaller;
class Events;

// ---- several independent servers in one client -----------------------------
// A URL may name several independent servers (each a lock space of its own,
// each possibly a multi-host Galera URL): full URLs joined by ';', split only
// where a new mysql://, mariadb:// (either also +DRIVER), jdbc:mysql:// or
// jdbc:mariadb:// URL begins, in any case (so a ';' in a password, a database name or an option value does
// not split, unless a URL's scheme follows it: write that ';' as %3B), and
// only when the string itself starts with such a URL (a go-sql-driver DSN is
// never split and cannot be a member). Every key lives on
// exactly one of them, chosen by rendezvous (highest random weight) hashing:
// the server whose RendezvousScore(identity, key) is highest (ties: the
// smaller identity), so the choice depends only on the set of identities and
// the key's bytes, not on the list's order, the process or the platform, and
// adding a server moves only the keys the new one wins (about 1/n).
constexpr size_t kMaxServers = 64;
// The URL's servers in its order (one element when it names one).
std::vector<std::string> SplitServerUrls(const std::string& url);
// 64-bit FNV-1a over identity, one NUL byte and key, then SplitMix64's
// finalizer (z ^= z>>30; z *= 0xbf58476d1ce4e5b9; z ^= z>>27;
// z *= 0x94d049bb133111eb; z ^= z>>31). Pinned by tests/core/test_servers.cc.
uint64_t RendezvousScore(const std::string& server_id, const std::string& key);
// The index in server_ids of the key's server (0 for an empty list).
size_t RendezvousPick(const std::vector<std::string>& server_ids, const std::string& key);
// Each server's identity, in the URL's order: its address (host:port, or the
// nodes of a multi-host URL sorted, host names in lower case, or unix:path),
// then /database?table=..&row_table=.. (cfg's values win over the URL's, as
// in Client::Open); never the user or the password. kInvalid for a server
// that does not parse (naming its place), a server listed twice, a
// port-less localhost in a list (the default unix socket; localhost:PORT is
// 127.0.0.1:PORT), or servers whose client-wide option (events: the
// client has one event queue) differs.
Status ServerIds(const std::string& url, const Config& cfg, std::vector<std::string>* out);

// A client owns a bounded pool of connections to one server. Thread-safe.
// With a URL naming several servers (above) it owns one such client per
// server and sends each lock to its key's server; the client-wide calls act
// on every server (NextEvent: events of all; Counter: the sum; Cleanup and
// EnsureSchema: each server in turn, the first error naming its server).
class Client {
 public:
  static Status Open(const std::string& url, const Config& cfg, std::shared_ptr<Client>* out);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Next event from the client's queue, waiting up to wait_ms. kOk with
  // *out filled, or kTimeout when none came.
  Status NextEvent(int64_t wait_ms, Event* out);
  // Counter by name (see CounterNames()); kInvalid for an unknown name.
  Status Counter(const std::string& name, uint64_t* out) const;
  static const char* const* CounterNames();  // nullptr-terminated
  // Deletes expired leases (in batches, through the expiry index) if no other
  // client is cleaning right now; *deleted counts the rows removed.
  Status Cleanup(uint64_t* deleted);
  // Creates the lock tables that are missing and checks the columns of those
  // that exist, as Open does: for an open client after the tables were
  // dropped, or for a setup step. Idempotent. kDb names a table whose
  // columns are not dlock's.
  Status EnsureSchema();

  // The number of servers (1 for a URL naming one), each one's identity (as
  // ServerIds) and the index of a key's server, in the URL's order (kInvalid
  // for a key Lock::Open refuses).
  size_t server_count() const { return servers_.empty() ? 1 : servers_.size(); }
  const std::string& server_id(size_t i) const { return ids_.at(i); }
  Status ServerOf(const std::string& key, size_t* index) const;

  // One server's client; nullptr for a client over several servers.
  ClientImpl* impl() const { return impl_.get(); }

 private:
  friend class Lock;
  explicit Client(std::unique_ptr<ClientImpl> impl);
  Client(std::vector<std::shared_ptr<Client>> servers, std::vector<std::string> ids,
         std::shared_ptr<Events> events);
  static Status OpenOne(const ServerSpec& server, const Config& cfg, std::shared_ptr<Events> events,
                        std::shared_ptr<Client>* out);
  // The process that opened it (kForked checks).
  int pid() const;
  std::unique_ptr<ClientImpl> impl_;             // one server
  std::vector<std::shared_ptr<Client>> servers_;  // several: one client each
  std::vector<std::string> ids_;
  std::shared_ptr<Events> events_;  // several: the queue every server's client fills
};

// One named lock. Thread-safe: operations are serialised per object. Objects
// of one client for the same key with holder=thread and reentrant=1 share
// their hold: the thread that holds the key enters again through any of
// them; the last release (through any of them) releases it; closing one
// gives back the holds it took. They must agree on every lock option: Open
// refuses (kInvalid, naming the option) one that differs from an object
// still open. Objects with holder=lock and the same options share the lock
// but not the hold: each is its own holder, and they wait for each other in
// this client's line (a release hands the lease to the next one). The accessors, WaitLost and the calls that act on a hold
// answer for the caller's own hold (dlock.h, "Whose hold").
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
  // Ends the hold without committing (the work failed): the hold's
  // transaction (a row lock's; a lease's, once begun) rolls back and the
  // lease is given back, whatever the reentrant count: every level ends.
  Status Abort();
  Status Rollback();
  // Lease locks: opens a transaction on a connection of the lock's own, so
  // that Exec runs there and Release commits it with the release (A7).
  Status Begin();
  // Blocks until the lock is lost (kLost), released/not held (kOk), the
  // timeout passes (kTimeout) or Cancel() is called (kCancelled).
  Status WaitLost(int64_t timeout_ms);
  // Makes a Try or WaitLost running in another thread return kCancelled.
  // kForked (and nothing done, nothing sent) in a forked child.
  Status Cancel();
  // Row locks (or a lease after Begin): runs sql on the lock's own
  // transaction. nullptr param = NULL.
  Status Exec(const std::string& sql, const std::vector<const std::string*>& params,
              int64_t* affected);

  LockState state() const;
  bool held() const { return state() == LockState::kHeld; }
  // Try/Release on behalf of a holder id instead of the calling OS thread
  // (holder=thread locks; ignored with holder=lock): for bindings whose
  // threads move between OS threads (Java virtual threads). Id 0: the
  // calling OS thread, in each of these.
  Status TryAs(uint64_t holder, int64_t wait_ms);
  Status ReleaseAs(uint64_t holder);
  Status AbortAs(uint64_t holder);
  Status RollbackAs(uint64_t holder);
  int hold_count_as(uint64_t holder) const;
  // After kBusy on a lease: ms the holder's lease still had (server clock); -1 unknown.
  int64_t busy_remaining_ms() const;  // holder's holds (0 if another holds it)
  // The object's cancel count now; TryFrom counts only cancels after it, also
  // one that came before the call began. holder 0: the calling OS thread.
  uint64_t cancel_mark() const;
  Status TryFrom(uint64_t holder, uint64_t cancel_mark, int64_t wait_ms);
  // WaitLost counting every Cancel after cancel_mark, also one that came
  // before the call began (as TryFrom).
  Status WaitLostFrom(uint64_t cancel_mark, int64_t timeout_ms);
  std::string owner() const;
  const char* owner_cstr() const;  // valid until the next Try
  // Copies the owner id into buf (cut at cap - 1, NUL-terminated); returns
  // its full length. Safe while other threads acquire.
  size_t copy_owner(char* buf, size_t cap) const;
  uint64_t token() const;
  const std::string& key() const;
  // "lease" or "row" (static strings, as dlock_config_set takes them).
  const char* mode() const;
  int64_t remaining_ms() const;
  int hold_count() const;  // reentrant holds (0 when not held)

 private:
  explicit Lock(std::shared_ptr<LockImpl> impl);
  std::shared_ptr<LockImpl> impl_;  // shared by the objects of one key (see above)
  std::unique_ptr<LockCaller> me_;  // this object's calls, cancel and holds
};

const char* Version();
// major * 10000 + minor * 100 + patch, e.g. 10300 for "1.3.0".
int VersionNumber();

}  // namespace dlock

#endif  // DLOCK_CORE_HPP_
