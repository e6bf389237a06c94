// What every fuzz target shares: a check that stops the run with the input
// described (libFuzzer then saves the input as a crash artifact), and the
// property every message must have.
#ifndef DLOCK_FUZZ_CHECK_H_
#define DLOCK_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fputc('\n', stderr);                                                \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

namespace dlock_fuzz {

// A message is one printable line: input bytes reach it escaped.
inline bool OneLine(const std::string& m) {
  for (unsigned char c : m)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

// Input bytes for a failure report, C-escaped.
inline std::string Show(const std::string& s) {
  std::string out;
  char buf[8];
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out.push_back(static_cast<char>(c));
    } else {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return "\"" + out + "\"";
}

}  // namespace dlock_fuzz

#endif  // DLOCK_FUZZ_CHECK_H_
