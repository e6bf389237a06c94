// The job's guard: a small process that `dlock run` forks before it starts
// any thread or opens any connection. The guard starts CMD, is the
// subreaper of everything CMD starts (PR_SET_CHILD_SUBREAPER: an orphan
// below it comes back to it instead of to init, also after setsid), and
// takes that whole tree down:
//   - when dlock tells it to (a signal for the job or for the whole tree);
//   - when dlock dies, however (SIGKILL included): its end of the control
//     pipe closes, and the guard kills the tree at once;
//   - when the kill deadline dlock last gave it passes (dlock stopped or
//     starved while its lease runs out): the guard kills the tree itself.
// Being forked before any connection exists, the guard, and so CMD, holds
// no database socket; CMD gets the signal mask and SIGPIPE disposition
// dlock was started with.
#ifndef DLOCK_CLI_GUARD_H_
#define DLOCK_CLI_GUARD_H_

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace dlock_cli {

// Call first thing in main(), before anything can change them: the signal
// state that CMD is started with.
void NoteInheritedSignals();

class Guard {
 public:
  using Steady = std::chrono::steady_clock;

  struct Job {
    std::string path;               // resolved, as execve takes it
    std::vector<std::string> argv;  // argv[0] first
    std::vector<std::string> env;   // NAME=value
    bool own_group = true;          // a process group of its own (not on a terminal)
  };

  // What the guard reports.
  struct News {
    // kDeadline: the KillAt time passed, the guard killed the tree.
    enum Kind { kStarted, kExited, kEmpty, kDeadline } kind;
    pid_t pid = 0;       // kStarted: the job
    int exec_errno = 0;  // kStarted: execve failed with this (the job exited 126/127)
    int status = 0;      // kExited: the job's wait status
    bool leftovers = false;  // kExited: processes of its tree still run (kEmpty follows later)
  };

  Guard() = default;
  ~Guard();  // Close()
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  // Forks the guard. The calling process must have one thread. false with
  // *err when it cannot.
  bool Fork(std::string* err);
  pid_t pid() const { return pid_; }
  // Readable when news came (or the guard is gone: ReadNews says which).
  int news_fd() const { return news_fd_; }

  // Asks the guard to start job; kStarted follows.
  bool Start(const Job& job);
  // Sends sig to the job (its process group when it has one) while the job
  // has not exited.
  void SignalJob(int sig);
  // Sends sig to every process of the job's tree; SIGKILL repeats until
  // none is left (kEmpty follows).
  void SignalTree(int sig);
  // The guard kills the tree by itself at `at` unless told a later time
  // first (Steady::time_point{} = never).
  void KillAt(Steady::time_point at);

  // One report; false when the guard is gone.
  bool ReadNews(News* out);
  // Ends the guard: it kills whatever is left of the tree and exits; waits
  // for it. Returns its wait status (-1 when there was none).
  int Close();

 private:
  bool Send(int op, int64_t arg, const std::string& payload = "");
  pid_t pid_ = -1;
  int ctl_fd_ = -1;   // dlock -> guard
  int news_fd_ = -1;  // guard -> dlock
};

}  // namespace dlock_cli

#endif  // DLOCK_CLI_GUARD_H_
