// `dlock run`: runs a command while holding a lock, like flock(1) across hosts.
//
// Threads and signals: every signal dlock cares about is blocked in all
// threads before the first thread starts, and only the main thread takes them,
// with sigtimedwait(). The core's threads, the acquiring thread and the
// watching thread never see a signal; they wake the main thread with a
// real-time signal (kill to our own pid). The child is started with fork +
// execve from the main thread; between the two it calls only
// async-signal-safe functions (the process has threads).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
#include "duration.h"
#include "exit_codes.h"

extern char** environ;

namespace dlock_cli {

namespace {

using Steady = std::chrono::steady_clock;

int64_t MsSince(Steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t).count();
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

// Finds CMD as execvp would, before the fork (PATH search allocates). Returns
// 0, or the exit code for "not found"/"not executable" with *msg set.
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

// Shared between the main thread and the watcher.
struct Watch {
  std::atomic<bool> stop{false};
  std::atomic<bool> lost{false};
  std::mutex mu;
  std::string why;
};

}  // namespace

int CmdRun(const RunArgs& a) {
  std::string path, msg;
  if (int rc = ResolveCommand(a.cmd[0], &path, &msg); rc != 0) return Fail(rc, msg);

  const pid_t self = getpid();
  const int wake = SIGRTMIN;
  sigset_t set, orig;
  sigemptyset(&set);
  for (int s : kForwarded) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, wake);
  // Before any thread exists, so that every thread inherits the mask.
  pthread_sigmask(SIG_BLOCK, &set, &orig);
  auto wait_signal = [&](int64_t timeout_ms, siginfo_t* si) {
    if (timeout_ms < 0) timeout_ms = 0;
    timespec ts{static_cast<time_t>(timeout_ms / 1000), static_cast<long>(timeout_ms % 1000) * 1000000};
    return sigtimedwait(&set, si, &ts);
  };

  std::shared_ptr<dlock::Client> client;
  dlock::Status s = dlock::Client::Open(a.url, dlock::Config(), &client);
  if (!s.ok()) return Fail(kExitUnavailable, s.message());
  dlock::Config lcfg;
  const bool lease = a.mode == "lease";
  s = lcfg.Set("mode", a.mode);
  if (s.ok()) s = lcfg.Set("holder", "lock");  // taken on one thread, released on another
  if (s.ok() && lease) s = lcfg.Set("ttl_ms", std::to_string(a.ttl_ms));
  if (s.ok() && lease) s = lcfg.Set("auto_renew", "1");
  if (s.ok() && lease) s = lcfg.Set("max_hold_ms", std::to_string(a.max_hold_ms));
  if (!s.ok()) return Fail(kExitUsage, s.message());
  std::unique_ptr<dlock::Lock> lock;
  s = dlock::Lock::Open(client, a.key, lcfg, &lock);
  if (!s.ok()) return Fail(s.code() == dlock::Code::kInvalid ? kExitUsage : kExitUnavailable, s.message());

  // ---- acquire, on a thread of its own so that signals are answered ----
  if (a.verbose)
    std::fprintf(stderr, "dlock: trying '%s' (waiting up to %s)\n", a.key.c_str(),
                 FormatDuration(a.wait_ms).c_str());
  const auto t_start = Steady::now();
  std::atomic<bool> acquired_done{false};
  dlock::Status acq;
  std::thread acquirer([&] {
    acq = lock->Try(a.wait_ms);
    acquired_done = true;
    kill(self, wake);
  });
  int interrupted = 0;
  while (!acquired_done) {
    siginfo_t si;
    int sig = wait_signal(200, &si);
    if (sig > 0 && IsForwarded(sig) && interrupted == 0) interrupted = sig;
    if (interrupted != 0) lock->Cancel();  // again each turn: the Try may not have begun
  }
  acquirer.join();
  if (interrupted != 0) {
    if (acq.ok()) (void)lock->Release();
    return Fail(128 + interrupted, "interrupted by " + SigName(interrupted) + " while waiting for '" +
                                       a.key + "'");
  }
  if (acq.code() == dlock::Code::kBusy)
    return Fail(kExitBusy, "'" + a.key + "' is held by another owner; not acquired within " +
                               FormatDuration(a.wait_ms));
  if (!acq.ok()) return Fail(ExitFor(acq), acq.message());
  const auto t_acquired = Steady::now();
  const std::string owner = lock->owner();
  const uint64_t token = lock->token();
  if (a.verbose)
    std::fprintf(stderr, "dlock: acquired '%s' (token %llu, owner %s) after %s\n", a.key.c_str(),
                 static_cast<unsigned long long>(token), owner.c_str(),
                 FormatDuration(MsSince(t_start)).c_str());

  // ---- start CMD: everything allocated before the fork ----
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "DLOCK_KEY=", 10) == 0 || std::strncmp(*e, "DLOCK_OWNER=", 12) == 0 ||
        std::strncmp(*e, "DLOCK_TOKEN=", 12) == 0)
      continue;
    env_strings.emplace_back(*e);
  }
  env_strings.push_back("DLOCK_KEY=" + a.key);
  env_strings.push_back("DLOCK_OWNER=" + owner);
  env_strings.push_back("DLOCK_TOKEN=" + std::to_string(token));
  std::vector<char*> envp, argv;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = a.cmd;
  for (auto& x : args) argv.push_back(x.data());
  argv.push_back(nullptr);

  // Unattended (cron, a service, a script in the background), CMD gets a
  // process group of its own, so that stopping it reaches whatever it
  // started too. In the foreground of a terminal it stays in ours, so that it
  // keeps the terminal and Ctrl-C reaches it directly.
  const bool interactive = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  int ep[2];
  if (pipe2(ep, O_CLOEXEC) != 0) {
    (void)lock->Release();
    return Fail(kExitInternal, std::string("cannot start the command: pipe: ") + std::strerror(errno));
  }
  const pid_t child = fork();
  if (child == 0) {
    // Dies with dlock: a command must not outlive the lock it runs under.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != self) _exit(kExitInternal);
    if (!interactive) setpgid(0, 0);
    close(ep[0]);
    sigprocmask(SIG_SETMASK, &orig, nullptr);
    execve(path.c_str(), argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = write(ep[1], &e, sizeof e);
    (void)ignored;
    _exit(e == ENOENT ? kExitNotFound : kExitNotExec);
  }
  close(ep[1]);
  if (child > 0 && !interactive) setpgid(child, child);  // as the child does: whoever runs first
  const pid_t target = interactive ? child : -child;    // what signals are sent to
  if (child < 0) {
    int e = errno;
    close(ep[0]);
    (void)lock->Release();
    return Fail(kExitInternal, std::string("cannot start the command: fork: ") + std::strerror(e));
  }
  int exec_errno = 0;
  ssize_t n;
  do n = read(ep[0], &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  close(ep[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    int st;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    (void)lock->Release();
    return Fail(exec_errno == ENOENT ? kExitNotFound : kExitNotExec,
                "cannot execute " + path + ": " + std::strerror(exec_errno));
  }

  // ---- watch the lock: the library never calls us, so a thread asks ----
  Watch w;
  std::thread watcher([&] {
    while (!w.stop) {
      dlock::Status ws;
      if (lease) {
        ws = lock->WaitLost(500);
      } else {
        // A row lock is lost only with its connection: look every second.
        for (int i = 0; i < 10 && !w.stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (w.stop) break;
        ws = lock->Renew();
      }
      if (ws.code() == dlock::Code::kLost) {
        {
          std::lock_guard<std::mutex> g(w.mu);
          w.why = ws.message();
        }
        w.lost = true;
        kill(self, wake);
        return;
      }
      if (lease && ws.ok()) return;  // no longer held: released
    }
  });

  enum class Stop { kNone, kLost, kMaxHold } reason = Stop::kNone;
  bool terminating = false, killed = false;
  Steady::time_point kill_at{};
  const auto hold_deadline = t_acquired + std::chrono::milliseconds(a.max_hold_ms);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (r < 0 && errno != EINTR) {  // never expected: the child is ours alone
      std::fprintf(stderr, "dlock: waitpid: %s\n", std::strerror(errno));
      kill(child, SIGKILL);
      status = W_EXITCODE(kExitInternal, 0);
      break;
    }
    auto now = Steady::now();
    auto start_stopping = [&](Stop why, const std::string& text) {
      reason = why;
      terminating = true;
      kill_at = now + std::chrono::milliseconds(a.grace_ms);
      std::fprintf(stderr, "dlock: %s; stopping the command (SIGTERM, SIGKILL after %s)\n",
                   text.c_str(), FormatDuration(a.grace_ms).c_str());
      kill(target, SIGTERM);
    };
    if (!terminating && w.lost) {
      std::string why;
      {
        std::lock_guard<std::mutex> g(w.mu);
        why = w.why;
      }
      start_stopping(Stop::kLost, why);
    }
    if (!terminating && a.max_hold_ms > 0 && now >= hold_deadline)
      start_stopping(Stop::kMaxHold, "'" + a.key + "' was held for --max-hold " +
                                         FormatDuration(a.max_hold_ms));
    if (terminating && !killed && now >= kill_at) {
      std::fprintf(stderr, "dlock: the command did not stop within %s; SIGKILL\n",
                   FormatDuration(a.grace_ms).c_str());
      kill(target, SIGKILL);
      killed = true;
    }
    int64_t timeout = 1000;
    if (!terminating && a.max_hold_ms > 0)
      timeout = std::min<int64_t>(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                               hold_deadline - now).count() + 1);
    if (terminating && !killed)
      timeout = std::min<int64_t>(
          timeout, std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - now).count() + 1);
    siginfo_t si;
    int sig = wait_signal(timeout, &si);
    // A signal from the terminal (Ctrl-C) already reached an interactive
    // command, which shares our process group: pass on only what was sent
    // to us alone.
    if (sig > 0 && IsForwarded(sig) && !(interactive && si.si_code == SI_KERNEL)) {
      if (a.verbose) std::fprintf(stderr, "dlock: passing %s to the command\n", SigName(sig).c_str());
      kill(target, sig);
    }
  }

  w.stop = true;
  lock->Cancel();
  watcher.join();
  const int64_t held_ms = MsSince(t_acquired);
  dlock::Status rel = lock->Release();
  if (reason == Stop::kNone && rel.code() == dlock::Code::kLost) {
    reason = Stop::kLost;
    std::fprintf(stderr, "dlock: %s (while the command ran)\n", rel.message().c_str());
  } else if (!rel.ok() && reason == Stop::kNone) {
    std::fprintf(stderr, "dlock: releasing '%s' failed: %s (the lease expires by itself)\n",
                 a.key.c_str(), rel.message().c_str());
  }
  if (a.verbose && rel.ok())
    std::fprintf(stderr, "dlock: released '%s' after %s\n", a.key.c_str(), FormatDuration(held_ms).c_str());
  if (reason != Stop::kNone) return kExitLost;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitInternal;
}

}  // namespace dlock_cli
