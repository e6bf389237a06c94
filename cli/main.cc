// `dlock`: a distributed flock(1) on MySQL/MariaDB, and the operator's tool
// for the lock tables. Arguments are parsed by CLI11; each subcommand lives
// in run.cc or admin.cc.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "duration.h"
#include "exit_codes.h"

namespace {

using namespace dlock_cli;

std::string ExitCodeHelp() {
  std::string s = "Exit codes:\n";
  char buf[300];
  for (const auto& e : kExitTable) {
    std::snprintf(buf, sizeof buf, "  %3d  %s\n", e.code, e.meaning);
    s += buf;
  }
  s += "  run otherwise exits with CMD's status (128+N when CMD was killed by signal N).\n"
       "\nEnvironment: DLOCK_URL (the database, instead of --url), DLOCK_PASSWORD (the password,\n"
       "kept out of ps). CMD gets DLOCK_KEY, DLOCK_OWNER and DLOCK_TOKEN (the fencing token).\n"
       "URL: mysql://user[:password]@host[:port]/database[?table=...&row_table=...&...]\n";
  return s;
}

bool Duration(const std::string& opt, const std::string& text, int64_t* ms, std::string* err) {
  if (ParseDuration(text, ms, err)) return true;
  *err = opt + ": " + *err;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // Everything after the first "--" is the command of `dlock run`, untouched
  // by option parsing.
  std::vector<char*> own;
  std::vector<std::string> after_dashes;
  bool dashes = false;
  for (int i = 0; i < argc; ++i) {
    if (!dashes && i > 0 && std::string(argv[i]) == "--") {
      dashes = true;
      continue;
    }
    if (dashes) after_dashes.emplace_back(argv[i]);
    else own.push_back(argv[i]);
  }

  CLI::App app{"dlock: distributed locks on MySQL/MariaDB; run a command under a lock, like flock(1)"
               " across hosts, and inspect or repair the lock tables.",
               "dlock"};
  app.set_version_flag("--version", std::string("dlock ") + dlock::Version());
  app.require_subcommand(1);
  app.fallthrough();
  app.footer(ExitCodeHelp());
  std::string url;
  app.add_option("--url", url, "database URL (default: $DLOCK_URL)")
      ->envname("DLOCK_URL")
      ->type_name("URL");

  RunArgs ra;
  std::string ttl = "30s", wait = "0", max_hold = "5m", grace = "10s";
  std::vector<std::string> cmd_positional;
  CLI::App* run = app.add_subcommand(
      "run", "Run CMD while holding the lock KEY (a lease renewed in the background, or a row lock); "
             "exit with CMD's status, 75 when KEY is busy, 79 when the lock was lost.");
  run->add_option("KEY", ra.key, "lock name (bytes, at most 512)")->required();
  run->add_option("CMD", cmd_positional, "command and its arguments (put them after --)");
  run->add_option("--ttl", ttl, "lease time, renewed every ttl/3 while CMD runs (lease mode)")
      ->type_name("DURATION")
      ->capture_default_str();
  run->add_option("--wait", wait, "how long to wait for the lock; 0 = one try")
      ->type_name("DURATION")
      ->capture_default_str();
  run->add_option("--max-hold", max_hold, "stop CMD after holding the lock this long; 0 = no limit")
      ->type_name("DURATION")
      ->capture_default_str();
  run->add_option("--grace", grace, "time between SIGTERM and SIGKILL when CMD must stop")
      ->type_name("DURATION")
      ->capture_default_str();
  run->add_option("--mode", ra.mode, "lease: a renewed lease with a fencing token; row: SELECT ... "
                                     "FOR UPDATE in a transaction kept open while CMD runs")
      ->check(CLI::IsMember({"lease", "row"}))
      ->type_name("MODE")
      ->capture_default_str();
  run->add_flag("-v,--verbose", ra.verbose, "report acquire and release on stderr");
  run->footer(
      "Durations: 30, 0.5, 500ms, 30s, 5m, 1h. CMD gets DLOCK_KEY, DLOCK_OWNER, DLOCK_TOKEN.\n"
      "Exit: CMD's status; 75 busy; 79 lost or max hold (CMD got SIGTERM, SIGKILL after --grace);\n"
      "69 lock not tried (URL, server); 2 usage; 126/127 CMD not executable/not found.\n"
      "Example: dlock run job:nightly --ttl 30s --wait 0 -- /usr/local/bin/nightly --full\n");

  std::string prefix;
  bool json = false;
  CLI::App* list = app.add_subcommand("list", "Show every held lease: key, owner, token, held for, "
                                              "expires in (database time).");
  list->add_option("PREFIX", prefix, "only keys starting with this");
  list->add_flag("--json", json, "a JSON array for scripts");

  std::string rel_key;
  bool force = false;
  CLI::App* release = app.add_subcommand(
      "release", "Free a lease held by someone else (the operator's escape hatch; its holder finds "
                 "the lock lost at its next renewal). Prints what it removed; exit 1 if KEY was not held.");
  release->add_option("KEY", rel_key, "lock name")->required();
  release->add_flag("--force", force, "required: confirms that another process's lock is taken away");

  bool print_sql = false;
  CLI::App* init = app.add_subcommand("init", "Create the lock tables (idempotent), or print their DDL.");
  init->add_flag("--print-sql", print_sql, "print the CREATE TABLE statements for a DBA instead");

  std::string cleanup_grace = "1h";
  CLI::App* cleanup = app.add_subcommand("cleanup", "One cleanup pass: delete leases expired longer "
                                                    "than --grace ago; prints how many.");
  cleanup->add_option("--grace", cleanup_grace, "keep leases expired less than this long ago")
      ->type_name("DURATION")
      ->capture_default_str();

  CLI::App* doctor = app.add_subcommand(
      "doctor", "Check the server and the lock tables; each line OK/WARN/FAIL with what to do. "
                "Exit 1 if any line is FAIL.");

  // The first word that is not an option names the command: say so when it
  // is not one (CLI11 would only report a missing subcommand).
  for (size_t i = 1; i < own.size(); ++i) {
    std::string w = own[i];
    if (w == "--url") {
      ++i;
      continue;
    }
    if (w.empty() || w[0] == '-') continue;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      known = known || sub->get_name() == w;
    if (!known) {
      std::fprintf(stderr, "dlock: unknown command '%s' (commands: run, list, release, init, "
                           "cleanup, doctor; see dlock --help)\n", w.c_str());
      return kExitUsage;
    }
    break;
  }

  try {
    app.parse(static_cast<int>(own.size()), own.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "dlock: %s (see dlock --help)\n", e.what());
    return kExitUsage;
  }

  auto need_url = [&]() -> bool {
    if (!url.empty()) return true;
    Fail(kExitUsage, "no database URL: pass --url or set DLOCK_URL");
    return false;
  };
  std::string err;
  if (!run->parsed() && !after_dashes.empty())
    return Fail(kExitUsage, "arguments after -- are only for `dlock run`");

  if (run->parsed()) {
    ra.cmd = cmd_positional;
    ra.cmd.insert(ra.cmd.end(), after_dashes.begin(), after_dashes.end());
    if (!Duration("--ttl", ttl, &ra.ttl_ms, &err) || !Duration("--wait", wait, &ra.wait_ms, &err) ||
        !Duration("--max-hold", max_hold, &ra.max_hold_ms, &err) ||
        !Duration("--grace", grace, &ra.grace_ms, &err))
      return Fail(kExitUsage, err);
    if (ra.mode == "lease" && ra.ttl_ms < 1000)
      return Fail(kExitUsage, "--ttl: at least 1s (the lease is renewed every ttl/3)");
    if (ra.wait_ms > 24LL * 3600 * 1000) return Fail(kExitUsage, "--wait: at most 24h");
    if (ra.cmd.empty()) return Fail(kExitUsage, "run: no command given (dlock run KEY -- CMD [ARGS...])");
    if (!need_url()) return kExitUsage;
    ra.url = url;
    return CmdRun(ra);
  }
  if (list->parsed()) return need_url() ? CmdList(url, prefix, json) : kExitUsage;
  if (release->parsed()) {
    if (!force)
      return Fail(kExitUsage, "release takes --force: it takes the lock away from its holder");
    return need_url() ? CmdRelease(url, rel_key) : kExitUsage;
  }
  if (init->parsed()) {
    if (!print_sql && !need_url()) return kExitUsage;
    return CmdInit(url, print_sql);
  }
  if (cleanup->parsed()) {
    int64_t g = 0;
    if (!Duration("--grace", cleanup_grace, &g, &err)) return Fail(kExitUsage, err);
    return need_url() ? CmdCleanup(url, g) : kExitUsage;
  }
  if (doctor->parsed()) return need_url() ? CmdDoctor(url) : kExitUsage;
  return Fail(kExitUsage, "no command (see dlock --help)");
}
