// The public C++ facades (dlock::Client, dlock::Lock), the registry of lock
// objects that share a hold, the counters by name, version and code names.
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "client_impl.h"
#include "counter_table.h"
#include "dlock/core.hpp"
#include "lock_impl.h"

namespace dlock {

// ---- facades ----------------------------------------------------------------

Client::Client(std::unique_ptr<ClientImpl> impl) : impl_(std::move(impl)) {}

Client::Client(std::vector<std::shared_ptr<Client>> servers, std::vector<std::string> ids,
               std::shared_ptr<Events> events)
    : servers_(std::move(servers)), ids_(std::move(ids)), events_(std::move(events)) {}

Client::~Client() {
  // In a forked child the parent's threads are gone but their mutexes and
  // condition variables may look busy; destroying them can hang. Leak.
  // (A client over several servers: each server's client does the same.)
  if (impl_ && getpid() != impl_->pid()) impl_.release();
}

int Client::pid() const { return impl_ ? impl_->pid() : servers_.front()->pid(); }

Status Client::OpenOne(const ServerSpec& server, const Config& cfg, std::shared_ptr<Events> events,
                       std::shared_ptr<Client>* out) {
  std::unique_ptr<ClientImpl> impl;
  Status s = ClientImpl::Open(server.options, cfg, &impl, std::move(events));
  if (!s.ok()) return s;
  std::shared_ptr<Client> c(new Client(std::move(impl)));
  c->ids_.push_back(server.id);
  c->impl_->StartJanitor();
  *out = std::move(c);
  return Status::OK();
}

Status Client::Open(const std::string& url, const Config& cfg, std::shared_ptr<Client>* out) {
  // Every server is parsed once and checked (identities distinct, the
  // client-wide options alike) before any is connected to.
  std::vector<ServerSpec> specs;
  Status s = ParseServers(url, cfg, &specs);
  if (!s.ok()) return s;
  if (specs.size() == 1) return OpenOne(specs[0], cfg, nullptr, out);
  // Several servers: each is opened as a client of its own, all filling one
  // event queue (its size is the same on every server: ParseServers).
  auto events = std::make_shared<Events>(static_cast<size_t>(specs[0].options.events));
  std::vector<std::shared_ptr<Client>> servers;
  std::vector<std::string> ids;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::shared_ptr<Client> one;
    s = OpenOne(specs[i], cfg, events, &one);
    if (!s.ok()) return ServerError(i, specs.size(), specs[i].id, s);
    servers.push_back(std::move(one));
    ids.push_back(specs[i].id);
  }
  out->reset(new Client(std::move(servers), std::move(ids), std::move(events)));
  return Status::OK();
}

Status Client::ServerOf(const std::string& key, size_t* index) const {
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  *index = servers_.empty() ? 0 : RendezvousPick(ids_, key);
  return Status::OK();
}

Status Client::NextEvent(int64_t wait_ms, Event* out) {
  if (getpid() != pid())
    return Status(Code::kForked, "client was created in another process (fork)");
  if (wait_ms < 0) return Status::Invalid("wait_ms must be 0 or more, got " + std::to_string(wait_ms));
  const bool got = impl_ ? impl_->PopEvent(WaitDeadline(wait_ms), out)
                         : events_->Pop(WaitDeadline(wait_ms), out);
  if (got) return Status::OK();
  return Status(Code::kTimeout, "no event");
}

namespace {
const char* const kCounterNames[] = {
#define DLOCK_COUNTER_NAME(name, ...) #name,
    DLOCK_COUNTERS(DLOCK_COUNTER_NAME) DLOCK_POOL_COUNTERS(DLOCK_COUNTER_NAME)
#undef DLOCK_COUNTER_NAME
    nullptr};
}  // namespace

const char* const* Client::CounterNames() { return kCounterNames; }

Status Client::Counter(const std::string& name, uint64_t* out) const {
  if (!impl_) {  // several servers: the sum of theirs
    uint64_t sum = 0;
    for (const auto& one : servers_) {
      uint64_t v = 0;
      Status s = one->Counter(name, &v);
      if (!s.ok()) return s;
      sum += v;
    }
    *out = sum;
    return Status::OK();
  }
  Counters& counters = impl_->counters();
  Pool& pool = impl_->pool();
#define DLOCK_READ_COUNTER(counter, doc) \
  if (name == #counter) {                \
    *out = counters.counter.load();      \
    return Status::OK();                 \
  }
#define DLOCK_READ_POOL_COUNTER(counter, read, doc) \
  if (name == #counter) {                           \
    *out = read;                                    \
    return Status::OK();                            \
  }
  DLOCK_COUNTERS(DLOCK_READ_COUNTER)
  DLOCK_POOL_COUNTERS(DLOCK_READ_POOL_COUNTER)
#undef DLOCK_READ_COUNTER
#undef DLOCK_READ_POOL_COUNTER
  return Status::Invalid("unknown counter '" + QuoteKey(name) + "'");
}

namespace {
// A client-wide call on every server of a client over several: each runs
// (one server's failure does not keep the others from their turn), and the
// first error comes back naming its server.
Status OnEveryServer(const std::vector<std::shared_ptr<Client>>& servers,
                     const std::vector<std::string>& ids,
                     const std::function<Status(Client&)>& call) {
  Status first;
  for (size_t i = 0; i < servers.size(); ++i) {
    Status s = call(*servers[i]);
    if (!s.ok() && first.ok()) first = ServerError(i, servers.size(), ids[i], s);
  }
  return first;
}
}  // namespace

Status Client::Cleanup(uint64_t* deleted) {
  *deleted = 0;
  if (getpid() != pid())
    return Status(Code::kForked, "client was created in another process (fork)");
  if (!impl_)
    return OnEveryServer(servers_, ids_, [&](Client& one) {
      uint64_t n = 0;
      Status s = one.Cleanup(&n);
      *deleted += n;
      return s;
    });
  bool ran = false;
  return impl_->Cleanup(deleted, &ran);
}

Status Client::EnsureSchema() {
  if (getpid() != pid())
    return Status(Code::kForked, "client was created in another process (fork)");
  if (!impl_) return OnEveryServer(servers_, ids_, [](Client& one) { return one.EnsureSchema(); });
  return impl_->EnsureSchema();
}

Lock::Lock(std::shared_ptr<LockImpl> impl) : impl_(std::move(impl)), me_(new LockCaller) {}

Lock::~Lock() {
  if (!impl_) return;
  if (impl_->forked()) {
    // As ~Client: leak in a forked child (the parent's threads may hold the
    // mutexes), and never release the parent's lock.
    new std::shared_ptr<LockImpl>(std::move(impl_));
    (void)me_.release();
    return;
  }
  impl_->Close(*me_);
}

Status Lock::Open(std::shared_ptr<Client> client, const std::string& key, const Config& cfg,
                  std::unique_ptr<Lock>* out) {
  if (!client) return Status::Invalid("client is NULL");
  if (getpid() != client->pid())
    return Status(Code::kForked, "client was created in another process (fork)");
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  // Several servers: the lock is one of its key's server's client; every
  // call on it goes there and nowhere else.
  if (!client->impl_) return Open(client->servers_[RendezvousPick(client->ids_, key)], key, cfg, out);
  LockOptions opts = client->impl()->lock_defaults();
  for (const auto& kv : cfg.values()) {
    if (!IsLockKey(kv.first))
      return Status::Invalid("option '" + kv.first + "' is a client option; set it on the client");
    if (!(s = ApplyLockOption(kv.first, kv.second, &opts)).ok()) return s;
  }
  if (opts.mode == LockMode::kRow && client->impl()->server().galera)
    return Status(Code::kUnsupported,
                  "row locks are refused on Galera: InnoDB row locks do not exclude across "
                  "nodes; use a lease lock");
  client->impl()->CheckTtlForTopology(opts, key);
  // auto_renew on a row lock is accepted and does nothing: a row lock has no
  // expiry, it is kept until released, which is what auto_renew asks for.
  std::shared_ptr<LockImpl> impl;
  const bool by_thread = opts.holder == Holder::kThread && opts.reentrant;
  if (by_thread || opts.holder == Holder::kLock) {
    ClientImpl* ci = client->impl();
    // A lease lock and a row lock of one key are two locks (two tables).
    // Objects that are each their own holder (holder=lock) share the lock
    // too, so that they wait for each other here, in line, and a release
    // hands the lease straight to the next object (fair=1): without it,
    // each object's waiter learnt of a sibling's release from the server.
    // They share only when their options agree; no object is refused.
    const std::string id = std::string(by_thread ? "" : "object:") +
                           kLockModeWords[static_cast<int>(opts.mode)] + ':' + key;
    s = ci->shared_locks().Get(id, key, opts, [&] { return std::make_shared<LockImpl>(client, key, opts, id); },
                               &impl, /*strict=*/by_thread);
    if (!s.ok()) return s;
  }
  if (!impl) impl = std::make_shared<LockImpl>(std::move(client), key, opts, "");
  out->reset(new Lock(std::move(impl)));
  return Status::OK();
}

// Holder id 0 is the calling OS thread, in every call that takes an id
// (HolderScope), as in a call without one.
Status Lock::Try(int64_t wait_ms) { return impl_->Try(*me_, wait_ms); }
Status Lock::TryAs(uint64_t holder, int64_t wait_ms) {
  HolderScope as(holder);
  return impl_->Try(*me_, wait_ms);
}
Status Lock::TryFrom(uint64_t holder, uint64_t cancel_mark, int64_t wait_ms) {
  HolderScope as(holder);
  return impl_->Try(*me_, wait_ms, &cancel_mark);
}
uint64_t Lock::cancel_mark() const { return impl_->CancelMark(*me_); }
Status Lock::RollbackAs(uint64_t holder) {
  HolderScope as(holder);
  return impl_->Rollback(*me_);
}
int64_t Lock::busy_remaining_ms() const {
  const int64_t us = impl_->BusyRemainingUs(*me_);
  return us < 0 ? -1 : (us + 999) / 1000;
}
int Lock::hold_count_as(uint64_t holder) const {
  HolderScope as(holder);
  return impl_->HoldCountOfCaller(*me_);
}
Status Lock::ReleaseAs(uint64_t holder) {
  HolderScope as(holder);
  return impl_->Release(*me_);
}
Status Lock::Renew() { return impl_->Renew(*me_); }
Status Lock::Release() { return impl_->Release(*me_); }
Status Lock::Abort() { return impl_->Abort(*me_); }
Status Lock::AbortAs(uint64_t holder) {
  HolderScope as(holder);
  return Abort();
}
Status Lock::Rollback() { return impl_->Rollback(*me_); }
Status Lock::Begin() { return impl_->Begin(*me_); }
Status Lock::WaitLost(int64_t timeout_ms) { return impl_->WaitLost(*me_, timeout_ms); }
Status Lock::WaitLostFrom(uint64_t cancel_mark, int64_t timeout_ms) {
  return impl_->WaitLost(*me_, timeout_ms, &cancel_mark);
}
Status Lock::Cancel() {
  // In a forked child the waits to cancel are the parent's: its mutexes may
  // look held, and aborting a wait would hit the parent's connection.
  if (impl_->forked())
    return Status(Code::kForked, "lock '" + QuoteKey(impl_->key()) +
                                     "' was created in another process (fork): nothing to cancel "
                                     "here");
  impl_->Cancel(*me_);
  return Status::OK();
}
Status Lock::Exec(const std::string& sql, const std::vector<const std::string*>& params,
                  int64_t* affected) {
  return impl_->Exec(*me_, sql, params, affected);
}
LockState Lock::state() const { return impl_->CurrentState(*me_); }
std::string Lock::owner() const { return impl_->Owner(*me_); }
const char* Lock::owner_cstr() const { return impl_->OwnerCstr(*me_); }
size_t Lock::copy_owner(char* buf, size_t cap) const { return impl_->CopyOwner(*me_, buf, cap); }
uint64_t Lock::token() const { return impl_->Token(*me_); }
const std::string& Lock::key() const { return impl_->key(); }
const char* Lock::mode() const { return kLockModeWords[static_cast<int>(impl_->options().mode)]; }
int64_t Lock::remaining_ms() const { return impl_->RemainingMs(*me_); }
int Lock::hold_count() const { return impl_->HoldCount(*me_); }

const char* Version() { return DLOCK_VERSION_STRING; }
int VersionNumber() { return DLOCK_VERSION_NUMBER; }

namespace {
constexpr CodeInfo kCodes[] = {
#define DLOCK_CODE_INFO(enumerator, value, c_name, doc) {value, #c_name, doc},
    DLOCK_CODES(DLOCK_CODE_INFO)
#undef DLOCK_CODE_INFO
};

constexpr bool CodeValuesDistinct() {
  for (const CodeInfo& a : kCodes) {
    int same = 0;
    for (const CodeInfo& b : kCodes) same += a.value == b.value ? 1 : 0;
    if (same != 1) return false;
  }
  return true;
}
static_assert(CodeValuesDistinct(), "two rows of DLOCK_CODES share a value");
static_assert(kCodes[0].value == 0, "DLOCK_OK comes first");
}  // namespace

const CodeInfo* Codes(size_t* count) {
  *count = sizeof kCodes / sizeof kCodes[0];
  return kCodes;
}

const char* CodeName(int code) {
  for (const CodeInfo& c : kCodes)
    if (c.value == code) return c.name;
  return "DLOCK_UNKNOWN_CODE";
}

}  // namespace dlock
