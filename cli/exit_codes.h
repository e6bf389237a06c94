// The exit codes of `dlock`: one table, expanded into `dlock --help` and
// checked against cli/README.md by the tests.
#ifndef DLOCK_CLI_EXIT_CODES_H_
#define DLOCK_CLI_EXIT_CODES_H_

namespace dlock_cli {

enum Exit : int {
  kExitOk = 0,
  kExitFailed = 1,       // list/doctor/release: the command ran and found a problem
  kExitUsage = 2,        // bad arguments: unknown command or option, bad duration, no URL
  kExitUnavailable = 69, // the lock could not be tried: bad URL, no server, access denied, read-only
  kExitBusy = 75,        // run: not acquired within --wait (EX_TEMPFAIL, as flock -E users expect)
  kExitLost = 79,        // run: the lock was lost, not renewed or --max-hold ran out; CMD was stopped
  kExitInternal = 125,   // run: dlock itself failed after taking the lock (fork failed, ...)
  kExitNotExec = 126,    // run: CMD was found but could not be executed
  kExitNotFound = 127,   // run: CMD was not found
};

struct ExitInfo {
  int code;
  const char* meaning;
};

inline const ExitInfo kExitTable[] = {
    {kExitOk, "success (run: CMD exited 0)"},
    {kExitFailed, "list/release/doctor found nothing to do or a FAIL line (run: CMD's own 1)"},
    {kExitUsage, "usage error: unknown command or option, bad duration, missing URL, --grace "
                 "too long for the ttl"},
    {kExitUnavailable, "the lock could not be tried at all: bad URL, no server, access denied, "
                       "read-only server, database error"},
    {kExitBusy, "run: the lock was not acquired within --wait (EX_TEMPFAIL; -E N changes it)"},
    {kExitLost, "run: the lock was lost (taken, revoked), could not be renewed, or --max-hold "
                "ran out; CMD was sent SIGTERM, then SIGKILL, before the lease could expire"},
    {kExitInternal, "run: dlock failed after taking the lock (could not start CMD, its guard "
                    "died)"},
    {kExitNotExec, "run: CMD is not executable"},
    {kExitNotFound, "run: CMD was not found"},
};

}  // namespace dlock_cli

#endif  // DLOCK_CLI_EXIT_CODES_H_
