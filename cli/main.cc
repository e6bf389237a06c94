// `dlock`: a distributed flock(1) on MySQL/MariaDB, and the operator's tool
// for the lock tables. Options are parsed by CLI11; `dlock run`'s KEY and
// CMD are split off first, as flock(1) does: options stop at the command.
// Each subcommand lives in run.cc, admin.cc or doctor.cc.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "duration.h"
#include "exit_codes.h"
#include "guard.h"
#include "say.h"

namespace {

using namespace dlock_cli;

const char* const kCommands[] = {"run", "list", "release", "init", "cleanup", "doctor"};

std::string ExitCodeHelp() {
  std::string s = "Exit codes:\n";
  char buf[300];
  for (const auto& e : kExitTable) {
    std::snprintf(buf, sizeof buf, "  %3d  %s\n", e.code, e.meaning);
    s += buf;
  }
  s += "  run otherwise exits with CMD's status (128+N when CMD was killed by signal N).\n"
       "\nEnvironment: DLOCK_URL (the database, instead of --url), DLOCK_PASSWORD (the password,\n"
       "kept out of ps). CMD gets DLOCK_KEY, DLOCK_OWNER and DLOCK_TOKEN (the fencing token), and\n"
       "neither DLOCK_PASSWORD nor the URL's password.\n"
       "URL: mysql://user[:password]@host[:port]/database[?table=...&row_table=...&...], or as\n"
       "your services have it: user:password@tcp(host:3306)/database?... (go-sql-driver) or\n"
       "jdbc:mysql://host:3306/database?user=...&password=... (see dlock.h).\n"
       "Galera: mysql://user@host:port,host:port,.../database names the nodes; locks go to the\n"
       "first healthy one.\n";
  return s;
}

// Everything the command line sets.
struct Options {
  std::string url;
  RunArgs run;
  std::string ttl = "30s", wait, max_hold = "0", grace, mode = "lease";
  std::string key_help;  // KEY and CMD are never parsed by CLI11 (SplitArgs)
  std::vector<std::string> cmd_help;
  bool nonblock = false;
  std::string prefix;
  bool json = false;
  std::string release_key;
  bool force = false;
  bool print_sql = false;
  std::string cleanup_grace = "1h";
};

struct Commands {
  CLI::App* run;
  CLI::App* list;
  CLI::App* release;
  CLI::App* init;
  CLI::App* cleanup;
  CLI::App* doctor;
};

CLI::App* AddRun(CLI::App& app, Options* o) {
  RunArgs& ra = o->run;
  CLI::App* run = app.add_subcommand(
      "run", "Run CMD while holding the lock KEY (a lease renewed in the background, or a row "
             "lock); exit with CMD's status, 75 when KEY is busy, 79 when the lock was lost.");
  // KEY and CMD are split off before parsing (SplitRun); these two only
  // show them in --help.
  run->add_option("KEY", o->key_help, "lock name (bytes, at most 512)");
  run->add_option("CMD", o->cmd_help, "the command and its arguments: the first word after KEY that "
                                   "is not an option starts it (or put it after --)");
  run->add_option("--ttl", o->ttl, "lease time, renewed every ttl/3 while CMD runs (lease mode)")
      ->type_name("DURATION")
      ->capture_default_str();
  run->add_option("-w,--wait", o->wait, "how long to wait for the lock (default 0: one try; none: no limit)")
      ->type_name("DURATION");
  run->add_flag("-n,--nonblock", o->nonblock, "one try, do not wait (= --wait 0)");
  run->add_option("--max-hold", o->max_hold,
                  "stop CMD after holding the lock this long; 0 = no limit (the default here; "
                  "the library's is 5m)")
      ->type_name("DURATION")
      ->capture_default_str();
  run->add_option("--grace", o->grace,
                  "time between SIGTERM and SIGKILL when CMD must stop (default 10s, or "
                  "ttl/3 - margin if less: 8s at --ttl 30s; at most ttl/2 - margin)")
      ->type_name("DURATION");
  run->add_option("--mode", o->mode, "lease: a renewed lease with a fencing token; row: SELECT ... "
                                     "FOR UPDATE in a transaction kept open while CMD runs")
      ->check(CLI::IsMember({"lease", "row"}))
      ->type_name("MODE")
      ->capture_default_str();
  run->add_option("-E,--conflict-exit-code", ra.conflict_exit_code,
                  "exit code when KEY is busy (default 75)")
      ->check(CLI::Range(0, 255))
      ->type_name("N");
  run->add_flag("-q,--quiet", ra.quiet, "say nothing when KEY is busy (for cron)");
  run->add_flag("-v,--verbose", ra.verbose,
                "report acquire and release on stderr; when busy, name the holder");
  run->footer(
      "Durations: 30, 0.5, .5, 500ms, 30s, 1m30s, 2h, 1d. CMD gets DLOCK_KEY, DLOCK_OWNER,\n"
      "DLOCK_TOKEN. Options stop at CMD: dlock run KEY -w 10s ls -d DIR runs `ls -d DIR`.\n"
      "No --max-hold by default: a job runs as long as it runs (dlock list shows for how long).\n"
      "Exit: CMD's status; 75 busy (-E); 79 lost or --max-hold (CMD got SIGTERM, SIGKILL after\n"
      "--grace, always before the lease could expire); 69 lock not tried; 2 usage; 126/127.\n"
      "Example: dlock run job:nightly --ttl 30s -n /usr/local/bin/nightly --full\n");
  return run;
}

Commands AddCommands(CLI::App& app, Options* o) {
  Commands c;
  c.run = AddRun(app, o);
  c.list = app.add_subcommand(
      "list", "Show every held lease: key, owner, token, held for, expires in (database time). "
              "Row locks are not listed: the server names the rows a transaction locks only "
              "while another waits for them.");
  c.list->add_option("PREFIX", o->prefix, "only keys starting with this");
  c.list->add_flag("--json", o->json, "a JSON array for scripts (binary keys as key_hex)");
  c.release = app.add_subcommand(
      "release", "Take a lease away from its holder (the operator's escape hatch). The key stays "
                 "taken until the revoked lease would have ended, so that its holder (which finds "
                 "the lock lost at its next renewal) has stopped before another owner can start. "
                 "Exit 1 if KEY was not held.");
  c.release->add_option("KEY", o->release_key, "lock name")->required();
  c.release->add_flag("--force", o->force, "required: confirms that another process's lock is taken away");
  c.init = app.add_subcommand("init", "Create the lock tables (idempotent), or print their DDL.");
  c.init->add_flag("--print-sql", o->print_sql, "print the CREATE TABLE statements for a DBA instead");
  c.cleanup = app.add_subcommand("cleanup", "One cleanup pass: delete leases expired longer than "
                                            "--grace ago; prints how many.");
  c.cleanup->add_option("--grace", o->cleanup_grace, "keep leases expired less than this long ago")
      ->type_name("DURATION")
      ->capture_default_str();
  c.doctor = app.add_subcommand(
      "doctor", "Check the server and the lock tables; each line OK/WARN/FAIL with what to do. "
                "Exit 1 if any line is FAIL.");
  return c;
}

// Does token (an option of run's, or a global one) take the next word as
// its value?
bool TakesValue(CLI::App& app, CLI::App* run, const std::string& token) {
  auto value_option = [&](const std::string& name) {
    const CLI::Option* o = run->get_option_no_throw(name);
    if (o == nullptr) o = app.get_option_no_throw(name);
    return o != nullptr && o->get_items_expected_max() > 0;
  };
  if (token.compare(0, 2, "--") == 0) return token.find('=') == std::string::npos && value_option(token);
  // -qw 5: flags, then at most one option whose value is the rest or the next word.
  for (size_t k = 1; k < token.size(); ++k)
    if (value_option(std::string("-") + token[k])) return k + 1 == token.size();
  return false;
}

// Splits `dlock [global options] run [options] KEY [options] CMD [ARGS...]`:
// what CLI11 parses goes to *own, KEY and CMD out. Options stop at the
// first word after KEY; "--" ends them too. *sub: the command word.
void SplitArgs(CLI::App& app, CLI::App* run, const std::vector<std::string>& args,
               std::vector<std::string>* own, std::string* sub, RunArgs* ra) {
  size_t i = 1;
  own->push_back(args[0]);
  for (; i < args.size(); ++i) {
    const std::string& t = args[i];
    if (t.size() < 2 || t[0] != '-') break;
    own->push_back(t);
    if (TakesValue(app, run, t) && i + 1 < args.size()) own->push_back(args[++i]);
  }
  if (i == args.size()) return;
  *sub = args[i];
  if (*sub != "run") {
    own->insert(own->end(), args.begin() + static_cast<long>(i), args.end());
    return;
  }
  own->push_back(args[i++]);
  bool have_key = false;
  for (; i < args.size(); ++i) {
    const std::string& t = args[i];
    if (t == "--") {
      ++i;
      if (!have_key && i < args.size()) {
        ra->key = args[i++];
        have_key = true;
      }
      break;
    }
    if (t.size() >= 2 && t[0] == '-') {
      own->push_back(t);
      if (TakesValue(app, run, t) && i + 1 < args.size()) own->push_back(args[++i]);
      continue;
    }
    if (have_key) break;  // the command
    ra->key = t;
    have_key = true;
  }
  if (have_key) ra->cmd.assign(args.begin() + static_cast<long>(std::min(i, args.size())), args.end());
}

bool Duration(const std::string& opt, const std::string& text, int64_t* ms, std::string* err) {
  if (ParseDuration(text, ms, err)) return true;
  *err = opt + ": " + *err;
  return false;
}

// Checks run's options and fills the rest of o->run. 0, or the exit code.
int PrepareRun(CLI::App* run, Options* o) {
  RunArgs& ra = o->run;
  std::string err;
  ra.lease = o->mode == "lease";
  if (ra.key.empty()) return Fail(kExitUsage, "run: no KEY (dlock run KEY [options] CMD [ARGS...])");
  if (ra.cmd.empty()) return Fail(kExitUsage, "run: no command given (dlock run KEY [options] CMD [ARGS...])");
  if (o->nonblock && !o->wait.empty()) return Fail(kExitUsage, "-n/--nonblock and -w/--wait: give one");
  if (!Duration("--ttl", o->ttl, &ra.ttl_ms, &err) ||
      !(o->wait == "none" ? (ra.wait_ms = -1, true)  // no limit: the core's negative wait
                          : Duration("--wait", o->wait.empty() ? "0" : o->wait, &ra.wait_ms, &err)) ||
      !Duration("--max-hold", o->max_hold, &ra.max_hold_ms, &err))
    return Fail(kExitUsage, err);
  if (ra.lease && ra.ttl_ms < 1000) return Fail(kExitUsage, "--ttl: at least 1s (the lease is renewed every ttl/3)");
  ra.grace_ms = DefaultGraceMs(ra.lease, ra.ttl_ms);
  if (run->count("--grace") > 0) {
    if (!Duration("--grace", o->grace, &ra.grace_ms, &err)) return Fail(kExitUsage, err);
    if (ra.lease && ra.grace_ms > MaxGraceMs(ra.ttl_ms))
      return Fail(kExitUsage,
                  "--grace " + FormatDuration(ra.grace_ms) + " does not fit --ttl " +
                      FormatDuration(ra.ttl_ms) + ": the command must be dead before the lease can "
                      "expire, so grace + a margin (" + FormatDuration(SafetyMarginMs(ra.ttl_ms)) +
                      ") must fit in half the ttl; use --grace " + FormatDuration(MaxGraceMs(ra.ttl_ms)) +
                      " or less, or a longer --ttl");
  }
  ra.url = o->url;
  return 0;
}

int Dispatch(const Commands& c, Options* o) {
  auto need_url = [&]() -> bool {
    if (!o->url.empty()) return true;
    Fail(kExitUsage, "no database URL: pass --url or set DLOCK_URL");
    return false;
  };
  if (c.run->parsed()) {
    if (int rc = PrepareRun(c.run, o); rc != 0) return rc;
    return need_url() ? CmdRun(o->run) : kExitUsage;
  }
  if (c.list->parsed()) return need_url() ? CmdList(o->url, o->prefix, o->json) : kExitUsage;
  if (c.release->parsed()) {
    if (!o->force) return Fail(kExitUsage, "release takes --force: it takes the lock away from its holder");
    return need_url() ? CmdRelease(o->url, o->release_key) : kExitUsage;
  }
  if (c.init->parsed()) {
    if (!o->print_sql && !need_url()) return kExitUsage;
    return CmdInit(o->url, o->print_sql);
  }
  if (c.cleanup->parsed()) {
    int64_t g = 0;
    std::string err;
    if (!Duration("--grace", o->cleanup_grace, &g, &err)) return Fail(kExitUsage, err);
    return need_url() ? CmdCleanup(o->url, g) : kExitUsage;
  }
  if (c.doctor->parsed()) return need_url() ? CmdDoctor(o->url) : kExitUsage;
  return Fail(kExitUsage, "no command (see dlock --help)");
}

}  // namespace

int main(int argc, char** argv) {
  NoteInheritedSignals();  // before anything (the database connector) changes them
  const std::vector<std::string> args(argv, argv + argc);
  // Whatever might hold a password is known before the first message.
  if (const char* env = std::getenv("DLOCK_URL")) NoteSecrets(env);
  for (const auto& a : args) {
    if (a.find("://") != std::string::npos) NoteSecrets(a.substr(a.find('=') < a.find("://") ? a.find('=') + 1 : 0));
    // A go-sql-driver DSN (user:password@tcp(host)/db) has no scheme.
    else if (a.find('@') != std::string::npos)
      NoteSecrets(a.compare(0, 2, "--") == 0 && a.find('=') != std::string::npos ? a.substr(a.find('=') + 1) : a);
  }

  CLI::App app{"dlock: distributed locks on MySQL/MariaDB; run a command under a lock, like flock(1)"
               " across hosts, and inspect or repair the lock tables.",
               "dlock"};
  app.set_version_flag("--version", std::string("dlock ") + dlock::Version());
  app.require_subcommand(1);
  app.fallthrough();
  app.footer(ExitCodeHelp());
  Options o;
  app.add_option("--url", o.url, "database URL (default: $DLOCK_URL); several independent servers: URLs joined by ';'")->envname("DLOCK_URL")->type_name("URL");
  const Commands c = AddCommands(app, &o);

  std::vector<std::string> own;
  std::string sub;
  SplitArgs(app, c.run, args, &own, &sub, &o.run);
  if (!sub.empty()) {
    bool known = false;
    for (const char* k : kCommands) known = known || sub == k;
    if (!known)
      return Fail(kExitUsage, "unknown command '" + sub + "' (commands: run, list, release, init, "
                              "cleanup, doctor; see dlock --help)");
  }
  std::vector<char*> own_argv;
  for (auto& a : own) own_argv.push_back(const_cast<char*>(a.c_str()));
  try {
    app.parse(static_cast<int>(own_argv.size()), own_argv.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return Fail(kExitUsage, std::string(e.what()) + " (see dlock --help)");
  }
  return Dispatch(c, &o);
}
