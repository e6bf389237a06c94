// The subcommands of `dlock`. Each returns the process exit code
// (exit_codes.h) and prints one-line errors as "dlock: ...".
#ifndef DLOCK_CLI_COMMANDS_H_
#define DLOCK_CLI_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dlock/core.hpp"

namespace dlock_cli {

struct RunArgs {
  std::string url;
  std::string key;
  int64_t ttl_ms = 30000;
  int64_t wait_ms = 0;
  int64_t max_hold_ms = 300000;  // 0 = no limit
  int64_t grace_ms = 10000;      // SIGTERM .. SIGKILL
  std::string mode = "lease";
  bool verbose = false;
  std::vector<std::string> cmd;
};

int CmdRun(const RunArgs& a);
int CmdList(const std::string& url, const std::string& prefix, bool json);
int CmdRelease(const std::string& url, const std::string& key);
int CmdDoctor(const std::string& url);
int CmdInit(const std::string& url, bool print_sql);
int CmdCleanup(const std::string& url, int64_t grace_ms);

// Prints "dlock: msg" on stderr and returns code.
int Fail(int code, const std::string& msg);
// The exit code for a core status that kept the lock from being tried.
int ExitFor(const dlock::Status& s);

}  // namespace dlock_cli

#endif  // DLOCK_CLI_COMMANDS_H_
