// core_faketime: expiry uses the database's clock (A6). A helper process runs
// under faketime(1) with its wall clock hours off; what it does to the lock
// table must be exactly what an honest client would do.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

#include "core_test_util.h"

using dlock::Code;
using namespace dtest;

namespace {

const std::string kPrefix = UniquePrefix("fake");
const char* const kFaketime = "/usr/bin/faketime";

bool HaveFaketime() {
  struct stat st;
  return stat(kFaketime, &st) == 0 && (st.st_mode & S_IXUSR);
}

// Runs cmd through the shell and returns its first line of output.
std::string RunLine(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE_MESSAGE(p != nullptr, "popen failed: " << cmd);
  char buf[2048] = {0};
  std::string line;
  if (std::fgets(buf, sizeof buf, p) != nullptr) line = buf;
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
  }
  int rc = pclose(p);
  (void)rc;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

// A faketime setting for the helper.
struct Fake {
  const char* spec;   // passed to faketime
  bool offset;        // -f relative offset, else an absolute time
  long long skew_s;   // relative: expected faked - real, in seconds
};

std::string HelperCmd(const Fake& f, const char* mode, const std::string& key, int ttl_ms) {
  std::string cmd = "env FAKETIME_DONT_FAKE_MONOTONIC=1 ";
  // Under AddressSanitizer (DLOCK_SANITIZE=address) the helper would refuse
  // to start behind faketime's LD_PRELOAD library.
  const char* asan = std::getenv("ASAN_OPTIONS");
  cmd += "ASAN_OPTIONS='verify_asan_link_order=0";
  if (asan != nullptr && asan[0] != '\0' && std::strchr(asan, '\'') == nullptr) cmd += std::string(":") + asan;
  cmd += "' ";
  cmd += kFaketime;
  cmd += f.offset ? std::string(" -f '") + f.spec + "' " : std::string(" '") + f.spec + "' ";
  cmd += std::string(DLOCK_FAKETIME_HELPER) + " " + mode + " '" + key + "' " + std::to_string(ttl_ms) + " 2>&1";
  return cmd;
}

struct HelperResult {
  std::string word;  // OK / BUSY / ERR
  unsigned long long token = 0;
  long long faked_now = 0;
  std::string line;
};

HelperResult RunHelper(const Fake& f, const char* mode, const std::string& key, int ttl_ms) {
  HelperResult r;
  r.line = RunLine(HelperCmd(f, mode, key, ttl_ms));
  std::istringstream in(r.line);
  in >> r.word >> r.token >> r.faked_now;
  REQUIRE_MESSAGE((r.word == "OK" || r.word == "BUSY"), "helper under faketime '" << std::string(f.spec) << "' said: " << r.line);
  return r;
}

void CheckFaked(const Fake& f, long long faked_now) {
  const long long real = static_cast<long long>(std::time(nullptr));
  INFO("faketime '", std::string(f.spec), "': helper's clock ", faked_now, ", real ", real);
  // The helper really ran with a wrong clock (hours off), as configured.
  CHECK(std::llabs(faked_now - real) > 3600);
  if (f.offset) CHECK(std::llabs(faked_now - (real + f.skew_s)) < 120);
}

const Fake kFakes[] = {
    {"-2h", true, -7200},
    {"+2h", true, 7200},
    {"2030-01-01 00:00:00", false, 0},
};

}  // namespace

TEST_CASE("faketime: the tool is installed and fakes the clock") {
  REQUIRE_MESSAGE(HaveFaketime(), std::string(kFaketime) << " is missing: install faketime (scripts/setup.sh does)");
  const long long real = static_cast<long long>(std::time(nullptr));
  const std::string out = RunLine(std::string("env FAKETIME_DONT_FAKE_MONOTONIC=1 ") + kFaketime + " -f '-2h' date +%s");
  INFO("faketime -f '-2h' date +%s printed '", out, "'");
  REQUIRE(!out.empty());
  CHECK(std::llabs(std::stoll(out) - (real - 7200)) < 60);
}

TEST_CASE("faketime: a lease taken by a faked-clock client lasts its ttl by the DB clock") {
  REQUIRE_MESSAGE(HaveFaketime(), std::string(kFaketime) << " is missing: install faketime (scripts/setup.sh does)");
  Admin admin;
  auto c = OpenClient();
  for (const Fake& f : kFakes) {
    const std::string key = kPrefix + "hold_" + std::to_string(&f - kFakes);
    auto mine = OpenLock(c, key, "lease", 30000);
    INFO("faketime '", std::string(f.spec), "'");
    const auto spawned = Clock::now();
    HelperResult r = RunHelper(f, "hold", key, 2000);
    const auto reported = Clock::now();
    REQUIRE_MESSAGE(r.word == "OK", "the faked helper could not take a free key: " << r.line);
    CheckFaked(f, r.faked_now);
    // The row's expiry is 2 s ahead by the database clock, not hours off.
    const int64_t left_us = admin.Int("SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expire_time) "
                                      "FROM distributed_lock WHERE lock_key = " + Lit(key));
    CHECK(left_us > 0);
    CHECK(left_us <= 2000000);
    CHECK(std::stoull(*LeaseRow(admin, key)[2]) == r.token);

    int busy = 0;
    dlock::Status s;
    bool got = PollUntil(reported + std::chrono::seconds(5), [&] {
      s = mine->Try(0);
      REQUIRE_MESSAGE((s.ok() || s.code() == Code::kBusy), s.message());
      if (!s.ok()) ++busy;
      return s.ok();
    }, std::chrono::milliseconds(10));
    const auto taken = Clock::now();
    REQUIRE_MESSAGE(got, "the faked client's 2 s lease was still live 5 s later");
    const int64_t since_spawn = std::chrono::duration_cast<std::chrono::milliseconds>(taken - spawned).count();
    const int64_t since_report = std::chrono::duration_cast<std::chrono::milliseconds>(taken - reported).count();
    INFO("taken over ", since_spawn, " ms after the helper started, ", since_report,
         " ms after it reported, after ", busy, " busy attempts");
    CHECK(since_spawn >= 1900);
    CHECK(since_report < 3000);
    CHECK(busy > 10);
    CHECK(mine->token() > r.token);
    DT_CHECK_CODE(mine->Release(), Code::kOk);
  }
}

TEST_CASE("faketime: a faked-clock client cannot take over a live lease") {
  REQUIRE_MESSAGE(HaveFaketime(), std::string(kFaketime) << " is missing: install faketime (scripts/setup.sh does)");
  Admin admin;
  auto c = OpenClient();
  const std::string key = kPrefix + "live";
  auto mine = OpenLock(c, key, "lease", 20000);
  DT_REQUIRE_CODE(mine->Try(0), Code::kOk);
  const SqlRow before = LeaseRow(admin, key);
  REQUIRE(before.size() == 3);
  for (const Fake& f : kFakes) {
    INFO("faketime '", std::string(f.spec), "'");
    HelperResult r = RunHelper(f, "try", key, 2000);
    CheckFaked(f, r.faked_now);
    CHECK_MESSAGE(r.word == "BUSY", "a client with a wrong clock took a live lease: " << r.line);
    CHECK(LeaseRow(admin, key) == before);  // owner, expire_time, fence untouched
  }
  CHECK(mine->held());
  DT_CHECK_CODE(mine->Renew(), Code::kOk);
  DT_CHECK_CODE(mine->Release(), Code::kOk);
}
