#include "guard.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "exit_codes.h"
#include "proctree.h"

namespace dlock_cli {

namespace {

sigset_t g_inherited_mask;
struct sigaction g_inherited_sigpipe;

enum Op : int32_t { kOpStart = 1, kOpSignalJob, kOpSignalTree, kOpKillAt };

struct Header {
  int32_t op;
  int32_t unused;
  int64_t arg;
  uint64_t payload_size;
};

struct Report {
  int32_t kind;
  int32_t pid;
  int32_t exec_errno;
  int32_t status;
  int32_t leftovers;
};

bool ReadFull(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // what std::chrono::steady_clock reads
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Strings in a payload: a 4-byte length, then the bytes.
void PutString(std::string* out, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&n), sizeof n);
  out->append(s);
}

bool GetString(const std::string& in, size_t* pos, std::string* s) {
  uint32_t n;
  if (*pos + sizeof n > in.size()) return false;
  std::memcpy(&n, in.data() + *pos, sizeof n);
  *pos += sizeof n;
  if (*pos + n > in.size()) return false;
  s->assign(in, *pos, n);
  *pos += n;
  return true;
}

bool GetStrings(const std::string& in, size_t* pos, std::vector<std::string>* v) {
  std::string count;
  if (!GetString(in, pos, &count)) return false;
  for (unsigned long n = std::strtoul(count.c_str(), nullptr, 10); n > 0; --n) {
    v->emplace_back();
    if (!GetString(in, pos, &v->back())) return false;
  }
  return true;
}

// ---- the guard process ------------------------------------------------------

class GuardProcess {
 public:
  GuardProcess(int ctl, int news) : ctl_(ctl), news_(news), self_(getpid()) {}
  void Run();

 private:
  void Tell(Report r) {
    // A gone dlock is noticed on the control pipe; nothing to do here.
    (void)WriteFull(news_, &r, sizeof r);
  }
  void Spawn(const std::string& payload);
  // Reaps every child that ended; reports the job's end, and kEmpty once
  // the job ended and no process of its tree is left.
  void Reap();
  // SIGKILL to the tree until nothing is left (bounded: a process stuck in
  // the kernel cannot die until its I/O ends).
  void KillTree();
  int PollTimeoutMs() const;

  const int ctl_, news_;
  const pid_t self_;
  int sigchld_fd_ = -1;
  pid_t job_ = 0;
  bool own_group_ = true;
  bool job_done_ = false;
  bool empty_told_ = false;
  bool children_left_ = false;
  int64_t kill_at_ns_ = 0;  // 0 = none
};

void GuardProcess::Spawn(const std::string& payload) {
  std::string path, group;
  std::vector<std::string> args, env;
  size_t pos = 0;
  if (!GetString(payload, &pos, &path) || !GetString(payload, &pos, &group) ||
      !GetStrings(payload, &pos, &args) || !GetStrings(payload, &pos, &env)) {
    Tell({Guard::News::kStarted, 0, EINVAL, 0, 0});
    return;
  }
  own_group_ = group == "1";
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int ep[2];
  if (pipe2(ep, O_CLOEXEC) != 0) {
    Tell({Guard::News::kStarted, 0, errno, 0, 0});
    return;
  }
  const pid_t child = fork();
  if (child == 0) {
    if (own_group_) setpgid(0, 0);
    // The job dies with its guard too (a second line behind the subreaper).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != self_) _exit(kExitInternal);
    sigaction(SIGPIPE, &g_inherited_sigpipe, nullptr);
    sigprocmask(SIG_SETMASK, &g_inherited_mask, nullptr);
    execve(path.c_str(), argv.data(), envp.data());
    int e = errno;
    (void)WriteFull(ep[1], &e, sizeof e);
    _exit(e == ENOENT ? kExitNotFound : kExitNotExec);
  }
  const int fork_errno = errno;
  close(ep[1]);
  if (child < 0) {
    close(ep[0]);
    Tell({Guard::News::kStarted, 0, fork_errno, 0, 0});
    return;
  }
  if (own_group_) setpgid(child, child);  // as the child does: whoever runs first
  job_ = child;
  int exec_errno = 0;
  if (!ReadFull(ep[0], &exec_errno, sizeof exec_errno)) exec_errno = 0;  // EOF: exec worked
  close(ep[0]);
  Tell({Guard::News::kStarted, child, exec_errno, 0, 0});
}

void GuardProcess::Reap() {
  bool job_ended = false;
  int job_status = 0;
  for (;;) {
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      if (p == job_ && !job_done_) {
        job_done_ = job_ended = true;
        job_status = st;
      }
      continue;
    }
    if (p < 0 && errno == EINTR) continue;
    children_left_ = p == 0;
    break;
  }
  if (job_ended) Tell({Guard::News::kExited, job_, 0, job_status, children_left_ ? 1 : 0});
  if (!children_left_ && job_done_ && !empty_told_) {
    empty_told_ = true;
    Tell({Guard::News::kEmpty, 0, 0, 0, 0});
  }
}

void GuardProcess::KillTree() {
  const int64_t give_up = NowNs() + 10LL * 1000000000;
  for (;;) {
    SignalDescendants(self_, SIGKILL);
    Reap();
    if (!children_left_ || NowNs() > give_up) return;
    // What was just killed is reaped by its parent, or comes to us as an
    // orphan; a child forked between the look and the kill comes too.
    timespec pause{0, 2000000};
    nanosleep(&pause, nullptr);
  }
}

int GuardProcess::PollTimeoutMs() const {
  if (kill_at_ns_ == 0) return -1;
  int64_t left = kill_at_ns_ - NowNs();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((left + 999999) / 1000000, 1000000));
}

void GuardProcess::Run() {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  prctl(PR_SET_NAME, "dlock-guard");
  // The guard must outlive what may hit dlock's process group (Ctrl-C,
  // Ctrl-Z and hang-up on a terminal, a kill to the group): those signals
  // stay blocked here, and the job gets the mask dlock was started with.
  sigset_t block;
  sigemptyset(&block);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU,
                SIGPIPE, SIGALRM, SIGCHLD})
    sigaddset(&block, s);
  sigprocmask(SIG_BLOCK, &block, nullptr);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigchld_fd_ = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  for (;;) {
    pollfd fds[2] = {{ctl_, POLLIN, 0}, {sigchld_fd_, POLLIN, 0}};
    int n = poll(fds, 2, PollTimeoutMs());
    if (n < 0 && errno == EINTR) continue;
    if (kill_at_ns_ != 0 && NowNs() >= kill_at_ns_) {
      kill_at_ns_ = 0;  // dlock is stopped or starved while its lease runs out
      Tell({Guard::News::kDeadline, 0, 0, 0, 0});
      KillTree();
    }
    if (n > 0 && (fds[1].revents & POLLIN)) {
      signalfd_siginfo si;
      while (read(sigchld_fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      }
      Reap();
    }
    if (n > 0 && fds[0].revents != 0) {
      Header h;
      if (!ReadFull(ctl_, &h, sizeof h)) {  // dlock is done, or dead
        KillTree();
        _exit(0);
      }
      std::string payload(h.payload_size, '\0');
      if (h.payload_size > 0 && !ReadFull(ctl_, payload.data(), payload.size())) {
        KillTree();
        _exit(0);
      }
      switch (h.op) {
        case kOpStart:
          Spawn(payload);
          break;
        case kOpSignalJob:
          if (job_ > 0 && !job_done_) kill(own_group_ ? -job_ : job_, static_cast<int>(h.arg));
          break;
        case kOpSignalTree:
          if (h.arg == SIGKILL) KillTree();
          else SignalDescendants(self_, static_cast<int>(h.arg));
          break;
        case kOpKillAt:
          kill_at_ns_ = h.arg;
          break;
        default:
          break;
      }
    }
  }
}

}  // namespace

void NoteInheritedSignals() {
  sigprocmask(SIG_SETMASK, nullptr, &g_inherited_mask);
  sigaction(SIGPIPE, nullptr, &g_inherited_sigpipe);
}

Guard::~Guard() { (void)Close(); }

bool Guard::Fork(std::string* err) {
  int ctl[2], news[2];
  if (pipe2(ctl, O_CLOEXEC) != 0) {
    *err = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  if (pipe2(news, O_CLOEXEC) != 0) {
    *err = std::string("pipe: ") + std::strerror(errno);
    close(ctl[0]);
    close(ctl[1]);
    return false;
  }
  const pid_t p = fork();
  if (p == 0) {
    close(ctl[1]);
    close(news[0]);
    GuardProcess(ctl[0], news[1]).Run();
    _exit(0);
  }
  const int fork_errno = errno;
  close(ctl[0]);
  close(news[1]);
  if (p < 0) {
    close(ctl[1]);
    close(news[0]);
    *err = std::string("fork: ") + std::strerror(fork_errno);
    return false;
  }
  pid_ = p;
  ctl_fd_ = ctl[1];
  news_fd_ = news[0];
  return true;
}

bool Guard::Send(int op, int64_t arg, const std::string& payload) {
  if (ctl_fd_ < 0) return false;
  Header h{op, 0, arg, payload.size()};
  std::string msg(reinterpret_cast<const char*>(&h), sizeof h);
  msg += payload;
  return WriteFull(ctl_fd_, msg.data(), msg.size());
}

bool Guard::Start(const Job& job) {
  std::string p;
  PutString(&p, job.path);
  PutString(&p, job.own_group ? "1" : "0");
  PutString(&p, std::to_string(job.argv.size()));
  for (const auto& a : job.argv) PutString(&p, a);
  PutString(&p, std::to_string(job.env.size()));
  for (const auto& e : job.env) PutString(&p, e);
  return Send(kOpStart, 0, p);
}

void Guard::SignalJob(int sig) { (void)Send(kOpSignalJob, sig); }

void Guard::SignalTree(int sig) { (void)Send(kOpSignalTree, sig); }

void Guard::KillAt(Steady::time_point at) {
  const int64_t ns =
      at == Steady::time_point{}
          ? 0
          : std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  (void)Send(kOpKillAt, ns);
}

bool Guard::ReadNews(News* out) {
  Report r;
  if (news_fd_ < 0 || !ReadFull(news_fd_, &r, sizeof r)) return false;
  out->kind = static_cast<News::Kind>(r.kind);
  out->pid = r.pid;
  out->exec_errno = r.exec_errno;
  out->status = r.status;
  out->leftovers = r.leftovers != 0;
  return true;
}

int Guard::Close() {
  if (pid_ < 0) return -1;
  if (ctl_fd_ >= 0) close(ctl_fd_);
  ctl_fd_ = -1;
  int st = 0;
  while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  if (news_fd_ >= 0) close(news_fd_);
  news_fd_ = -1;
  pid_ = -1;
  return st;
}

}  // namespace dlock_cli
