// Durations on the command line: plain seconds ("30", "0.5", ".5") or
// numbers with units, largest first ("500ms", "30s", "1m30s", "2h", "1d").
#ifndef DLOCK_CLI_DURATION_H_
#define DLOCK_CLI_DURATION_H_

#include <cstdint>
#include <string>

namespace dlock_cli {

// Longest duration accepted anywhere (as the core's longest ttl): 30 days.
constexpr int64_t kMaxDurationMs = 30LL * 24 * 3600 * 1000;

// Parses text into whole milliseconds (rounded to nearest). On failure
// returns false and sets *err to a message naming the bad text.
bool ParseDuration(const std::string& text, int64_t* ms, std::string* err);

// "1.5s", "250ms", "2m03s" style, for messages.
std::string FormatDuration(int64_t ms);

}  // namespace dlock_cli

#endif  // DLOCK_CLI_DURATION_H_
