#include "duration.h"

#include <cstdio>

namespace dlock_cli {

namespace {

struct Unit {
  const char* name;
  int64_t ms;
};
// Longest names first, so that "ms" and "min" are not read as "m".
constexpr Unit kUnits[] = {{"ms", 1}, {"min", 60000}, {"s", 1000}, {"m", 60000},
                           {"h", 3600000}, {"d", 86400000}};

}  // namespace

bool ParseDuration(const std::string& text, int64_t* ms, std::string* err) {
  auto fail = [&](const char* why) {
    *err = "bad duration '" + text.substr(0, 40) + "': " + why +
           " (use seconds such as 30, 0.5 or .5, or units largest first: 500ms, 30s, 1m30s, "
           "2h, 1d)";
    return false;
  };
  if (text.empty()) return fail("empty");
  size_t i = 0;
  double total = 0;
  int64_t last_unit = 0;  // ms of the previous part's unit; 0 before the first
  while (i < text.size()) {
    // A number: digits, or digits and a fraction, or a bare fraction (.5).
    // No sign, exponent, inf or nan.
    double whole = 0, frac = 0, scale = 0.1;
    size_t digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (whole > 1e13) return fail("too large");
      whole = whole * 10 + (text[i] - '0');
      ++i;
      ++digits;
    }
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
      digits += fdigits;
    }
    if (digits == 0) return fail("not a number");
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (text.compare(i, std::char_traits<char>::length(u.name), u.name) == 0) {
        unit = &u;
        break;
      }
    }
    if (unit == nullptr) {
      if (i == text.size() && last_unit == 0) {  // a plain number: seconds
        total = (whole + frac) * 1000;
        break;
      }
      return fail(i == text.size() ? "a unit is needed after each number" : "unknown unit");
    }
    i += std::char_traits<char>::length(unit->name);
    if (last_unit != 0 && unit->ms >= last_unit) return fail("units must go from largest to smallest");
    last_unit = unit->ms;
    total += (whole + frac) * static_cast<double>(unit->ms);
  }
  if (total > static_cast<double>(kMaxDurationMs)) return fail("longer than 30 days");
  *ms = static_cast<int64_t>(total + 0.5);
  return true;
}

namespace {

std::string FormatMagnitude(uint64_t ms) {
  char buf[64];
  if (ms < 1000) std::snprintf(buf, sizeof buf, "%llums", static_cast<unsigned long long>(ms));
  else if (ms < 60000) std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000);
  else if (ms < 3600000)
    std::snprintf(buf, sizeof buf, "%llum%02llus", static_cast<unsigned long long>(ms / 60000),
                  static_cast<unsigned long long>(ms % 60000 / 1000));
  else
    std::snprintf(buf, sizeof buf, "%lluh%02llum", static_cast<unsigned long long>(ms / 3600000),
                  static_cast<unsigned long long>(ms % 3600000 / 60000));
  return buf;
}

}  // namespace

std::string FormatDuration(int64_t ms) {
  // -INT64_MIN overflows: negate as unsigned.
  if (ms < 0) return "-" + FormatMagnitude(0 - static_cast<uint64_t>(ms));
  return FormatMagnitude(static_cast<uint64_t>(ms));
}

}  // namespace dlock_cli
