// Table-name validation: a name is accepted exactly when it matches
// [A-Za-z_][A-Za-z0-9_]{0,57}, so that it can be written inside backticks
// with its "_fence" companion within MariaDB's 64-byte identifiers; the
// table and row_table options accept exactly the same names.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "options.h"

using dlock_fuzz::Show;

namespace {

bool Wanted(const std::string& n) {
  if (n.empty() || n.size() > 58 || (n[0] >= '0' && n[0] <= '9')) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1024) return 0;
  const std::string name(reinterpret_cast<const char*>(data), size);
  const dlock::Status s = dlock::ValidateIdentifier(name, "table");
  FUZZ_CHECK(s.ok() == Wanted(name), "ValidateIdentifier says %d for %s", s.ok(),
             Show(name).c_str());
  if (s.ok()) {
    FUZZ_CHECK(name.size() + 6 <= 64, "%s_fence is longer than 64 bytes", Show(name).c_str());
  } else {
    FUZZ_CHECK(s.code() == dlock::Code::kInvalid && dlock_fuzz::OneLine(s.message()),
               "message %s", Show(s.message()).c_str());
  }
  for (const char* option : {"table", "row_table"}) {
    dlock::ClientOptions o;
    const dlock::Status a = dlock::ApplyClientOption(option, name, &o);
    FUZZ_CHECK(a.ok() == s.ok(), "%s accepts %s: %d, ValidateIdentifier: %d", option,
               Show(name).c_str(), a.ok(), s.ok());
    dlock::Config cfg;
    FUZZ_CHECK(cfg.Set(option, name).ok() == s.ok(), "Config::Set(%s) differs for %s", option,
               Show(name).c_str());
  }
  return 0;
}
