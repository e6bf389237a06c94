#include "txn_enders.h"

#include <cctype>

namespace dlock {

const char* TxnEndingStatement(const std::string& sql) {
  size_t i = 0, n = sql.size();
  for (;;) {
    while (i < n && (std::isspace(static_cast<unsigned char>(sql[i])) || sql[i] == '(')) ++i;
    if (i + 1 < n && sql[i] == '/' && sql[i + 1] == '*' && !(i + 2 < n && (sql[i + 2] == '!' || sql[i + 2] == 'M'))) {
      size_t e = sql.find("*/", i + 2);
      if (e == std::string::npos) return nullptr;
      i = e + 2;
    } else if (i < n && (sql[i] == '#' || (i + 2 < n && sql[i] == '-' && sql[i + 1] == '-' &&
                                           std::isspace(static_cast<unsigned char>(sql[i + 2]))))) {
      size_t e = sql.find('\n', i);
      if (e == std::string::npos) return nullptr;
      i = e + 1;
    } else {
      break;
    }
  }
  auto word = [&](size_t* at) {
    while (*at < n && std::isspace(static_cast<unsigned char>(sql[*at]))) ++*at;
    std::string w;
    while (*at < n && (std::isalnum(static_cast<unsigned char>(sql[*at])) || sql[*at] == '_' ||
                       sql[*at] == '@' || sql[*at] == '.'))
      w += static_cast<char>(std::toupper(static_cast<unsigned char>(sql[(*at)++])));
    return w;
  };
  size_t at = i;
  const std::string w = word(&at);
  static const char* const kEnding[] = {
      "COMMIT", "ROLLBACK", "BEGIN",  "START",  "XA",      "LOCK",     "UNLOCK",  "CREATE",
      "ALTER",  "DROP",     "RENAME", "TRUNCATE", "GRANT", "REVOKE",   "ANALYZE", "OPTIMIZE",
      "REPAIR", "FLUSH",    "INSTALL", "UNINSTALL", "SHUTDOWN", "RESET", "PURGE", "CHANGE"};
  for (const char* k : kEnding) {
    if (w != k) continue;
    size_t at2 = at;
    const std::string next = word(&at2);
    if (w == "ROLLBACK" && (next == "TO" || (next == "WORK" && word(&at2) == "TO")))
      return nullptr;  // to a savepoint: the transaction goes on
    if ((w == "CREATE" || w == "DROP") && next == "TEMPORARY") return nullptr;
    return k;
  }
  if (w == "SET") {
    size_t at2 = at;
    std::string next = word(&at2);
    if (next == "SESSION" || next == "LOCAL") next = word(&at2);
    if (next == "AUTOCOMMIT" || next == "@@AUTOCOMMIT" || next == "@@SESSION.AUTOCOMMIT" ||
        next == "@@LOCAL.AUTOCOMMIT")
      return "SET autocommit";
  }
  return nullptr;
}

}  // namespace dlock
