// dlock._core: the pybind11 adapter over the C++ facade (dlock/core.hpp).
//
// Translation only, like capi/: no lock logic lives here. What it adds is what
// Python needs from a native call:
//  - the GIL is released around every call that may touch the network or wait;
//  - a wait on the main thread can be interrupted by a signal (Ctrl-C): a
//    helper thread watches Python's signal wake-up fd and calls Lock::Cancel(),
//    then the Python-level handler runs (KeyboardInterrupt) on this thread;
//  - Status codes become the exception classes of dlock._errors;
//  - a thread that gets the GIL back while the interpreter is finalizing is
//    parked instead of unwound (see Nogil), so that a daemon thread inside a
//    dlock call at exit cannot abort the process.
// The core never calls Python: no callback crosses into the interpreter from a
// core thread.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cxxabi.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/core.hpp"

namespace py = pybind11;

namespace {

using SteadyClock = std::chrono::steady_clock;

// Core strings are bytes (keys may be anything but NUL): never fail to decode.
py::str Text(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "backslashreplace");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// Raises the dlock exception for s (GIL held). The classes live in Python
// (dlock/_errors.py) so that they are ordinary, picklable Python classes.
[[noreturn]] void Raise(const dlock::Status& s) {
  py::object make = py::module_::import("dlock._errors").attr("_from_core");
  py::object exc = make(static_cast<int>(s.code()), s.server_errno(), Text(s.message()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

void Check(const dlock::Status& s) {
  if (!s.ok()) Raise(s);
}

dlock::Config MakeConfig(const std::map<std::string, std::string>& options) {
  dlock::Config cfg;
  for (const auto& kv : options) Check(cfg.Set(kv.first, kv.second));
  return cfg;
}

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Runs call() with the GIL released and takes it back.
//
// Python < 3.14 ends a thread that asks for the GIL back while the interpreter
// is finalizing with pthread_exit(): a forced unwind. Through pybind11's
// gil_scoped_release (a noexcept destructor) that is std::terminate, which is
// how a daemon thread inside a dlock call aborted the process at exit. Here
// the GIL is taken back in a plain frame that catches the forced unwind and
// parks the thread for good instead: it holds nothing of ours, and the
// process is about to end (Python 3.14 parks such threads the same way).
[[noreturn]] void Park() {
  for (;;) pause();
}

void TakeGilBack(PyThreadState* ts) noexcept {
  try {
    PyEval_RestoreThread(ts);
  } catch (abi::__forced_unwind&) {
    Park();  // must not return: the unwind is neither finished nor swallowed
  }
}

template <class Call>
auto Nogil(Call call) -> decltype(call()) {
  PyThreadState* ts = PyEval_SaveThread();
  try {
    auto r = call();
    TakeGilBack(ts);
    return r;
  } catch (...) {
    TakeGilBack(ts);
    throw;
  }
}

template <class Call>
void NogilVoid(Call call) {
  Nogil([&] {
    call();
    return 0;
  });
}

bool OnMainThread() {
  py::module_ threading = py::module_::import("threading");
  py::object main_ident = threading.attr("main_thread")().attr("ident");
  py::object ident = threading.attr("get_ident")();
  return main_ident.equal(ident);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

bool MakePipe(Fd* r, Fd* w, bool nonblocking) {
  int p[2];
  if (pipe(p) != 0) return false;
  r->fd = p[0];
  w->fd = p[1];
  for (int fd : p) {
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (nonblocking) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return true;
}

// Runs call() with the GIL released. On the main thread, a signal arriving
// meanwhile makes lock->Cancel() interrupt it (*signalled = true); the caller
// then runs the Python signal handlers. Python's C-level handler writes the
// signal number to the wake-up fd (signal.set_wakeup_fd); a helper thread
// waits on it. The previous wake-up fd (asyncio's self-pipe, say) is restored
// afterwards and receives the bytes it missed.
// call() must count cancels from a mark taken before this (TryFrom,
// WaitLostFrom): the watcher may send its one Cancel before call() has
// entered the core, which a plain Try or WaitLost would not see.
// Callers use it only for a call that really waits: the first attempt of an
// acquisition runs inline, without any of this (see PyLock::Try).
template <class Call>
dlock::Status Interruptible(dlock::Lock* lock, Call call, bool* signalled) {
  *signalled = false;
  Fd sig_r, sig_w, stop_r, stop_w;
  py::object signal_mod;
  int old_fd = -1;
  bool watching = false;
  if (OnMainThread() && MakePipe(&sig_r, &sig_w, true) && MakePipe(&stop_r, &stop_w, false)) {
    try {
      signal_mod = py::module_::import("signal");
      old_fd = py::cast<int>(
          signal_mod.attr("set_wakeup_fd")(sig_w.fd, py::arg("warn_on_full_buffer") = false));
      watching = true;
    } catch (py::error_already_set&) {
      PyErr_Clear();  // not possible here (e.g. a subinterpreter): wait uninterruptibly
    }
  }
  if (!watching) return Nogil(call);
  // A signal that came before our wake-up fd was in place (during the
  // inline first attempt, say) wrote nothing to it: look now, or an
  // unlimited wait would never see that Ctrl-C.
  if (PyErr_CheckSignals() != 0) {
    py::error_already_set e;
    try {
      signal_mod.attr("set_wakeup_fd")(old_fd);
    } catch (py::error_already_set&) {
      PyErr_Clear();
    }
    throw e;
  }
  std::atomic<bool> fired{false};
  dlock::Status s = Nogil([&] {
    std::thread watcher([&] {
      pollfd p[2] = {{sig_r.fd, POLLIN, 0}, {stop_r.fd, POLLIN, 0}};
      while (poll(p, 2, -1) < 0 && errno == EINTR) {
      }
      if (p[0].revents & POLLIN) {
        fired = true;
        (void)lock->Cancel();  // ends call() promptly, even before it began (its mark)
      }
    });
    dlock::Status r = call();
    char b = 0;
    while (write(stop_w.fd, &b, 1) < 0 && errno == EINTR) {
    }
    watcher.join();
    return r;
  });
  try {
    signal_mod.attr("set_wakeup_fd")(old_fd);
  } catch (py::error_already_set&) {
    PyErr_Clear();
  }
  char buf[64];
  ssize_t n;
  while ((n = read(sig_r.fd, buf, sizeof buf)) > 0) {
    if (old_fd >= 0) (void)!write(old_fd, buf, static_cast<size_t>(n));
  }
  *signalled = fired.load();
  return s;
}

// The deadline of a wait of ms: a negative ms is no limit (max()), as in the
// core; a longer wait than the clock can count (centuries) is one too.
SteadyClock::time_point DeadlineAfter(int64_t ms) {
  constexpr int64_t kCenturyMs = 100LL * 365 * 86400000;
  if (ms < 0 || ms > kCenturyMs) return SteadyClock::time_point::max();
  return SteadyClock::now() + std::chrono::milliseconds(ms);
}

// What is left of a wait until deadline, as the core takes it: -1 (no limit)
// for DeadlineAfter's max(), else ms rounded up (a wait never ends before the
// deadline the caller asked for), 0 once it passed.
int64_t LeftMs(SteadyClock::time_point deadline) {
  if (deadline == SteadyClock::time_point::max()) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return left > 0 ? left : 0;
}

// ---- client -----------------------------------------------------------------

class PyClient {
 public:
  PyClient(const std::string& url, const std::map<std::string, std::string>& options) {
    dlock::Config cfg = MakeConfig(options);
    Check(Nogil([&] { return dlock::Client::Open(url, cfg, &client_); }));
  }
  ~PyClient() {
    // The last reference joins the client's threads (they never need the GIL).
    if (Finalizing()) {
      client_.reset();
    } else {
      NogilVoid([&] { client_.reset(); });
    }
  }

  const std::shared_ptr<dlock::Client>& client() const { return client_; }

  // (type, severity, unix_ms, token, key, owner, message) or None.
  py::object NextEvent(int64_t timeout_ms) {
    dlock::Event ev;
    if (timeout_ms < 0) Check(client_->NextEvent(timeout_ms, &ev));  // the core says why
    const auto deadline = DeadlineAfter(timeout_ms);
    bool main = false;
    bool first = true;
    for (;;) {
      // The first look runs as asked; on the main thread a longer wait goes
      // on in slices so that Ctrl-C is noticed.
      int64_t left = LeftMs(deadline);
      int64_t slice = left;
      if (first) {
        main = left > 100 && OnMainThread();
        if (main) slice = 100;
      } else if (main) {
        slice = std::min<int64_t>(left, 100);
      }
      first = false;
      dlock::Status s = Nogil([&] { return client_->NextEvent(slice, &ev); });
      if (s.ok()) break;
      if (s.code() != dlock::Code::kTimeout) Raise(s);
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (LeftMs(deadline) == 0) return py::none();
    }
    return py::make_tuple(static_cast<int>(ev.type), static_cast<int>(ev.severity), ev.unix_ms,
                          ev.token, py::bytes(ev.key), Text(ev.owner), Text(ev.message));
  }

  py::dict Counters() const {
    py::dict out;
    for (const char* const* n = dlock::Client::CounterNames(); *n != nullptr; ++n) {
      uint64_t v = 0;
      Check(client_->Counter(*n, &v));
      out[py::str(*n)] = v;
    }
    return out;
  }

  uint64_t Counter(const std::string& name) const {
    uint64_t v = 0;
    Check(client_->Counter(name, &v));
    return v;
  }

  uint64_t Cleanup() {
    uint64_t deleted = 0;
    Check(Nogil([&] { return client_->Cleanup(&deleted); }));
    return deleted;
  }

  void InitSchema() {
    Check(Nogil([&] { return client_->EnsureSchema(); }));
  }

 private:
  std::shared_ptr<dlock::Client> client_;
};

// ---- lock -------------------------------------------------------------------

class PyLock {
 public:
  PyLock(const PyClient& client, const std::string& key,
         const std::map<std::string, std::string>& options) {
    dlock::Config cfg = MakeConfig(options);
    Check(dlock::Lock::Open(client.client(), key, cfg, &lock_));
  }
  ~PyLock() {
    // Closing a held lock releases it (best effort): a network round trip.
    if (Finalizing()) {
      lock_.reset();
    } else {
      NogilVoid([&] { lock_.reset(); });
    }
  }

  // True = held (acquired or counted up), False = busy for the whole wait.
  // wait_ms < 0: no limit (the core's: until acquired or cancelled).
  // holder: 0 for the calling OS thread, else the id of the holder (as
  // dlock_try_as: the article's class passes one per connection and thread).
  //
  // mark: a cancel mark (Lock::cancel_mark) the caller took before it armed
  // its cancel (asyncio takes one before the call is handed to a thread);
  // without one, the mark is taken here, as the call begins. Every cancel
  // after the mark ends the call, also one that lands between the core
  // calls below or before the first of them: a plain Try would count only
  // cancels that come while it runs, and the wait would go on unseen.
  //
  // The first attempt runs inline with the GIL released and nothing else: an
  // uncontended acquisition costs what the C API's costs. Only when the lock
  // is busy and the caller wants to wait does the wait become interruptible
  // (Ctrl-C on the main thread), which costs a helper thread.
  bool Try(int64_t wait_ms, std::optional<uint64_t> mark, uint64_t holder) {
    const auto deadline = DeadlineAfter(wait_ms);
    uint64_t from = mark ? *mark : lock_->cancel_mark();
    dlock::Status s = Nogil([&] { return lock_->TryFrom(holder, from, 0); });
    for (;;) {
      if (s.ok()) return true;
      if (s.code() != dlock::Code::kBusy) Raise(s);
      const int64_t left = LeftMs(deadline);
      if (left == 0) return false;
      bool signalled = false;
      s = Interruptible(lock_.get(), [&] { return lock_->TryFrom(holder, from, left); }, &signalled);
      // Acquired: return it, and the pending handler runs at the next
      // bytecode, as after threading.Lock.acquire(). Not acquired: a
      // cancelled wait (Ctrl-C) is never left holding, the core gives back an
      // acquisition that won the race with the cancel; run the handler.
      if (s.ok()) return true;
      if (signalled && PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (signalled && s.code() == dlock::Code::kCancelled) {
        // A handler that did not raise: keep waiting, counting only the
        // cancels that come after the one the signal sent.
        from = lock_->cancel_mark();
        s = dlock::Status::Busy("");
      }
    }
  }

  // The code: 0 = released / not held, -3 = lost, -12 = timed out,
  // -13 = cancelled by cancel() from another thread. Other errors raise.
  // mark: as Try's (taken here when not given).
  int WaitLost(int64_t timeout_ms, std::optional<uint64_t> mark) {
    const auto deadline = DeadlineAfter(timeout_ms);  // timeout_ms < 0: no limit
    int64_t left = LeftMs(deadline);
    uint64_t from = mark ? *mark : lock_->cancel_mark();
    for (;;) {
      bool signalled = false;
      auto call = [&] { return lock_->WaitLostFrom(from, left); };
      dlock::Status s = left != 0 ? Interruptible(lock_.get(), call, &signalled) : Nogil(call);
      if (signalled && PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (signalled && s.code() == dlock::Code::kCancelled) {
        from = lock_->cancel_mark();
        left = LeftMs(deadline);
        continue;
      }
      switch (s.code()) {
        case dlock::Code::kOk:
        case dlock::Code::kLost:
        case dlock::Code::kTimeout:
        case dlock::Code::kCancelled:
          return static_cast<int>(s.code());
        default:
          Raise(s);
      }
    }
  }

  // Renew/Release/Rollback/Begin; raises on any error (the Python layer
  // turns the ones it documents as return values into them).
  void Call(dlock::Status (dlock::Lock::*fn)()) {
    Check(Nogil([&] { return (lock_.get()->*fn)(); }));
  }
  // Release/Abort/Rollback on behalf of holder (0: the calling OS thread).
  void CallAs(dlock::Status (dlock::Lock::*fn)(), dlock::Status (dlock::Lock::*as)(uint64_t),
              uint64_t holder) {
    Check(Nogil([&] { return holder == 0 ? (lock_.get()->*fn)() : (lock_.get()->*as)(holder); }));
  }

  int64_t Exec(const std::string& sql, const std::vector<std::optional<std::string>>& params) {
    std::vector<const std::string*> ps;
    ps.reserve(params.size());
    for (const auto& p : params) ps.push_back(p ? &*p : nullptr);
    int64_t affected = 0;
    Check(Nogil([&] { return lock_->Exec(sql, ps, &affected); }));
    return affected;
  }

  void Cancel() { Check(lock_->Cancel()); }

  py::str Owner() const {
    char buf[256];
    size_t n = lock_->copy_owner(buf, sizeof buf);
    if (n < sizeof buf) return Text(std::string(buf, n));
    std::string big(n + 1, '\0');
    n = lock_->copy_owner(&big[0], big.size());
    big.resize(std::min(n, big.size() - 1));
    return Text(big);
  }

  dlock::Lock& lock() { return *lock_; }

 private:
  std::unique_ptr<dlock::Lock> lock_;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "dlock's native core (pybind11). Use the dlock package, not this module.";
  m.attr("__version__") = DLOCK_PY_VERSION;
  m.def("version", [] { return std::string(dlock::Version()); },
        "The core library's version, e.g. '1.3.0'.");
  m.def("version_number", [] { return dlock::VersionNumber(); },
        "The core's version as major * 10000 + minor * 100 + patch, e.g. 10300.");
  m.def(
      "url_without_password",
      [](const std::string& url) -> std::optional<std::string> {
        std::string out;
        if (!dlock::UrlWithoutPassword(url, &out).ok()) return std::nullopt;
        return out;
      },
      "The URL (any form the core reads) without its password, or None if it does not parse.");
  m.def("server_urls", &dlock::SplitServerUrls, py::arg("url"),
        "The URL's servers, each its own URL, in its order (one for a URL naming one server): "
        "the core's split of a list joined by ';', which every binding and the core share.");
  m.def("code_name", [](int code) { return std::string(dlock::CodeName(code)); },
        "Stable name of a dlock_code, e.g. 'DLOCK_E_LOST'.");
  m.def("codes", [] {
    std::vector<std::tuple<int, std::string, std::string>> out;
    size_t n = 0;
    const dlock::CodeInfo* codes = dlock::Codes(&n);
    for (size_t i = 0; i < n; ++i) out.emplace_back(codes[i].value, codes[i].name, codes[i].doc);
    return out;
  }, "Every dlock_code as (value, name, doc), from the core's table.");
  m.def("counter_names", [] {
    std::vector<std::string> out;
    for (const char* const* n = dlock::Client::CounterNames(); *n != nullptr; ++n) out.emplace_back(*n);
    return out;
  });

  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, const std::map<std::string, std::string>&>(),
           py::arg("url"), py::arg("options"))
      .def("next_event", &PyClient::NextEvent, py::arg("timeout_ms"))
      .def("counters", &PyClient::Counters)
      .def("counter", &PyClient::Counter, py::arg("name"))
      .def("cleanup", &PyClient::Cleanup)
      .def("init_schema", &PyClient::InitSchema);

  py::class_<PyLock>(m, "Lock")
      .def(py::init<const PyClient&, const std::string&, const std::map<std::string, std::string>&>(),
           py::arg("client"), py::arg("key"), py::arg("options"))
      .def("try_", &PyLock::Try, py::arg("wait_ms"), py::arg("mark") = py::none(),
           py::arg("holder") = 0)
      .def("wait_lost", &PyLock::WaitLost, py::arg("timeout_ms"), py::arg("mark") = py::none())
      .def("cancel_mark", [](PyLock& l) { return l.lock().cancel_mark(); })
      .def("renew", [](PyLock& l) { l.Call(&dlock::Lock::Renew); })
      .def("release", [](PyLock& l, uint64_t holder) {
             l.CallAs(&dlock::Lock::Release, &dlock::Lock::ReleaseAs, holder);
           }, py::arg("holder") = 0)
      .def("abort", [](PyLock& l, uint64_t holder) {
             l.CallAs(&dlock::Lock::Abort, &dlock::Lock::AbortAs, holder);
           }, py::arg("holder") = 0)
      .def("rollback", [](PyLock& l, uint64_t holder) {
             l.CallAs(&dlock::Lock::Rollback, &dlock::Lock::RollbackAs, holder);
           }, py::arg("holder") = 0)
      .def("begin", [](PyLock& l) { l.Call(&dlock::Lock::Begin); })
      .def("exec", &PyLock::Exec, py::arg("sql"), py::arg("params"))
      .def("cancel", &PyLock::Cancel)
      .def_property_readonly("state", [](PyLock& l) { return static_cast<int>(l.lock().state()); })
      .def_property_readonly("held", [](PyLock& l) { return l.lock().held(); })
      .def_property_readonly("owner", &PyLock::Owner)
      .def_property_readonly("token", [](PyLock& l) { return l.lock().token(); })
      .def_property_readonly("key", [](PyLock& l) { return py::bytes(l.lock().key()); })
      .def_property_readonly("remaining_ms", [](PyLock& l) { return l.lock().remaining_ms(); })
      .def_property_readonly("hold_count", [](PyLock& l) { return l.lock().hold_count(); })
      .def("hold_count_as", [](PyLock& l, uint64_t holder) { return l.lock().hold_count_as(holder); },
           py::arg("holder"))
      .def_property_readonly("mode", [](PyLock& l) { return std::string(l.lock().mode()); })
      .def_property_readonly("busy_remaining_ms", [](PyLock& l) { return l.lock().busy_remaining_ms(); });
}
