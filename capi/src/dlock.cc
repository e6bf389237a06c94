// The C API: translation only. Every entry point catches every exception,
// fills the caller's error and returns a code; no lock logic lives here.
#include "dlock/dlock.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "dlock/core.hpp"

struct dlock_config {
  dlock::Config cfg;
};

struct dlock_client {
  std::shared_ptr<dlock::Client> client;
};

struct dlock_lock {
  std::unique_ptr<dlock::Lock> lock;
};

namespace {

// Every value shared with the C ABI, checked by the compiler.
#define DLOCK_SAME(c, k) static_assert(c == static_cast<int>(k), #c " differs from the core")
// Every code, from the core's table (dlock/code_table.h): a row whose C name
// is missing from dlock.h fails to compile, one with another value fails here.
#define DLOCK_SAME_CODE(enumerator, value, c_name, doc) \
  DLOCK_SAME(c_name, dlock::Code::enumerator);
DLOCK_CODES(DLOCK_SAME_CODE)
#undef DLOCK_SAME_CODE
// States, event types and severities.
DLOCK_SAME(DLOCK_STATE_IDLE, dlock::LockState::kIdle);
DLOCK_SAME(DLOCK_STATE_HELD, dlock::LockState::kHeld);
DLOCK_SAME(DLOCK_STATE_LOST, dlock::LockState::kLost);
DLOCK_SAME(DLOCK_EVENT_LOST, dlock::EventType::kLost);
DLOCK_SAME(DLOCK_EVENT_MAX_HOLD, dlock::EventType::kMaxHold);
DLOCK_SAME(DLOCK_EVENT_RELEASE_GONE, dlock::EventType::kReleaseGone);
DLOCK_SAME(DLOCK_EVENT_RENEW_RETRY, dlock::EventType::kRenewRetry);
DLOCK_SAME(DLOCK_EVENT_CLEANUP, dlock::EventType::kCleanup);
DLOCK_SAME(DLOCK_EVENT_TOPOLOGY, dlock::EventType::kTopology);
DLOCK_SAME(DLOCK_SEVERITY_INFO, dlock::Severity::kInfo);
DLOCK_SAME(DLOCK_SEVERITY_WARNING, dlock::Severity::kWarning);
DLOCK_SAME(DLOCK_SEVERITY_CRITICAL, dlock::Severity::kCritical);
#undef DLOCK_SAME

void CopyString(char* dst, size_t cap, const std::string& src) {
  size_t n = src.size() < cap - 1 ? src.size() : cap - 1;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

int Fill(dlock_error* err, int code, int server_errno, const char* msg) {
  if (err != nullptr) {
    err->code = code;
    err->server_errno = server_errno;
    size_t n = std::strlen(msg);
    if (n >= sizeof err->message) n = sizeof err->message - 1;
    std::memcpy(err->message, msg, n);
    err->message[n] = '\0';
  }
  return code;
}

int Report(const dlock::Status& s, dlock_error* err) {
  return Fill(err, static_cast<int>(s.code()), s.server_errno(), s.message().c_str());
}

int Null(dlock_error* err, const char* what) {
  std::string m = std::string(what) + " is NULL";
  return Fill(err, DLOCK_E_INVALID, 0, m.c_str());
}

// Runs f, turning any exception into DLOCK_E_INTERNAL: none may cross the C
// boundary.
template <class F>
int Guard(dlock_error* err, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Fill(err, DLOCK_E_INTERNAL, 0, "out of memory");
  } catch (const std::exception& e) {
    return Fill(err, DLOCK_E_INTERNAL, 0, e.what());
  } catch (...) {
    return Fill(err, DLOCK_E_INTERNAL, 0, "unknown internal error");
  }
}

const dlock::Config& ConfigOf(const dlock_config* cfg) {
  static const dlock::Config kEmpty;
  return cfg != nullptr ? cfg->cfg : kEmpty;
}

}  // namespace

extern "C" {

const char* dlock_version(void) { return dlock::Version(); }

int dlock_version_number(void) { return dlock::VersionNumber(); }

const char* dlock_code_name(int code) { return dlock::CodeName(code); }

int dlock_config_new(dlock_config** out, dlock_error* err) {
  if (out == nullptr) return Null(err, "out");
  *out = nullptr;
  return Guard(err, [&] {
    *out = new dlock_config();
    return Fill(err, DLOCK_OK, 0, "");
  });
}

void dlock_config_free(dlock_config* cfg) { delete cfg; }

int dlock_config_set(dlock_config* cfg, const char* key, const char* value, dlock_error* err) {
  if (cfg == nullptr) return Null(err, "config");
  if (key == nullptr) return Null(err, "key");
  if (value == nullptr) return Null(err, "value");
  return Guard(err, [&] { return Report(cfg->cfg.Set(key, value), err); });
}

int dlock_client_open(dlock_client** out, const char* url, const dlock_config* cfg,
                      dlock_error* err) {
  if (out == nullptr) return Null(err, "out");
  *out = nullptr;
  if (url == nullptr) return Null(err, "url");
  return Guard(err, [&] {
    std::shared_ptr<dlock::Client> c;
    dlock::Status s = dlock::Client::Open(url, ConfigOf(cfg), &c);
    if (!s.ok()) return Report(s, err);
    *out = new dlock_client{std::move(c)};
    return Fill(err, DLOCK_OK, 0, "");
  });
}

// No try/catch around delete: destructors are noexcept, so nothing can
// escape (an exception inside one would call std::terminate anyway).
void dlock_client_close(dlock_client* client) {
  delete client;  // locks still open keep the core client alive until closed
}

int dlock_open(dlock_lock** out, dlock_client* client, const char* key, size_t key_len,
               const dlock_config* cfg, dlock_error* err) {
  if (out == nullptr) return Null(err, "out");
  *out = nullptr;
  if (client == nullptr) return Null(err, "client");
  if (key == nullptr) return Null(err, "key");
  return Guard(err, [&] {
    std::unique_ptr<dlock::Lock> l;
    dlock::Status s = dlock::Lock::Open(client->client, std::string(key, key_len), ConfigOf(cfg), &l);
    if (!s.ok()) return Report(s, err);
    *out = new dlock_lock{std::move(l)};
    return Fill(err, DLOCK_OK, 0, "");
  });
}

void dlock_close(dlock_lock* lock) { delete lock; }  // noexcept, as dlock_client_close

int dlock_try(dlock_lock* lock, int64_t wait_ms, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->Try(wait_ms), err); });
}

int dlock_try_as(dlock_lock* lock, uint64_t holder, int64_t wait_ms, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->TryAs(holder, wait_ms), err); });
}

int dlock_release_as(dlock_lock* lock, uint64_t holder, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->ReleaseAs(holder), err); });
}

int dlock_abort_as(dlock_lock* lock, uint64_t holder, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->AbortAs(holder), err); });
}

int dlock_rollback_as(dlock_lock* lock, uint64_t holder, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->RollbackAs(holder), err); });
}

int dlock_hold_count_as(const dlock_lock* lock, uint64_t holder) {
  return lock == nullptr ? 0 : lock->lock->hold_count_as(holder);
}

int64_t dlock_busy_remaining_ms(const dlock_lock* lock) {
  return lock == nullptr ? -1 : lock->lock->busy_remaining_ms();
}

uint64_t dlock_cancel_mark(const dlock_lock* lock) {
  return lock == nullptr ? 0 : lock->lock->cancel_mark();
}

int dlock_try_from(dlock_lock* lock, uint64_t holder, uint64_t cancel_mark, int64_t wait_ms,
                   dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->TryFrom(holder, cancel_mark, wait_ms), err); });
}

int dlock_renew(dlock_lock* lock, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->Renew(), err); });
}

int dlock_release(dlock_lock* lock, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->Release(), err); });
}

int dlock_abort(dlock_lock* lock, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->Abort(), err); });
}

int dlock_rollback(dlock_lock* lock, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->Rollback(), err); });
}

int dlock_exec(dlock_lock* lock, const char* sql, const char* const* params, size_t nparams,
               int64_t* out_affected, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  if (sql == nullptr) return Null(err, "sql");
  if (nparams > 0 && params == nullptr) return Null(err, "params");
  return Guard(err, [&] {
    std::vector<std::string> store;
    store.reserve(nparams);
    std::vector<const std::string*> ps;
    for (size_t i = 0; i < nparams; ++i) {
      if (params[i] == nullptr) {
        ps.push_back(nullptr);
      } else {
        store.emplace_back(params[i]);
        ps.push_back(&store.back());
      }
    }
    return Report(lock->lock->Exec(sql, ps, out_affected), err);
  });
}

int dlock_begin(dlock_lock* lock, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->Begin(), err); });
}

int dlock_wait_lost(dlock_lock* lock, int64_t timeout_ms, dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->WaitLost(timeout_ms), err); });
}

int dlock_wait_lost_from(dlock_lock* lock, uint64_t cancel_mark, int64_t timeout_ms,
                         dlock_error* err) {
  if (lock == nullptr) return Null(err, "lock");
  return Guard(err, [&] { return Report(lock->lock->WaitLostFrom(cancel_mark, timeout_ms), err); });
}

int dlock_cancel(dlock_lock* lock) {
  if (lock == nullptr) return DLOCK_E_INVALID;
  return Guard(nullptr, [&] { return static_cast<int>(lock->lock->Cancel().code()); });
}

int dlock_hold_count(const dlock_lock* lock) { return lock == nullptr ? 0 : lock->lock->hold_count(); }

const char* dlock_mode(const dlock_lock* lock) { return lock == nullptr ? "" : lock->lock->mode(); }

int dlock_client_next_event(dlock_client* client, dlock_event* out, int64_t wait_ms,
                            dlock_error* err) {
  if (client == nullptr) return Null(err, "client");
  if (out == nullptr) return Null(err, "out");
  return Guard(err, [&] {
    dlock::Event e;
    dlock::Status s = client->client->NextEvent(wait_ms, &e);
    if (!s.ok()) return Report(s, err);
    std::memset(out, 0, sizeof *out);
    out->type = static_cast<int>(e.type);
    out->severity = static_cast<int>(e.severity);
    out->unix_ms = e.unix_ms;
    out->token = e.token;
    out->key_len = e.key.size() < sizeof out->key ? e.key.size() : sizeof out->key - 1;
    std::memcpy(out->key, e.key.data(), out->key_len);
    CopyString(out->owner, sizeof out->owner, e.owner);
    CopyString(out->message, sizeof out->message, e.message);
    return Fill(err, DLOCK_OK, 0, "");
  });
}

int dlock_client_counter(const dlock_client* client, const char* name, uint64_t* out,
                         dlock_error* err) {
  if (client == nullptr) return Null(err, "client");
  if (name == nullptr) return Null(err, "name");
  if (out == nullptr) return Null(err, "out");
  return Guard(err, [&] { return Report(client->client->Counter(name, out), err); });
}

const char* const* dlock_counter_names(void) { return dlock::Client::CounterNames(); }

int dlock_client_cleanup(dlock_client* client, uint64_t* out_deleted, dlock_error* err) {
  if (client == nullptr) return Null(err, "client");
  return Guard(err, [&] {
    uint64_t deleted = 0;
    dlock::Status s = client->client->Cleanup(&deleted);
    if (out_deleted != nullptr) *out_deleted = deleted;
    return Report(s, err);
  });
}

int dlock_client_init_schema(dlock_client* client, dlock_error* err) {
  if (client == nullptr) return Null(err, "client");
  return Guard(err, [&] { return Report(client->client->EnsureSchema(), err); });
}

size_t dlock_client_server_count(const dlock_client* client) {
  return client == nullptr ? 0 : client->client->server_count();
}

int dlock_client_server_of(const dlock_client* client, const char* key, size_t key_len,
                           size_t* out_index, char* id_buf, size_t id_buf_size, dlock_error* err) {
  if (client == nullptr) return Null(err, "client");
  if (key == nullptr) return Null(err, "key");
  if (out_index == nullptr) return Null(err, "out_index");
  return Guard(err, [&] {
    const std::string k(key, key_len);
    size_t i = 0;
    dlock::Status s = client->client->ServerOf(k, &i);
    if (!s.ok()) return Report(s, err);
    *out_index = i;
    if (id_buf != nullptr && id_buf_size > 0) {
      const std::string& id = client->client->server_id(i);
      const size_t n = std::min(id.size(), id_buf_size - 1);
      memcpy(id_buf, id.data(), n);
      id_buf[n] = '\0';
    }
    return Fill(err, DLOCK_OK, 0, "");
  });
}

int dlock_state(const dlock_lock* lock) {
  if (lock == nullptr) return DLOCK_STATE_IDLE;
  return static_cast<int>(lock->lock->state());
}

int dlock_held(const dlock_lock* lock) {
  return lock != nullptr && lock->lock->state() == dlock::LockState::kHeld ? 1 : 0;
}

const char* dlock_owner(const dlock_lock* lock) {
  if (lock == nullptr) return "";
  return lock->lock->owner_cstr();
}

size_t dlock_owner_copy(const dlock_lock* lock, char* buf, size_t buf_size) {
  if (lock == nullptr) {
    if (buf != nullptr && buf_size > 0) buf[0] = '\0';
    return 0;
  }
  return lock->lock->copy_owner(buf, buf_size);
}

uint64_t dlock_token(const dlock_lock* lock) { return lock == nullptr ? 0 : lock->lock->token(); }

const char* dlock_key(const dlock_lock* lock, size_t* out_len) {
  if (lock == nullptr) {
    if (out_len != nullptr) *out_len = 0;
    return "";
  }
  const std::string& k = lock->lock->key();
  if (out_len != nullptr) *out_len = k.size();
  return k.c_str();
}

int64_t dlock_remaining_ms(const dlock_lock* lock) {
  return lock == nullptr ? 0 : lock->lock->remaining_ms();
}

}  // extern "C"
