#include "duration.h"

#include <cstdio>

namespace dlock_cli {

bool ParseDuration(const std::string& text, int64_t* ms, std::string* err) {
  auto fail = [&](const char* why) {
    *err = "bad duration '" + text.substr(0, 40) + "': " + why +
           " (use seconds such as 30 or 0.5, or a unit: 500ms, 30s, 5m, 1h)";
    return false;
  };
  size_t i = 0;
  // Whole part and optional fraction, digits only: no sign, exponent, inf/nan.
  uint64_t whole = 0;
  size_t digits = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (whole > 1000000000000ULL) return fail("too large");
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i;
    ++digits;
  }
  double frac = 0, scale = 0.1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    size_t fdigits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      frac += scale * (text[i] - '0');
      scale /= 10;
      ++i;
      ++fdigits;
    }
    if (fdigits == 0) return fail("no digits after '.'");
  }
  if (digits == 0) return fail("not a number");
  const std::string unit = text.substr(i);
  double mult;
  if (unit.empty() || unit == "s") mult = 1000;
  else if (unit == "ms") mult = 1;
  else if (unit == "m" || unit == "min") mult = 60000;
  else if (unit == "h") mult = 3600000;
  else return fail("unknown unit");
  double v = (static_cast<double>(whole) + frac) * mult;
  if (v > static_cast<double>(kMaxDurationMs)) return fail("longer than 30 days");
  *ms = static_cast<int64_t>(v + 0.5);
  return true;
}

std::string FormatDuration(int64_t ms) {
  char buf[64];
  if (ms < 0) return "-" + FormatDuration(-ms);
  if (ms < 1000) std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  else if (ms < 60000) std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000);
  else if (ms < 3600000)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60000),
                  static_cast<long long>(ms % 60000 / 1000));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3600000),
                  static_cast<long long>(ms % 3600000 / 60000));
  return buf;
}

}  // namespace dlock_cli
