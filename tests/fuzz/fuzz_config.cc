// dlock_config_set, through the C API: any key and value give DLOCK_OK or
// DLOCK_E_INVALID with a one-line message in the caller's error struct,
// and what is accepted is what the option table allows (an integer in its
// range, one of its words, a valid table name).
//
// Input: lines "key=value" (the value up to the line's end; bytes after a
// NUL are what a C caller could not pass and are cut by the C string),
// applied in turn to one config.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dlock/dlock.h"
#include "fuzz_check.h"
#include "options.h"

namespace {

using dlock_fuzz::Show;

// The table's word for an accepted value: what must have been true.
void CheckAccepted(const dlock::OptionInfo& o, const std::string& v) {
  switch (o.rule) {
    case dlock::OptionRule::kInt: {
      FUZZ_CHECK(!v.empty(), "empty integer accepted for %s", o.name);
      errno = 0;
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      FUZZ_CHECK(errno == 0 && *end == '\0' && n >= o.min && n <= o.max,
                 "%s accepted %s, outside %lld..%lld", o.name, Show(v).c_str(),
                 static_cast<long long>(o.min), static_cast<long long>(o.max));
      break;
    }
    case dlock::OptionRule::kBool:
      FUZZ_CHECK(v == "0" || v == "1" || v == "true" || v == "false" || v == "on" || v == "off" ||
                     v == "yes" || v == "no",
                 "%s accepted %s as a boolean", o.name, Show(v).c_str());
      break;
    case dlock::OptionRule::kWords: {
      bool found = false;
      for (size_t i = 0; o.words[i] != nullptr; ++i) found = found || v == o.words[i];
      FUZZ_CHECK(found, "%s accepted %s, not one of its words", o.name, Show(v).c_str());
      break;
    }
    case dlock::OptionRule::kTable:
      FUZZ_CHECK(dlock::ValidateIdentifier(v, o.name).ok(), "%s accepted %s", o.name,
                 Show(v).c_str());
      break;
    case dlock::OptionRule::kKeyPrefix:
      FUZZ_CHECK(!v.empty() && v.size() <= static_cast<size_t>(o.max), "%s accepted %s", o.name,
                 Show(v).c_str());
      break;
    case dlock::OptionRule::kText:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  const std::string in(reinterpret_cast<const char*>(data), size);
  dlock_config* cfg = nullptr;
  dlock_error err;
  FUZZ_CHECK(dlock_config_new(&cfg, &err) == DLOCK_OK && cfg != nullptr, "config_new");
  size_t pos = 0;
  while (pos < in.size()) {
    size_t nl = in.find('\n', pos);
    if (nl == std::string::npos) nl = in.size();
    const std::string line = in.substr(pos, nl - pos);
    pos = nl + 1;
    size_t eq = line.find('=');
    const std::string key_arg = line.substr(0, eq);
    const std::string value_arg = eq == std::string::npos ? "" : line.substr(eq + 1);
    // What a C caller passes: the strings up to their first NUL.
    const std::string key = key_arg.c_str(), value = value_arg.c_str();

    std::memset(&err, 0x5a, sizeof err);
    int rc = dlock_config_set(cfg, key_arg.c_str(), value_arg.c_str(), &err);
    FUZZ_CHECK(rc == DLOCK_OK || rc == DLOCK_E_INVALID, "rc %d for %s=%s", rc, Show(key).c_str(),
               Show(value).c_str());
    FUZZ_CHECK(err.code == rc, "err.code %d, rc %d", err.code, rc);
    FUZZ_CHECK(std::memchr(err.message, '\0', sizeof err.message) != nullptr,
               "message not NUL-terminated");
    const std::string msg = err.message;
    FUZZ_CHECK(dlock_fuzz::OneLine(msg), "message not one line: %s", Show(msg).c_str());
    const dlock::OptionInfo* o = dlock::FindOption(key);
    if (rc == DLOCK_OK) {
      FUZZ_CHECK(msg.empty(), "OK with a message: %s", Show(msg).c_str());
      FUZZ_CHECK(o != nullptr, "unknown key %s accepted", Show(key).c_str());
      CheckAccepted(*o, value);
    } else {
      FUZZ_CHECK(!msg.empty(), "an error without a message for %s=%s", Show(key).c_str(),
                 Show(value).c_str());
      // The message says which key (unknown keys are quoted, escaped).
      if (o != nullptr)
        FUZZ_CHECK(msg.find(o->name) != std::string::npos, "message %s does not name %s",
                   Show(msg).c_str(), o->name);
    }
  }
  dlock_config_free(cfg);
  return 0;
}
