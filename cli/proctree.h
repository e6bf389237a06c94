// The processes below a process: its children, theirs, and so on, read
// from /proc (Linux). Used by the guard (guard.h) to stop a job's whole
// tree, including what left the job's process group or session.
#ifndef DLOCK_CLI_PROCTREE_H_
#define DLOCK_CLI_PROCTREE_H_

#include <sys/types.h>

#include <vector>

namespace dlock_cli {

// Every process whose chain of parents leads to root (root excluded),
// zombies included. A snapshot: a process may fork or exit right after.
std::vector<pid_t> Descendants(pid_t root);

// Sends sig to each of Descendants(root); returns how many there were.
int SignalDescendants(pid_t root, int sig);

}  // namespace dlock_cli

#endif  // DLOCK_CLI_PROCTREE_H_
