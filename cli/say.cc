#include "say.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>

namespace dlock_cli {

namespace {

std::vector<std::string>& Secrets() {
  static std::vector<std::string> s;
  return s;
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void Add(const std::string& secret) {
  // Shorter strings would also blank ordinary words; three bytes of a
  // password leak little.
  if (secret.size() < 3) return;
  Secrets().push_back(secret);
  std::string decoded;
  for (size_t i = 0; i < secret.size(); ++i) {
    if (secret[i] == '%' && i + 2 < secret.size() && Hex(secret[i + 1]) >= 0 && Hex(secret[i + 2]) >= 0) {
      decoded.push_back(static_cast<char>(Hex(secret[i + 1]) * 16 + Hex(secret[i + 2])));
      i += 2;
    } else {
      decoded.push_back(secret[i]);
    }
  }
  if (decoded != secret && decoded.size() >= 3) Secrets().push_back(decoded);
}

}  // namespace

void NoteSecrets(const std::string& url) {
  if (const char* env = std::getenv("DLOCK_PASSWORD")) Add(env);
  size_t start = url.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  const size_t colon = url.find(':', start);
  // Well-formed: user:password@host, the '@' the last one before the path.
  const size_t slash = url.find('/', start);
  const std::string authority = url.substr(start, slash == std::string::npos ? slash : slash - start);
  const size_t at = authority.rfind('@');
  if (at != std::string::npos) {
    const size_t c = authority.find(':');
    if (c < at) Add(authority.substr(c + 1, at - c - 1));
  }
  // A '/', '?' or '#' in the password ends the authority early: then the
  // password runs from the first ':' to the last '@' of the whole URL.
  const size_t last_at = url.rfind('@');
  if (colon != std::string::npos && last_at != std::string::npos && last_at > colon)
    Add(url.substr(colon + 1, last_at - colon - 1));
  // No '@' at all ("user:password127.0.0.1:3306"): the parser would read a
  // host with the password in it; blank what lies between the first and the
  // last ':' of the authority.
  if (at == std::string::npos && authority.find('[') == std::string::npos) {
    const size_t first = authority.find(':'), last = authority.rfind(':');
    if (first != std::string::npos && last > first) Add(authority.substr(first + 1, last - first - 1));
  }
  // A JDBC URL's password=... (any case), as written and with '+' a space.
  std::string lower = url;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (size_t p = lower.find("password="); p != std::string::npos; p = lower.find("password=", p + 1)) {
    const size_t from = p + std::strlen("password="), end = url.find('&', from);
    std::string value = url.substr(from, end == std::string::npos ? end : end - from);
    Add(value);
    for (char& ch : value) if (ch == '+') ch = ' ';
    Add(value);
  }
}

std::string Scrub(const std::string& text) {
  std::string out = text;
  for (const std::string& s : Secrets()) {
    for (size_t pos = out.find(s); pos != std::string::npos; pos = out.find(s, pos + 3))
      out.replace(pos, s.size(), "***");
  }
  return out;
}

void Say(const std::string& msg) {
  std::string line = "dlock: " + Scrub(msg) + "\n";
  std::fputs(line.c_str(), stderr);
}

int Fail(int code, const std::string& msg) {
  Say(msg);
  return code;
}

}  // namespace dlock_cli
