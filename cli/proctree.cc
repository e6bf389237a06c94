#include "proctree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

namespace dlock_cli {

namespace {

// The parent of pid from /proc/PID/stat ("pid (comm) state ppid ..."; comm
// may hold spaces and parentheses, so read after the last ')'). -1 when the
// process is gone.
pid_t ParentOf(const char* pid) {
  char path[300], buf[512];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr || std::strlen(close_paren) < 5) return -1;
  return static_cast<pid_t>(std::strtol(close_paren + 4, nullptr, 10));
}

}  // namespace

std::vector<pid_t> Descendants(pid_t root) {
  std::unordered_multimap<pid_t, pid_t> children;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      pid_t ppid = ParentOf(e->d_name);
      if (ppid > 0) children.emplace(ppid, static_cast<pid_t>(std::atoi(e->d_name)));
    }
    closedir(d);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto range = children.equal_range(p);
    for (auto it = range.first; it != range.second; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

int SignalDescendants(pid_t root, int sig) {
  std::vector<pid_t> all = Descendants(root);
  for (pid_t p : all) kill(p, sig);
  return static_cast<int>(all.size());
}

}  // namespace dlock_cli
