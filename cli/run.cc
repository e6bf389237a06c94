// `dlock run`: runs a command while holding a lock, like flock(1) across
// hosts. Four steps: Acquire, Start, Supervise, Finish.
//
// Processes. Before anything else dlock forks the guard (guard.h), while it
// has one thread and no connection. Once the lock is held, the guard starts
// CMD and is the subreaper of CMD's whole tree; it kills that tree when
// dlock tells it to, when dlock dies (even by SIGKILL), and when the kill
// deadline dlock last gave it passes (dlock stopped or starved). dlock
// itself is a subreaper too, for the case that the guard dies alone.
//
// Time. A lease can expire at the earliest at D = the send time of the last
// renewal that succeeded + ttl, by this host's clock (MARIADB.md: the
// server's expiry is later). The whole tree must be dead before D, so that a
// host that takes over after the lease has never overlapped it:
//   - when renewals fail, SIGTERM goes out at D - grace - margin and SIGKILL
//     at D - margin (margin: SafetyMarginMs);
//   - when the lock is lost or --max-hold runs out, SIGTERM goes out at once
//     and SIGKILL after --grace, but never later than D - margin;
//   - the guard kills the tree at D - margin by itself if dlock does not
//     move that deadline (renewals keep moving D).
// --grace + margin fit in half the ttl, so a renewal that succeeds (due every
// ttl/3) never triggers a stop; by default they take a third of it, leaving
// a renewal ttl/3 to come back.
//
// Threads and signals. Every signal dlock handles is blocked in all threads
// before the first thread starts; the main thread reads them from a
// signalfd, next to the guard's news. The acquiring and the watching thread
// wake it with a real-time signal sent to the process.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "dlock/admin.hpp"
#include "duration.h"
#include "exit_codes.h"
#include "guard.h"
#include "proctree.h"
#include "say.h"

extern char** environ;

namespace dlock_cli {

int64_t SafetyMarginMs(int64_t ttl_ms) { return std::clamp<int64_t>(ttl_ms / 10, 200, 2000); }

int64_t MaxGraceMs(int64_t ttl_ms) { return std::max<int64_t>(0, ttl_ms / 2 - SafetyMarginMs(ttl_ms)); }

int64_t DefaultGraceMs(bool lease, int64_t ttl_ms) {
  if (!lease) return 10000;
  return std::min<int64_t>(10000, std::max<int64_t>(0, ttl_ms / 3 - SafetyMarginMs(ttl_ms)));
}

namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

int64_t MsBetween(Steady::time_point from, Steady::time_point to) {
  return std::chrono::duration_cast<milliseconds>(to - from).count();
}

// Signals passed on to the command.
const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

bool IsForwarded(int sig) {
  for (int s : kForwarded)
    if (s == sig) return true;
  return false;
}

std::string SigName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

bool IsExecutableFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

// Finds CMD as execvp would, before anything starts. Returns 0, or the exit
// code for "not found"/"not executable" with *msg set.
int ResolveCommand(const std::string& name, std::string* path, std::string* msg) {
  if (name.empty()) {
    *msg = "empty command name";
    return kExitNotFound;
  }
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (stat(name.c_str(), &st) != 0) {
      *msg = name + ": " + std::strerror(errno);
      return errno == ENOENT || errno == ENOTDIR ? kExitNotFound : kExitNotExec;
    }
    if (!IsExecutableFile(name)) {
      *msg = name + ": not an executable file";
      return kExitNotExec;
    }
    *path = name;
    return 0;
  }
  const char* env = std::getenv("PATH");
  std::string dirs = env != nullptr ? env : "/usr/local/bin:/usr/bin:/bin";
  bool seen_non_exec = false;
  size_t pos = 0;
  for (;;) {
    size_t colon = dirs.find(':', pos);
    std::string dir = dirs.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    if (dir.empty()) dir = ".";
    std::string cand = dir + "/" + name;
    if (IsExecutableFile(cand)) {
      *path = cand;
      return 0;
    }
    if (access(cand.c_str(), F_OK) == 0) seen_non_exec = true;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  *msg = name + (seen_non_exec ? ": not executable" : ": command not found");
  return seen_non_exec ? kExitNotExec : kExitNotFound;
}

// The signals the main thread handles, blocked in every thread, read from a
// signalfd.
struct Signals {
  sigset_t set;
  int fd = -1;
  int wake = SIGRTMIN;  // from our own threads: "look again"
  pid_t self = getpid();

  bool Block() {
    sigemptyset(&set);
    for (int s : kForwarded) sigaddset(&set, s);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, wake);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    return fd >= 0;
  }
  ~Signals() {
    if (fd >= 0) close(fd);
  }
  void Wake() const { kill(self, wake); }
  // The next pending signal (0 when none), and who sent it.
  int Next(bool* from_kernel) const {
    signalfd_siginfo si;
    if (read(fd, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) return 0;
    *from_kernel = si.ssi_code == SI_KERNEL;
    return static_cast<int>(si.ssi_signo);
  }
};

// Waits until fd_a or fd_b (-1: none) is readable or timeout_ms passes.
void WaitFor(int fd_a, int fd_b, int64_t timeout_ms) {
  pollfd fds[2] = {{fd_a, POLLIN, 0}, {fd_b, POLLIN, 0}};
  (void)poll(fds, fd_b >= 0 ? 2 : 1, static_cast<int>(std::clamp<int64_t>(timeout_ms, 0, 1000000)));
}

// The held lock.
struct Hold {
  std::shared_ptr<dlock::Client> client;
  std::unique_ptr<dlock::Lock> lock;
  std::string owner;
  uint64_t token = 0;
  Steady::time_point acquired;
};

// The watching thread: waits for the lock to be lost (a lease that was
// taken or revoked, a row lock whose connection the server closed) and
// wakes the main thread. The library never calls us; WaitLost is how we ask.
class Watcher {
 public:
  Watcher(dlock::Lock* lock, const Signals* sig) : lock_(lock), sig_(sig) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Watcher() { Stop(); }
  bool lost() const { return lost_; }
  std::string why() {
    std::lock_guard<std::mutex> g(mu_);
    return why_;
  }
  void Stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    (void)lock_->Cancel();
    thread_.join();
  }

 private:
  void Loop() {
    while (!stop_) {
      dlock::Status s = lock_->WaitLost(500);
      if (s.code() == dlock::Code::kLost) {
        {
          std::lock_guard<std::mutex> g(mu_);
          why_ = s.message();
        }
        lost_ = true;
        sig_->Wake();
        return;
      }
      if (s.ok()) return;  // no longer held: released
    }
  }
  dlock::Lock* const lock_;
  const Signals* const sig_;
  std::atomic<bool> stop_{false}, lost_{false};
  std::mutex mu_;
  std::string why_;
  std::thread thread_;
};

// The options `dlock run` opens its client with: none beyond the URL's.
// BusyMessage looks the key's server up with the same, so that it asks the
// server the lock went to.
dlock::Config ClientConfig() { return dlock::Config(); }

// The busy line: who holds it, with -v.
std::string BusyMessage(const RunArgs& a) {
  std::string msg = "'" + a.key + "' is held by another owner; not acquired within " +
                    FormatDuration(a.wait_ms);
  if (!a.verbose || !a.lease) return msg;
  std::unique_ptr<dlock::Admin> admin;
  dlock::LeaseInfo l;
  bool held = false;
  std::string url;  // the key's server, with a URL naming several
  dlock::Status s = dlock::KeyServerUrl(a.url, ClientConfig(), a.key, &url);
  if (s.ok()) s = dlock::Admin::Open(url, &admin);
  if (s.ok()) s = admin->GetLease(a.key, &l, &held);
  if (!s.ok() || l.key.empty()) return msg;  // freed meanwhile, or not readable: the plain line
  const std::string in = FormatDuration(l.expires_in_us / 1000);
  if (l.revoked)
    return "'" + a.key + "' was revoked (release --force; token " + std::to_string(l.token) +
           "); free in " + in + "; not acquired within " + FormatDuration(a.wait_ms);
  return "'" + a.key + "' is held by " + l.owner + " (token " + std::to_string(l.token) +
         ", expires in " + in + "); not acquired within " + FormatDuration(a.wait_ms);
}

// ---- 1. acquire ---------------------------------------------------------------

// Takes the lock, answering signals meanwhile. -1 when held, else the exit code.
int Acquire(const RunArgs& a, const Signals& sig, Hold* h) {
  dlock::Status s = dlock::Client::Open(a.url, ClientConfig(), &h->client);
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  dlock::Config cfg;
  s = cfg.Set("mode", a.lease ? "lease" : "row");
  if (s.ok()) s = cfg.Set("holder", "lock");  // taken on one thread, released on another
  if (s.ok() && a.lease) s = cfg.Set("ttl_ms", std::to_string(a.ttl_ms));
  if (s.ok() && a.lease) s = cfg.Set("auto_renew", "1");
  // dlock enforces --max-hold itself (it stops the job first, then lets go);
  // the library's breaker would only stop the renewals under a running job.
  if (s.ok() && a.lease) s = cfg.Set("max_hold_ms", "0");
  if (!s.ok()) return Fail(kExitUsage, s.message());
  s = dlock::Lock::Open(h->client, a.key, cfg, &h->lock);
  if (!s.ok()) return Fail(s.code() == dlock::Code::kInvalid ? kExitUsage : kExitUnavailable, s.message());

  if (a.verbose) Say("trying '" + a.key + "' (" +
                     (a.wait_ms < 0 ? std::string("waiting without limit")
                                    : "waiting up to " + FormatDuration(a.wait_ms)) + ")");
  const auto t_start = Steady::now();
  std::atomic<bool> done{false};
  dlock::Status got;
  std::thread acquirer([&] {
    got = h->lock->Try(a.wait_ms);
    done = true;
    sig.Wake();
  });
  int interrupted = 0;
  while (!done) {
    WaitFor(sig.fd, -1, 200);
    bool from_kernel = false;
    while (int signo = sig.Next(&from_kernel))
      if (IsForwarded(signo) && interrupted == 0) interrupted = signo;
    if (interrupted != 0) (void)h->lock->Cancel();  // again each turn: the Try may not have begun
  }
  acquirer.join();
  if (interrupted != 0) {
    if (got.ok()) (void)h->lock->Release();
    return Fail(128 + interrupted, "interrupted by " + SigName(interrupted) + " while waiting for '" +
                                       a.key + "'");
  }
  if (got.code() == dlock::Code::kBusy) {
    if (!a.quiet) Say(BusyMessage(a));
    return a.conflict_exit_code;
  }
  if (!got.ok()) return Fail(ExitFor(got), got.message());
  h->acquired = Steady::now();
  h->owner = h->lock->owner();
  h->token = h->lock->token();
  if (a.verbose)
    Say("acquired '" + a.key + "' (token " + std::to_string(h->token) + ", owner " + h->owner +
        ") after " + FormatDuration(MsBetween(t_start, h->acquired)));
  return -1;
}

// ---- 2. start -----------------------------------------------------------------

bool HasName(const char* entry, const char* name) {
  const size_t n = std::strlen(name);
  return std::strncmp(entry, name, n) == 0 && entry[n] == '=';
}

// dlock's environment for the job: no password (DLOCK_PASSWORD goes, and
// DLOCK_URL loses its password), and the lock's own variables.
std::vector<std::string> JobEnvironment(const RunArgs& a, const Hold& h) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (HasName(*e, "DLOCK_KEY") || HasName(*e, "DLOCK_OWNER") || HasName(*e, "DLOCK_TOKEN") ||
        HasName(*e, "DLOCK_PASSWORD"))
      continue;
    if (HasName(*e, "DLOCK_URL")) {
      std::string safe;
      if (dlock::UrlWithoutPassword(*e + std::strlen("DLOCK_URL="), &safe).ok())
        env.push_back("DLOCK_URL=" + safe);
      continue;  // a URL that does not parse is dropped: its password cannot be found
    }
    env.emplace_back(*e);
  }
  env.push_back("DLOCK_KEY=" + a.key);
  env.push_back("DLOCK_OWNER=" + h.owner);
  env.push_back("DLOCK_TOKEN=" + std::to_string(h.token));
  return env;
}

// Starts CMD through the guard. -1 when it runs, else the exit code.
int Start(const RunArgs& a, const std::string& path, const Hold& h, bool interactive, Guard* guard,
          pid_t* job) {
  Guard::Job j;
  j.path = path;
  j.argv = a.cmd;
  j.env = JobEnvironment(a, h);
  // Unattended (cron, a service, a script in the background), CMD gets a
  // process group of its own: a signal passed on reaches what it started
  // too. In the foreground of a terminal it stays in ours, so that it keeps
  // the terminal and Ctrl-C reaches it directly.
  j.own_group = !interactive;
  Guard::News n;
  if (!guard->Start(j) || !guard->ReadNews(&n) || n.kind != Guard::News::kStarted)
    return Fail(kExitInternal, "cannot start the command: its guard process is gone");
  if (n.pid == 0)
    return Fail(kExitInternal, std::string("cannot start the command: ") + std::strerror(n.exec_errno));
  if (n.exec_errno != 0)
    return Fail(n.exec_errno == ENOENT ? kExitNotFound : kExitNotExec,
                "cannot execute " + path + ": " + std::strerror(n.exec_errno));
  *job = n.pid;
  return -1;
}

// ---- 3. supervise -------------------------------------------------------------

enum class Stop {
  kNone,
  kLeftovers,  // CMD exited; what it left running is being stopped
  kLost,       // the lock was lost (taken, revoked, the row lock's connection closed)
  kMaxHold,    // --max-hold ran out
  kUnrenewed,  // renewals failed: stopping before the lease can expire
  kDeadline,   // the guard killed the tree at the lease's deadline (dlock was stopped?)
};

struct Outcome {
  Stop reason = Stop::kNone;
  int status = 0;  // CMD's wait status
  bool guard_died = false;
};

class Supervisor {
 public:
  Supervisor(const RunArgs& a, Hold& h, Guard& guard, const Signals& sig, bool interactive)
      : a_(a), h_(h), guard_(guard), sig_(sig), interactive_(interactive),
        margin_(milliseconds(SafetyMarginMs(a.ttl_ms))), grace_(milliseconds(a.grace_ms)) {}

  Outcome Run() {
    Watcher watcher(h_.lock.get(), &sig_);
    lease_end_ = h_.acquired + milliseconds(a_.ttl_ms);
    while (!(exited_ && empty_)) {
      now_ = Steady::now();
      Look(watcher);
      WaitFor(sig_.fd, guard_.news_fd(), NextLookMs());
      now_ = Steady::now();
      PassSignals();
      if (!TakeNews()) break;
    }
    watcher.Stop();
    return out_;
  }

 private:
  // The deadlines: the lease's end, the lock, --max-hold, the kill time.
  void Look(Watcher& watcher) {
    if (a_.lease && h_.lock->state() == dlock::LockState::kHeld) {
      lease_end_ = now_ + milliseconds(h_.lock->remaining_ms());
      // The guard's own deadline follows each renewal.
      if (std::chrono::abs(lease_end_ - told_guard_) > milliseconds(20)) {
        guard_.KillAt(lease_end_ - margin_);
        told_guard_ = lease_end_;
      }
    }
    if (!lost_seen_ && (watcher.lost() || h_.lock->state() == dlock::LockState::kLost)) {
      lost_seen_ = true;
      BeginStop(Stop::kLost, watcher.lost() ? watcher.why() : "'" + a_.key + "' was lost");
    }
    if (a_.max_hold_ms > 0 && now_ >= h_.acquired + milliseconds(a_.max_hold_ms))
      BeginStop(Stop::kMaxHold, "'" + a_.key + "' was held for --max-hold " + FormatDuration(a_.max_hold_ms));
    if (a_.lease && !lost_seen_ && now_ >= lease_end_ - grace_ - margin_)
      BeginStop(Stop::kUnrenewed,
                "no renewal of '" + a_.key + "' succeeded for " +
                    FormatDuration(a_.ttl_ms - MsBetween(now_, lease_end_)) +
                    " (the database does not answer?); the lease can expire in " +
                    FormatDuration(MsBetween(now_, lease_end_)));
    if (a_.lease && stopping_) kill_at_ = std::min(kill_at_, lease_end_ - margin_);
    if (stopping_ && !killed_ && now_ >= kill_at_) {
      if (!exited_ && sent_term_)
        Say("the command did not stop within " + FormatDuration(MsBetween(term_at_, now_)) + "; SIGKILL");
      guard_.SignalTree(SIGKILL);
      killed_ = true;
    }
  }

  // Stops the job's tree: SIGTERM now, SIGKILL at kill_at_ (after --grace,
  // and before the lease can expire). A graver reason replaces kLeftovers
  // (and is said); a stop under way is not begun again.
  void BeginStop(Stop why, const std::string& text) {
    const bool graver = out_.reason == Stop::kNone ||
                        (out_.reason == Stop::kLeftovers && why != Stop::kLeftovers);
    if (graver) out_.reason = why;
    if (stopping_) {
      if (graver) Say(text);
      return;
    }
    stopping_ = true;
    kill_at_ = now_ + grace_;
    if (a_.lease) kill_at_ = std::min(kill_at_, lease_end_ - margin_);
    if (kill_at_ <= now_) {
      Say(text + "; stopping the command (SIGKILL at once: the lease may expire any moment)");
      return;  // Look() kills
    }
    Say(text + "; stopping the command (SIGTERM, SIGKILL in " + FormatDuration(MsBetween(now_, kill_at_)) + ")");
    guard_.SignalTree(SIGTERM);
    sent_term_ = true;
    term_at_ = now_;
  }

  int64_t NextLookMs() const {
    auto next = now_ + std::chrono::seconds(1);
    if (a_.lease) {
      next = std::min(next, now_ + milliseconds(std::max<int64_t>(a_.ttl_ms / 6, 50)));  // renewals
      if (!stopping_ && !lost_seen_) next = std::min(next, lease_end_ - grace_ - margin_);
    }
    if (a_.max_hold_ms > 0 && !stopping_) next = std::min(next, h_.acquired + milliseconds(a_.max_hold_ms));
    if (stopping_ && !killed_) next = std::min(next, kill_at_);
    return std::max<int64_t>(0, std::chrono::duration_cast<milliseconds>(next - now_).count() + 1);
  }

  void PassSignals() {
    bool from_kernel = false;
    while (int signo = sig_.Next(&from_kernel)) {
      // A signal from the terminal (Ctrl-C) already reached an interactive
      // command, which shares our process group: pass on only what was
      // sent to us alone.
      if (!IsForwarded(signo) || (interactive_ && from_kernel)) continue;
      if (a_.verbose) Say("passing " + SigName(signo) + " to the command");
      guard_.SignalJob(signo);
    }
  }

  // The guard's news; false when the guard is gone.
  bool TakeNews() {
    pollfd p{guard_.news_fd(), POLLIN, 0};
    while (poll(&p, 1, 0) > 0) {
      Guard::News n;
      if (!guard_.ReadNews(&n)) return GuardDied();
      if (n.kind == Guard::News::kExited) {
        exited_ = true;
        out_.status = n.status;
        if (n.leftovers)
          BeginStop(Stop::kLeftovers, "the command exited but left processes running");
      } else if (n.kind == Guard::News::kEmpty) {
        empty_ = true;
      } else if (n.kind == Guard::News::kDeadline) {
        if (out_.reason == Stop::kNone || out_.reason == Stop::kLeftovers) out_.reason = Stop::kDeadline;
        stopping_ = killed_ = true;  // the guard did it all
        Say("'" + a_.key + "' could expire before dlock renewed it or stopped the command (was dlock "
            "stopped?): the command's guard killed it");
      }
    }
    return true;
  }

  // The guard died on its own (someone killed it): the job's tree came to
  // us (we are a subreaper too). Kill it, reap it, report.
  bool GuardDied() {
    Say("the command's guard process died; killing the command");
    for (int i = 0; i < 5000 && SignalDescendants(getpid(), SIGKILL) > 0; ++i) {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      usleep(2000);
    }
    out_.guard_died = true;
    return false;
  }

  const RunArgs& a_;
  Hold& h_;
  Guard& guard_;
  const Signals& sig_;
  const bool interactive_;
  const Steady::duration margin_, grace_;
  Outcome out_;
  Steady::time_point now_, lease_end_, told_guard_, kill_at_, term_at_;
  bool lost_seen_ = false, stopping_ = false, killed_ = false, sent_term_ = false;
  bool exited_ = false, empty_ = false;
};

// ---- 4. finish ----------------------------------------------------------------

int Finish(const RunArgs& a, Hold& h, Guard& guard, const Outcome& out) {
  if (out.reason == Stop::kUnrenewed) {
    // The database did not answer: a release would wait for it, and there
    // is nothing to wait for. The lease runs out on its own.
    Say("'" + a.key + "' not released (the database does not answer); the lease expires by itself");
    std::fflush(stderr);
    _exit(kExitLost);
  }
  const int64_t held_ms = MsBetween(h.acquired, Steady::now());
  dlock::Status rel = h.lock->Release();
  guard.Close();
  bool lost = out.reason == Stop::kLost || out.reason == Stop::kMaxHold ||
              out.reason == Stop::kDeadline;
  if (!lost && rel.code() == dlock::Code::kLost) {
    lost = true;
    Say(rel.message() + " (while the command ran)");
  } else if (!rel.ok() && !lost) {
    Say("releasing '" + a.key + "' failed: " + rel.message() + " (the lease expires by itself)");
  }
  if (a.verbose && rel.ok()) Say("released '" + a.key + "' after " + FormatDuration(held_ms));
  if (out.guard_died) return kExitInternal;
  if (lost) return kExitLost;
  if (WIFEXITED(out.status)) return WEXITSTATUS(out.status);
  if (WIFSIGNALED(out.status)) return 128 + WTERMSIG(out.status);
  return kExitInternal;
}

}  // namespace

int CmdRun(const RunArgs& a) {
  std::string path, msg;
  if (int rc = ResolveCommand(a.cmd[0], &path, &msg); rc != 0) return Fail(rc, msg);
  // First, while this process has one thread and no connection.
  Guard guard;
  if (!guard.Fork(&msg)) return Fail(kExitInternal, "cannot start the command's guard: " + msg);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  signal(SIGPIPE, SIG_IGN);  // a gone guard is an error on its pipe, not a signal
  Signals sig;
  if (!sig.Block()) return Fail(kExitInternal, std::string("signalfd: ") + std::strerror(errno));

  Hold h;
  if (int rc = Acquire(a, sig, &h); rc >= 0) return rc;
  const bool interactive = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  pid_t job = 0;
  // The guard's deadline before the job exists: should dlock stop before
  // the supervisor first tells it (a SIGSTOP right after the start), the job
  // still dies before the lease can run out.
  if (a.lease)
    guard.KillAt(Steady::now() + std::chrono::milliseconds(h.lock->remaining_ms() -
                                                           SafetyMarginMs(a.ttl_ms)));
  if (int rc = Start(a, path, h, interactive, &guard, &job); rc >= 0) {
    guard.Close();
    (void)h.lock->Release();
    return rc;
  }
  const Outcome out = Supervisor(a, h, guard, sig, interactive).Run();
  return Finish(a, h, guard, out);
}

}  // namespace dlock_cli
