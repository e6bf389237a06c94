// The dlock command's duration parser (cli/duration.cc, ParseDuration):
// never crashes or overflows; an accepted duration lies in 0..30 days and
// reads back the same when written in milliseconds; a refused one has a
// message.
#include <cstdint>
#include <string>

#include "duration.h"
#include "fuzz_check.h"

using dlock_fuzz::Show;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The extremes once: -INT64_MIN does not fit an int64_t (UBSan caught the
  // old FormatDuration negating it).
  static const bool extremes_ok = [] {
    FUZZ_CHECK(dlock_cli::FormatDuration(INT64_MIN) == "-2562047788015h12m", "INT64_MIN gave %s",
               dlock_cli::FormatDuration(INT64_MIN).c_str());
    FUZZ_CHECK(dlock_cli::FormatDuration(INT64_MAX) == "2562047788015h12m", "INT64_MAX gave %s",
               dlock_cli::FormatDuration(INT64_MAX).c_str());
    FUZZ_CHECK(dlock_cli::FormatDuration(-1500) == "-1.5s", "-1500 gave %s",
               dlock_cli::FormatDuration(-1500).c_str());
    return true;
  }();
  (void)extremes_ok;
  if (size > 256) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  int64_t ms = -1;
  std::string err;
  if (!dlock_cli::ParseDuration(text, &ms, &err)) {
    FUZZ_CHECK(!err.empty(), "refused %s without a message", Show(text).c_str());
    return 0;
  }
  FUZZ_CHECK(ms >= 0 && ms <= dlock_cli::kMaxDurationMs, "%s gave %lld ms", Show(text).c_str(),
             static_cast<long long>(ms));
  int64_t again = -1;
  std::string err2;
  const std::string as_ms = std::to_string(ms) + "ms";
  FUZZ_CHECK(dlock_cli::ParseDuration(as_ms, &again, &err2) && again == ms,
             "%s gave %lld ms, but %s reads as %lld (%s)", Show(text).c_str(),
             static_cast<long long>(ms), as_ms.c_str(), static_cast<long long>(again), err2.c_str());
  FUZZ_CHECK(!dlock_cli::FormatDuration(ms).empty(), "FormatDuration(%lld) is empty",
             static_cast<long long>(ms));
  return 0;
}
