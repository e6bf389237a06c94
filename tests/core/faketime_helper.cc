// core_faketime_helper: the faked-clock side of core_faketime. Run under
// faketime(1) by the test; not a test itself.
//   core_faketime_helper hold KEY TTL_MS   acquire a lease and exit without
//                                           releasing (a holder that crashed)
//   core_faketime_helper try KEY TTL_MS    one attempt (wait 0); release if won
// Prints one line: "OK <token> <time()>" or "BUSY 0 <time()>" or
// "ERR <code> <message>". time() is this process's (faked) clock.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

#include "dlock/core.hpp"
#include "dlock_test_env.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s hold|try KEY TTL_MS\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], key = argv[2], ttl = argv[3];
  auto err = [](const dlock::Status& s) {
    std::printf("ERR %s %s\n", dlock::CodeName(static_cast<int>(s.code())), s.message().c_str());
    std::fflush(stdout);
    _exit(1);
  };
  std::shared_ptr<dlock::Client> client;
  dlock::Status s = dlock::Client::Open(dlock_test_url(), dlock::Config(), &client);
  if (!s.ok()) err(s);
  dlock::Config cfg;
  if (!(s = cfg.Set("ttl_ms", ttl)).ok()) err(s);
  std::unique_ptr<dlock::Lock> lock;
  if (!(s = dlock::Lock::Open(client, key, cfg, &lock)).ok()) err(s);
  s = lock->Try(0);
  const long long now = static_cast<long long>(std::time(nullptr));
  if (s.code() == dlock::Code::kBusy) {
    std::printf("BUSY 0 %lld\n", now);
  } else if (s.ok()) {
    std::printf("OK %llu %lld\n", static_cast<unsigned long long>(lock->token()), now);
    std::fflush(stdout);
    if (mode == "hold") _exit(0);  // leave the lease in place, unreleased
    (void)lock->Release();
  } else {
    err(s);
  }
  std::fflush(stdout);
  return 0;
}
