// The subcommands of `dlock`. Each returns the process exit code
// (exit_codes.h) and prints one-line errors as "dlock: ..." (say.h).
#ifndef DLOCK_CLI_COMMANDS_H_
#define DLOCK_CLI_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dlock/core.hpp"
#include "exit_codes.h"

namespace dlock_cli {

struct RunArgs {
  std::string url;
  std::string key;
  bool lease = true;         // --mode lease (else row)
  int64_t ttl_ms = 30000;
  int64_t wait_ms = 0;
  int64_t max_hold_ms = 0;   // 0 = no limit (the CLI's default; see cli/README.md)
  int64_t grace_ms = 10000;  // SIGTERM .. SIGKILL
  bool verbose = false;
  bool quiet = false;                 // nothing on stderr when busy
  int conflict_exit_code = kExitBusy;  // the exit code when busy
  std::vector<std::string> cmd;
};

// Lease mode: how long before the lease can expire dlock wants the job's
// whole tree dead (SIGKILL sent): a tenth of the ttl, 200 ms .. 2 s.
int64_t SafetyMarginMs(int64_t ttl_ms);
// The default --grace: 10 s, or less with a short ttl so that grace and
// margin take at most a third of the ttl (a renewal is due every ttl/3 and
// has another third to come back before a stop would begin).
int64_t DefaultGraceMs(bool lease, int64_t ttl_ms);
// The longest --grace a ttl allows (lease mode).
int64_t MaxGraceMs(int64_t ttl_ms);

int CmdRun(const RunArgs& a);
int CmdList(const std::string& url, const std::string& prefix, bool json);
int CmdRelease(const std::string& url, const std::string& key);
int CmdDoctor(const std::string& url);
int CmdInit(const std::string& url, bool print_sql);
int CmdCleanup(const std::string& url, int64_t grace_ms);

// The exit code for a core status that kept the lock from being tried.
int ExitFor(const dlock::Status& s);

}  // namespace dlock_cli

#endif  // DLOCK_CLI_COMMANDS_H_
