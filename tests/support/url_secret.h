// Does a password written into a URL reach a message? For the core's tests
// and fuzz targets (they include core/src: ParseUrl is internal).
//
// UrlSecretLeak(url, secret) parses url as Client::Open does. Refused, the
// error message must hold no piece of the secret; accepted, the secret may
// sit in the password only: the parts that messages show (Where(): host,
// port, socket, database; the user name, which the server quotes back in
// "Access denied for user ..."; every text option) must hold no piece of it.
// A piece is any `window` bytes of the secret in a row (the whole secret if
// shorter), so that a secret cut in two by a typo is caught too.
// Returns "" when nothing leaks, else what leaked and where.
#ifndef DLOCK_TEST_URL_SECRET_H_
#define DLOCK_TEST_URL_SECRET_H_

#include <algorithm>
#include <string>

#include "options.h"

namespace dtest {

// The first piece of secret (window bytes long) found in text, or "".
inline std::string SecretPieceIn(const std::string& text, const std::string& secret,
                                 size_t window = 5) {
  const size_t w = std::min(window, secret.size());
  if (w == 0) return "";
  for (size_t i = 0; i + w <= secret.size(); ++i) {
    std::string piece = secret.substr(i, w);
    if (text.find(piece) != std::string::npos) return piece;
  }
  return "";
}

inline std::string UrlSecretLeak(const std::string& url, const std::string& secret,
                                 size_t window = 5) {
  dlock::ClientOptions o;
  dlock::Status s = dlock::ParseUrl(url, &o);
  if (!s.ok()) {
    std::string piece = SecretPieceIn(s.message(), secret, window);
    return piece.empty() ? "" : "'" + piece + "' in the error: " + s.message();
  }
  const std::pair<const char*, std::string> shown[] = {
      {"user", o.user},     {"host", o.host},           {"socket", o.socket},
      {"database", o.database}, {"ssl_ca", o.ssl_ca},   {"table", o.table},
      {"row_table", o.row_table}, {"where", o.Where()},
  };
  for (const auto& part : shown) {
    std::string piece = SecretPieceIn(part.second, secret, window);
    if (!piece.empty()) return "'" + piece + "' in the accepted URL's " + part.first + ": " + part.second;
  }
  return "";
}

}  // namespace dtest

#endif  // DLOCK_TEST_URL_SECRET_H_
