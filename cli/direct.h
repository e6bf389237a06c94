// A connection of the CLI's own to the lock tables (list, release --force,
// doctor): the core's URL rules and connection setup, statements prepared.
#ifndef DLOCK_CLI_DIRECT_H_
#define DLOCK_CLI_DIRECT_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "conn.h"
#include "options.h"

namespace dlock_cli {

inline std::string Q(const std::string& ident) { return "`" + ident + "`"; }

inline int64_t ToInt(const std::optional<std::string>& v) {
  return v ? std::strtoll(v->c_str(), nullptr, 10) : 0;
}

inline dlock::Status Connect(const std::string& url, dlock::ClientOptions* opts,
                             std::unique_ptr<dlock::Conn>* conn) {
  dlock::Status s = dlock::ParseUrl(url, opts);
  if (!s.ok()) return s;
  return dlock::Conn::Connect(*opts, conn);
}

}  // namespace dlock_cli

#endif  // DLOCK_CLI_DIRECT_H_
