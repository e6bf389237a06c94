#include "options.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace dlock {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Status PercentDecode(const std::string& in, const char* what, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) {
      return Status::Invalid(std::string("URL: truncated %-escape in ") + what);
    }
    int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return Status::Invalid(std::string("URL: bad %-escape in ") + what);
    char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return Status::Invalid(std::string("URL: %00 in ") + what);
    out->push_back(c);
    i += 2;
  }
  return Status::OK();
}

Status ParseBool(const std::string& v, const char* what, bool* out) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") *out = true;
  else if (v == "0" || v == "false" || v == "off" || v == "no") *out = false;
  else return Status::Invalid(std::string(what) + " must be 0/1 (or true/false), not '" + QuoteKey(v) + "'");
  return Status::OK();
}

}  // namespace

std::string ClientOptions::Where() const {
  // Parts of the URL: quoted, so that a control byte in them cannot reach
  // a message raw.
  std::string w = socket.empty() ? QuoteKey(host) + ":" + std::to_string(port) : QuoteKey(socket);
  return w + "/" + QuoteKey(database);
}

bool IsClientKey(const std::string& key) {
  const OptionInfo* o = FindOption(key);
  return o != nullptr && o->kind == OptionKind::kClient;
}

bool IsLockKey(const std::string& key) {
  const OptionInfo* o = FindOption(key);
  return o != nullptr && o->kind == OptionKind::kLock;
}

Status ParseInt(const std::string& s, int64_t lo, int64_t hi, const char* what, int64_t* out) {
  const std::string range = " (allowed " + std::to_string(lo) + ".." + std::to_string(hi) + ")";
  if (s.empty() || s.size() > 20) return Status::Invalid(std::string(what) + ": not an integer" + range);
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return Status::Invalid(std::string(what) + ": not an integer" + range);
  for (size_t j = i; j < s.size(); ++j)
    if (s[j] < '0' || s[j] > '9')
      return Status::Invalid(std::string(what) + ": not an integer: '" + QuoteKey(s) + "'" + range);
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE || v < lo || v > hi)
    return Status::Invalid(std::string(what) + " out of range: " + QuoteKey(s) + range);
  *out = v;
  return Status::OK();
}

Status ValidateIdentifier(const std::string& name, const char* what) {
  bool ok = !name.empty() && name.size() <= 58 &&
            !(name[0] >= '0' && name[0] <= '9');
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      ok = false;
  }
  if (!ok)
    return Status::Invalid(std::string(what) + ": '" + QuoteKey(name) +
                           "' is not a valid table name (letters, digits and _, not starting "
                           "with a digit, 1..58 bytes)");
  return Status::OK();
}

namespace {

// Control bytes (and, for quoted values, the quote and the backslash) as
// \xNN, so that no input can break a message's line or its quoting.
std::string Escape(const std::string& in, bool quotes, size_t max) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < in.size() && out.size() < max; ++i) {
    unsigned char c = static_cast<unsigned char>(in[i]);
    if (c < 0x20 || c == 0x7f || (quotes && (c == '\\' || c == '\''))) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (out.size() >= max) out += "...";
  return out;
}

}  // namespace

std::string QuoteKey(const std::string& key) { return Escape(key, true, 80); }

std::string PrintableText(const std::string& text) { return Escape(text, false, 4096); }

Status ValidateKey(const std::string& key) {
  if (key.empty()) return Status::Invalid("key is empty");
  if (key.size() > kMaxKeyBytes)
    return Status::Invalid("key is " + std::to_string(key.size()) + " bytes; the maximum is " +
                           std::to_string(kMaxKeyBytes) + " (keys are never truncated)");
  if (std::memchr(key.data(), '\0', key.size()) != nullptr)
    return Status::Invalid("key contains a NUL byte: '" + QuoteKey(key) + "'");
  return Status::OK();
}

// ---- the option table, expanded ----------------------------------------------

namespace {

constexpr OptionInfo kOptions[] = {
#define DLOCK_CLIENT_INFO(name, field, type, rule, min, max, words, def, doc) \
  {#name, OptionKind::kClient, OptionRule::k##rule, min, max, words, doc},
#define DLOCK_LOCK_INFO(name, field, type, rule, min, max, words, def, doc) \
  {#name, OptionKind::kLock, OptionRule::k##rule, min, max, words, doc},
    DLOCK_CLIENT_OPTIONS(DLOCK_CLIENT_INFO) DLOCK_LOCK_OPTIONS(DLOCK_LOCK_INFO)
#undef DLOCK_CLIENT_INFO
#undef DLOCK_LOCK_INFO
};

// What the compiler can check of a row: its rule reads its type, an integer
// range fits the member and holds the default, an enum has its words.
template <class T, class D>
constexpr bool RowFits(OptionRule rule, int64_t min, int64_t max, const char* const* words,
                       D def) {
  if constexpr (std::is_same_v<T, bool>) {
    return rule == OptionRule::kBool;
  } else if constexpr (std::is_integral_v<T>) {
    return rule == OptionRule::kInt && min <= max && min >= std::numeric_limits<T>::min() &&
           max <= std::numeric_limits<T>::max() && def >= min && def <= max;
  } else if constexpr (std::is_enum_v<T>) {
    return rule == OptionRule::kWords && words != nullptr &&
           static_cast<int>(def) >= 0 && words[static_cast<int>(def)] != nullptr;
  } else {
    return rule == OptionRule::kTable || rule == OptionRule::kText ||
           rule == OptionRule::kKeyPrefix;
  }
}
#define DLOCK_CHECK_ROW(name, field, type, rule, min, max, words, def, doc) \
  static_assert(RowFits<type>(OptionRule::k##rule, min, max, words, def),  \
                "option " #name ": its row does not fit its member");
DLOCK_CLIENT_OPTIONS(DLOCK_CHECK_ROW)
DLOCK_LOCK_OPTIONS(DLOCK_CHECK_ROW)
#undef DLOCK_CHECK_ROW

// "'a', 'b' or 'c'"
std::string WordList(const char* const* words) {
  std::string out;
  for (size_t i = 0; words[i] != nullptr; ++i) {
    if (i > 0) out += words[i + 1] == nullptr ? " or " : ", ";
    out += std::string("'") + words[i] + "'";
  }
  return out;
}

// Reads value into a member by its row's rule; the member is untouched on error.
Status Read(const OptionInfo& o, const std::string& value, int64_t* out) {
  return ParseInt(value, o.min, o.max, o.name, out);
}

Status Read(const OptionInfo& o, const std::string& value, int* out) {
  int64_t v = 0;
  Status s = ParseInt(value, o.min, o.max, o.name, &v);
  if (s.ok()) *out = static_cast<int>(v);
  return s;
}

Status Read(const OptionInfo& o, const std::string& value, bool* out) {
  return ParseBool(value, o.name, out);
}

Status Read(const OptionInfo& o, const std::string& value, std::string* out) {
  Status s;
  if (o.rule == OptionRule::kTable) {
    s = ValidateIdentifier(value, o.name);
  } else if (o.rule == OptionRule::kKeyPrefix) {
    if (!(s = ValidateKey(value)).ok())
      return Status::Invalid(std::string(o.name) + ": " + s.message());
    if (value.size() > static_cast<size_t>(o.max))
      return Status::Invalid(std::string(o.name) + " is longer than " + std::to_string(o.max) +
                             " bytes");
  }
  if (s.ok()) *out = value;
  return s;
}

template <class E, class = std::enable_if_t<std::is_enum_v<E>>>
Status Read(const OptionInfo& o, const std::string& value, E* out) {
  for (int i = 0; o.words[i] != nullptr; ++i) {
    if (value == o.words[i]) {
      *out = static_cast<E>(i);
      return Status::OK();
    }
  }
  return Status::Invalid(std::string(o.name) + " must be " + WordList(o.words) + ", not '" +
                         QuoteKey(value) + "'");
}

// A member's value as dlock_config_set would take it.
std::string Format(const OptionInfo&, int64_t v) { return std::to_string(v); }
std::string Format(const OptionInfo&, int v) { return std::to_string(v); }
std::string Format(const OptionInfo&, bool v) { return v ? "1" : "0"; }
std::string Format(const OptionInfo&, const std::string& v) { return v; }
template <class E, class = std::enable_if_t<std::is_enum_v<E>>>
std::string Format(const OptionInfo& o, E v) {
  return o.words[static_cast<int>(v)];
}

}  // namespace

const OptionInfo* Options(size_t* count) {
  *count = sizeof kOptions / sizeof kOptions[0];
  return kOptions;
}

const OptionInfo* FindOption(const std::string& name) {
  for (const OptionInfo& o : kOptions)
    if (name == o.name) return &o;
  return nullptr;
}

std::string OptionDefault(const OptionInfo& option) {
  const std::string name = option.name;
  const ClientOptions client;
  const LockOptions lock;
#define DLOCK_CLIENT_DEFAULT(key, field, ...) \
  if (option.kind == OptionKind::kClient && name == #key) return Format(option, client.field);
#define DLOCK_LOCK_DEFAULT(key, field, ...) \
  if (option.kind == OptionKind::kLock && name == #key) return Format(option, lock.field);
  DLOCK_CLIENT_OPTIONS(DLOCK_CLIENT_DEFAULT)
  DLOCK_LOCK_OPTIONS(DLOCK_LOCK_DEFAULT)
#undef DLOCK_CLIENT_DEFAULT
#undef DLOCK_LOCK_DEFAULT
  return "";
}

const OptionInfo* FirstDifference(const LockOptions& a, const LockOptions& b, std::string* va,
                                  std::string* vb) {
#define DLOCK_LOCK_DIFFERS(key, field, ...)              \
  if (a.field != b.field) {                              \
    const OptionInfo* option = FindOption(#key);         \
    *va = Format(*option, a.field);                      \
    *vb = Format(*option, b.field);                      \
    return option;                                       \
  }
  DLOCK_LOCK_OPTIONS(DLOCK_LOCK_DIFFERS)
#undef DLOCK_LOCK_DIFFERS
  return nullptr;
}

Status ApplyClientOption(const std::string& key, const std::string& value, ClientOptions* o) {
  const OptionInfo* option = FindOption(key);
  if (option == nullptr || option->kind != OptionKind::kClient)
    return Status::Invalid("unknown client option '" + QuoteKey(key) + "'");
#define DLOCK_APPLY(name, field, ...) \
  if (key == #name) return Read(*option, value, &o->field);
  DLOCK_CLIENT_OPTIONS(DLOCK_APPLY)
#undef DLOCK_APPLY
  return Status::Internal("client option '" + QuoteKey(key) + "' has no member");
}

Status ApplyLockOption(const std::string& key, const std::string& value, LockOptions* o) {
  const OptionInfo* option = FindOption(key);
  if (option == nullptr || option->kind != OptionKind::kLock)
    return Status::Invalid("unknown lock option '" + QuoteKey(key) + "'");
#define DLOCK_APPLY(name, field, ...) \
  if (key == #name) return Read(*option, value, &o->field);
  DLOCK_LOCK_OPTIONS(DLOCK_APPLY)
#undef DLOCK_APPLY
  return Status::Internal("lock option '" + QuoteKey(key) + "' has no member");
}

Status Config::Set(const std::string& key, const std::string& value) {
  Status s;
  if (IsClientKey(key)) {
    ClientOptions scratch;
    s = ApplyClientOption(key, value, &scratch);
  } else if (IsLockKey(key)) {
    LockOptions scratch;
    s = ApplyLockOption(key, value, &scratch);
  } else {
    s = Status::Invalid("unknown option '" + QuoteKey(key) + "'");
  }
  if (s.ok()) values_[key] = value;
  return s;
}

namespace {

// A '/', '?' or '#' left unencoded in the user name or password ends the
// authority early, and what follows looks like a database or options. When
// the URL's shape breaks, and an '@' comes after the first such character
// with none before it, that is the likely cause: say so (without echoing the
// password). rest: the URL after its scheme.
Status ShapeError(const std::string& rest, const std::string& msg) {
  size_t first = rest.find_first_of("/?#");
  size_t at = rest.rfind('@');
  if (first != std::string::npos && at != std::string::npos && at > first &&
      rest.find('@') > first) {
    bool password = rest.substr(0, first).find(':') != std::string::npos;
    return Status::Invalid(std::string("URL: the ") + (password ? "password" : "user name") +
                           " seems to contain '/', '?' or '#': percent-encode it "
                           "(%2F, %3F, %23)");
  }
  return Status::Invalid(msg);
}

// The port is not echoed: with the '@' missing, it would be the password.
constexpr const char* kBadPort = "URL: the port (after the host's ':') must be an integer 1..65535";

Status ParsePort(const std::string& text, const std::string& rest, unsigned* port) {
  int64_t p = 0;
  if (!ParseInt(text, 1, 65535, "port", &p).ok()) return ShapeError(rest, kBadPort);
  *port = static_cast<unsigned>(p);
  return Status::OK();
}

// Connector/C's word for "the default unix socket, the port ignored"
// (compared without regard to case, as host names are).
bool IsLocalhost(const std::string& host) {
  return host.size() == 9 && strncasecmp(host.c_str(), "localhost", 9) == 0;
}

// host[:port], host as a name, an address or [v6]; port stays as it is
// when none is given (*port_given says which, when not null).
Status ParseHostPort(const std::string& hostport, const std::string& rest, std::string* host,
                     unsigned* port, bool* port_given = nullptr) {
  Status s;
  if (port_given != nullptr) *port_given = false;
  if (!hostport.empty() && hostport[0] == '[') {  // [v6]:port
    size_t close = hostport.find(']');
    if (close == std::string::npos) return Status::Invalid("URL: unclosed '[' in host");
    *host = hostport.substr(1, close - 1);
    if (host->empty()) return Status::Invalid("URL: empty host '[]'");
    std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Status::Invalid("URL: junk after ']' in host");
      if (!(s = ParsePort(after.substr(1), rest, port)).ok()) return s;
      if (port_given != nullptr) *port_given = true;
    }
  } else {
    size_t colon = hostport.rfind(':');
    // user:pw127.0.0.1:3306 (the '@' forgotten) or user:pw:3306 (the host
    // forgotten): the "host" would be user:pw, shown in every connect error.
    if (colon != std::string::npos && hostport.find(':') != colon)
      return Status::Invalid("URL: the host contains ':' (is the '@' after user:password "
                             "missing? mysql://user:password@host:port/db; an IPv6 address goes "
                             "in brackets: [::1]:3306)");
    if (!(s = PercentDecode(hostport.substr(0, colon), "host", host)).ok()) return s;
    if (colon != std::string::npos) {
      if (!(s = ParsePort(hostport.substr(colon + 1), rest, port)).ok()) return s;
      if (port_given != nullptr) *port_given = true;
    }
  }
  if (host->empty()) *host = "127.0.0.1";
  return Status::OK();
}

constexpr size_t kMaxNodes = 16;

// user[:password]@host[:port][,host[:port]...], host as a name, an address or [v6].
// *port_given: one address whose port is written.
//
// No message here shows any part of the authority: after a typo, any of it
// may be the password. A typo that still parses is refused when it would put
// the password where messages show it (the host, the user name).
Status ParseAuthority(const std::string& authority, const std::string& rest, ClientOptions* o,
                      bool* port_given) {
  *port_given = false;
  Status s;
  size_t at = authority.rfind('@');
  std::string hostport = authority;
  if (at != std::string::npos) {
    std::string userinfo = authority.substr(0, at);
    hostport = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    // user@pw@host: the ':' typed as '@'; the server would quote the whole
    // "user name" back. (The password may hold a raw '@': the last ends it.)
    if (userinfo.substr(0, colon).find('@') != std::string::npos)
      return Status::Invalid("URL: the user name contains '@' (is the ':' before the password "
                             "missing? mysql://user:password@host/db; write an '@' in a user "
                             "name as %40)");
    if (!(s = PercentDecode(userinfo.substr(0, colon), "user", &o->user)).ok()) return s;
    if (colon != std::string::npos) {
      // The password is never echoed, not even in this error.
      if (!(s = PercentDecode(userinfo.substr(colon + 1), "password", &o->password)).ok())
        return Status::Invalid("URL: bad %-escape in the password");
    }
  }
  // h1:p1,h2:p2,...: several nodes (a Galera cluster), each with its own
  // port (3306 when it has none). A ',' cannot be in a host name.
  if (hostport.find(',') == std::string::npos)
    return ParseHostPort(hostport, rest, &o->host, &o->port, port_given);
  size_t pos = 0;
  for (;;) {
    size_t comma = hostport.find(',', pos);
    std::string one = hostport.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (one.empty())
      return Status::Invalid("URL: an empty host in the host list (h1:port,h2:port,...)");
    ClientOptions::Node n;
    if (!(s = ParseHostPort(one, rest, &n.host, &n.port)).ok()) return s;
    // Connector/C takes "localhost" as its unix socket and ignores the port:
    // every node of a list would be the same server. A list names nodes by
    // port, so localhost in it means TCP.
    if (IsLocalhost(n.host)) n.host = "127.0.0.1";
    o->nodes.push_back(std::move(n));
    if (o->nodes.size() > kMaxNodes)
      return Status::Invalid("URL: more than " + std::to_string(kMaxNodes) + " hosts in the host list");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  o->host = o->nodes[0].host;
  o->port = o->nodes[0].port;
  return Status::OK();
}

// Could be the name of an option (lower case, digits, '_'): only such a
// name is shown in a message. Anything else in a name's place may be a
// password typed there (?password:pw, ?pw).
bool LooksLikeOptionName(const std::string& s) {
  if (s.empty() || s.size() > 40) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// ?password=pw, ?Passwd:pw, ?pwd=pw: the password has its own place (no
// option's name starts so).
bool NamesAPassword(const std::string& s) {
  std::string lower;
  for (char c : s.substr(0, 4)) lower.push_back(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return lower.compare(0, 4, "pass") == 0 || lower.compare(0, 2, "pw") == 0;
}

constexpr const char* kPasswordOption =
    "URL: the password is not a URL option: write it before the host "
    "(mysql://user:password@host/db, with '@', ':', '/', '?', '#' and '%' %-encoded) or set "
    "DLOCK_PASSWORD";

// ?k=v&k=v: client options.
Status ApplyQuery(const std::string& query, ClientOptions* o) {
  Status s;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    pos = amp == std::string::npos ? query.size() : amp + 1;
    if (kv.empty()) continue;
    if (NamesAPassword(kv)) return Status::Invalid(kPasswordOption);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) {
      if (IsClientKey(kv)) return Status::Invalid("URL option '" + kv + "' has no value");
      return Status::Invalid("URL: an option after '?' has no '=' (options are name=value, "
                             "joined by '&')");
    }
    std::string k, v;
    if (!(s = PercentDecode(kv.substr(0, eq), "option name", &k)).ok()) return s;
    if (!(s = PercentDecode(kv.substr(eq + 1), "option value", &v)).ok()) return s;
    if (!IsClientKey(k)) {
      if (NamesAPassword(k)) return Status::Invalid(kPasswordOption);
      if (LooksLikeOptionName(k)) return Status::Invalid("unknown URL option '" + k + "'");
      return Status::Invalid("URL: an option name after '?' is not one of dlock's (they are "
                             "lower case: pool, connect_timeout, ssl_mode, ...)");
    }
    if (!(s = ApplyClientOption(k, v, o)).ok()) return s;
  }
  return Status::OK();
}

// mysql://, its scheme taken off (rest); the password from the URL only.
Status ParseMysqlUrl(const std::string& rest, ClientOptions* out) {
  ClientOptions o;
  // mysql:///user:pw@host/db: the authority went into the path, where the
  // database name (shown in messages) would hold the password.
  if (rest.compare(0, 1, "/") == 0 && rest.substr(0, rest.find('?')).find('@') != std::string::npos)
    return Status::Invalid("URL: '@' after the '/' that starts the database name: "
                           "user:password@host comes right after mysql:// "
                           "(mysql://user:password@host/db)");
  if (rest.find('#') != std::string::npos)
    return ShapeError(rest, "URL: '#' is not allowed (a #fragment means nothing here; write a "
                            "'#' in a name or value as %23)");
  // user:12/pw@host or user:12?pw@host: a raw '/' or '?' in a password that
  // starts like a port cut the authority short (the user read as the host,
  // the password's start as the port), and the rest of the password went
  // into the database name and the options, which messages show. The same
  // text is also host:port/db with an '@' in the database or an option
  // value; which one was meant cannot be told, so no '@' before the first
  // '/' or '?', a ':' there and an '@' after it is refused before any part
  // is read or shown, with the cure for both.
  const size_t cut = rest.find_first_of("/?");
  if (cut != std::string::npos && rest.find('@') > cut && rest.find('@', cut) != std::string::npos &&
      rest.substr(0, cut).find(':') != std::string::npos)
    return Status::Invalid(
        "URL: an '@' after the '/' or '?' that follows host:port: if what follows the ':' is "
        "a password holding '/' or '?', percent-encode them (%2F, %3F); an '@' in a database "
        "name or an option value is written %40");
  std::string path = rest, query;
  size_t q = path.find('?');
  if (q != std::string::npos) {
    query = path.substr(q + 1);
    path.resize(q);
  }
  size_t slash = path.find('/');
  if (slash == std::string::npos) return ShapeError(rest, "URL has no /database");
  Status s = PercentDecode(path.substr(slash + 1), "database", &o.database);
  if (!s.ok()) return s;
  if (o.database.empty()) return ShapeError(rest, "URL has an empty database name");
  if (o.database.find('/') != std::string::npos || o.database.find('`') != std::string::npos)
    return ShapeError(rest, "URL database name contains '/' or '`'");
  // A raw ':' in the database: a user:password that ended up in the path
  // (mysql:///user:pw). A real one is written %3A.
  if (path.find(':', slash) != std::string::npos)
    return ShapeError(rest, "URL: the database name contains ':' (is user:password@host "
                            "misplaced? write a ':' in a database name as %3A)");
  bool port_given = false;
  if (!(s = ParseAuthority(path.substr(0, slash), rest, &o, &port_given)).ok()) return s;
  if (!(s = ApplyQuery(query, &o)).ok()) return s;
  if (!o.nodes.empty() && !o.socket.empty())
    return Status::Invalid("URL: socket= names one server; it cannot go with a list of hosts");
  // localhost:PORT is TCP to 127.0.0.1:PORT: Connector/C would take the host
  // localhost as its default unix socket and ignore the written port, and a
  // URL must name one server in every language (the bindings pass it as it
  // is). localhost without a port keeps meaning that socket; socket= wins.
  if (port_given && o.socket.empty() && IsLocalhost(o.host)) o.host = "127.0.0.1";
  *out = std::move(o);
  return Status::OK();
}

}  // namespace


// ---- the application's own settings: go-sql-driver DSNs and JDBC URLs -------
//
// A service already holds its database settings in its driver's form; dlock
// reads two more of them into the same ClientOptions, so that the string can
// be passed as it is:
//   user:password@tcp(host:3306)/db?params    go-sql-driver (Go's database/sql)
//   jdbc:mysql://host:3306/db?user=..&password=..   Connector/J, MariaDB Connector/J
// Each is decoded as its driver decodes it; the parameters that mean what a
// dlock option means set it, the ones that only shape the application's own
// results are ignored, and every other one is refused by name. dlock's own
// client options are read by their names in both (and win over a mapped one).
// No message shows any part of user:password@address, a password, or a
// parameter name that may be one.

namespace {

bool StartsWith(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

std::string Lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// %XX, and '+' as a space: application/x-www-form-urlencoded, as Go's
// url.QueryUnescape and Java's URLDecoder read query values.
Status FormDecode(const std::string& in, const char* what, std::string* out) {
  std::string spaced;
  for (char c : in) {
    if (c == '+') spaced += "%20";
    else spaced.push_back(c);
  }
  return PercentDecode(spaced, what, out);
}

// A driver parameter's name that may be shown: letters (camelCase), '_',
// '.', '-'. Not a digit: passwords have digits, parameter names seldom, and a
// name in a message would be the password typed in the wrong place.
bool ShowableParamName(const std::string& s) {
  if (s.empty() || s.size() > 40) return false;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

// What a driver's parameter becomes.
enum class Take {
  kIgnore,           // shapes only the application's own connection or results
  kGoConnect,        // Go duration -> connect_timeout (whole seconds, rounded up; 0 = default)
  kGoRead,           // Go duration -> read_timeout (idem)
  kGoTls,            // true|false|skip-verify|preferred -> ssl_mode
  kMsConnect,        // milliseconds -> connect_timeout (rounded up; 0 = default)
  kMsRead,           // milliseconds -> read_timeout (idem)
  kSslMode,          // JDBC sslMode -> ssl_mode
  kUseSsl,           // JDBC useSSL (legacy)
  kRequireSsl,       // Connector/J requireSSL (legacy)
  kVerifyCert,       // Connector/J verifyServerCertificate (legacy)
  kTrustCert,        // MariaDB trustServerCertificate (legacy)
  kCaFile,           // MariaDB serverSslCert (a file path) -> ssl_ca
  kSocket,           // MariaDB localSocket -> socket
  kUser,             // JDBC user
  kKeyStore,         // a Java key store: refused, with the cure
};

struct DriverParam {
  const char* name;
  Take take;
};

// go-sql-driver's parameters (its dsn.go), matched exactly, as the driver
// does. Time zones, charsets and result shapes are the application's; dlock's
// sessions are utf8mb4 with binary keys, and it never reconnects silently.
// writeTimeout: dlock's read_timeout also bounds writes, which are small.
constexpr DriverParam kGoParams[] = {
    {"timeout", Take::kGoConnect},
    {"readTimeout", Take::kGoRead},
    {"tls", Take::kGoTls},
    {"writeTimeout", Take::kIgnore},
    {"allowAllFiles", Take::kIgnore},
    {"allowCleartextPasswords", Take::kIgnore},
    {"allowFallbackToPlaintext", Take::kIgnore},
    {"allowNativePasswords", Take::kIgnore},
    {"allowOldPasswords", Take::kIgnore},
    {"charset", Take::kIgnore},
    {"checkConnLiveness", Take::kIgnore},
    {"clientFoundRows", Take::kIgnore},
    {"collation", Take::kIgnore},
    {"columnsWithAlias", Take::kIgnore},
    {"compress", Take::kIgnore},
    {"connectionAttributes", Take::kIgnore},
    {"interpolateParams", Take::kIgnore},
    {"loc", Take::kIgnore},
    {"maxAllowedPacket", Take::kIgnore},
    {"multiStatements", Take::kIgnore},
    {"parseTime", Take::kIgnore},
    {"rejectReadOnly", Take::kIgnore},
    {"serverPubKey", Take::kIgnore},
    {"timeTruncate", Take::kIgnore},
    {"tinyInt1IsBool", Take::kIgnore},
    // Session variables go-sql-driver would SET; dlock's sessions set their own.
    {"time_zone", Take::kIgnore},
    {"sql_mode", Take::kIgnore},
    {"autocommit", Take::kIgnore},
    {"transaction_isolation", Take::kIgnore},
    {"tx_isolation", Take::kIgnore},
};

// Connector/J's and MariaDB Connector/J's, matched without regard to case.
constexpr DriverParam kJdbcParams[] = {
    {"user", Take::kUser},
    {"connectTimeout", Take::kMsConnect},
    {"socketTimeout", Take::kMsRead},
    {"sslMode", Take::kSslMode},
    {"useSSL", Take::kUseSsl},
    {"requireSSL", Take::kRequireSsl},
    {"verifyServerCertificate", Take::kVerifyCert},
    {"trustServerCertificate", Take::kTrustCert},
    {"serverSslCert", Take::kCaFile},
    {"localSocket", Take::kSocket},
    {"trustCertificateKeyStoreUrl", Take::kKeyStore},
    {"trustStore", Take::kKeyStore},
    {"characterEncoding", Take::kIgnore},
    {"characterSetResults", Take::kIgnore},
    {"connectionCollation", Take::kIgnore},
    {"useUnicode", Take::kIgnore},
    {"serverTimezone", Take::kIgnore},
    {"connectionTimeZone", Take::kIgnore},
    {"forceConnectionTimeZoneToSession", Take::kIgnore},
    {"preserveInstants", Take::kIgnore},
    {"useLegacyDatetimeCode", Take::kIgnore},
    {"zeroDateTimeBehavior", Take::kIgnore},
    {"tinyInt1isBit", Take::kIgnore},
    {"transformedBitIsBoolean", Take::kIgnore},
    {"yearIsDateType", Take::kIgnore},
    {"useServerPrepStmts", Take::kIgnore},
    {"cachePrepStmts", Take::kIgnore},
    {"prepStmtCacheSize", Take::kIgnore},
    {"prepStmtCacheSqlLimit", Take::kIgnore},
    {"rewriteBatchedStatements", Take::kIgnore},
    {"allowMultiQueries", Take::kIgnore},
    {"useAffectedRows", Take::kIgnore},
    {"useCompression", Take::kIgnore},
    {"tcpKeepAlive", Take::kIgnore},
    {"autoReconnect", Take::kIgnore},
    {"allowPublicKeyRetrieval", Take::kIgnore},
    {"allowLoadLocalInfile", Take::kIgnore},
    {"sessionVariables", Take::kIgnore},
    {"enabledTLSProtocols", Take::kIgnore},
    {"permitMysqlScheme", Take::kIgnore},
    {"maxPoolSize", Take::kIgnore},
    {"minPoolSize", Take::kIgnore},
    {"poolName", Take::kIgnore},
    {"maxIdleTime", Take::kIgnore},
    {"connectionAttributes", Take::kIgnore},
    {"serverRSAPublicKeyFile", Take::kIgnore},
};

const DriverParam* FindGoParam(const std::string& name) {
  for (const DriverParam& p : kGoParams)
    if (name == p.name) return &p;
  return nullptr;
}

const DriverParam* FindJdbcParam(const std::string& name) {
  const std::string lower = Lower(name);
  for (const DriverParam& p : kJdbcParams)
    if (lower == Lower(p.name)) return &p;
  return nullptr;
}

// Levenshtein distance, ignoring case, cut off above 3.
int Distance(const std::string& a, const std::string& b) {
  if (a.size() > 48 || b.size() > 48) return 99;
  const std::string x = Lower(a), y = Lower(b);
  std::vector<int> row(y.size() + 1);
  for (size_t j = 0; j <= y.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= x.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= y.size(); ++j) {
      const int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (x[i - 1] == y[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[y.size()];
}

// The known name (the driver's or dlock's) within two edits of name, or
// nullptr.
const char* NearName(const std::string& name, bool jdbc) {
  const char* best = nullptr;
  int best_d = 3;
  auto consider = [&](const char* known) {
    const int d = Distance(name, known);
    if (d < best_d) best = known, best_d = d;
  };
  if (jdbc) {
    for (const DriverParam& p : kJdbcParams) consider(p.name);
    consider("password");
  } else {
    for (const DriverParam& p : kGoParams) consider(p.name);
  }
  size_t n = 0;
  const OptionInfo* options = Options(&n);
  for (size_t i = 0; i < n; ++i)
    if (options[i].kind == OptionKind::kClient) consider(options[i].name);
  return best;
}

// Every unknown parameter of one URL, for one message that names them all.
// A name is shown when it cannot be the password typed in the wrong place:
// the URL has its password where it belongs (the name is then no password,
// unless it follows password=, where a raw '&' in the password cuts its tail
// off as a name), or the name is a near miss of a known one. A name with a
// digit or a sign (but '_', '.', '-') is never shown.
class UnknownParams {
 public:
  explicit UnknownParams(bool jdbc) : jdbc_(jdbc) {}
  void Add(const std::string& name, bool after_password) {
    names_.push_back({name, after_password});
  }
  Status Result(bool password_in_place) const {
    if (names_.empty()) return Status::OK();
    std::string shown;
    int hidden = 0;
    for (const auto& n : names_) {
      const char* near = ShowableParamName(n.first) ? NearName(n.first, jdbc_) : nullptr;
      if (ShowableParamName(n.first) && !n.second && (password_in_place || near != nullptr)) {
        shown += std::string(shown.empty() ? "" : ", ") + "'" + n.first + "'";
        if (near != nullptr) shown += std::string(" (") + near + "?)";
      } else {
        ++hidden;
      }
    }
    std::string msg = std::string(jdbc_ ? "JDBC URL" : "DSN") + ": ";
    if (!shown.empty())
      msg += std::string("unknown parameter") + (names_.size() > 1 ? "s " : " ") + shown +
             (hidden > 0 ? " and " + std::to_string(hidden) + " more" : "");
    else
      msg += std::to_string(hidden) + " unknown parameter" + (hidden > 1 ? "s" : "");
    if (hidden > 0)
      msg += ", not shown: a name with a digit or a sign, one after password= or any in a URL "
             "without a password may be the password in the wrong place (a '&' in a password "
             "is written %26)";
    return Status::Invalid(msg + "; dlock.h lists the parameters dlock reads and ignores");
  }

 private:
  bool jdbc_;
  std::vector<std::pair<std::string, bool>> names_;
};

// A Go duration ("5s", "1m30s", "1.5h", "500ms", "0") in whole seconds,
// rounded up. False when it is not one, is negative or longer than ten
// years (time.ParseDuration's grammar, without the sign).
bool GoDurationSeconds(const std::string& text, int64_t* secs) {
  std::string v = text;
  if (!v.empty() && v[0] == '+') v.erase(0, 1);
  if (v == "0") {
    *secs = 0;
    return true;
  }
  if (v.empty()) return false;
  constexpr int64_t kLimitNs = 10LL * 366 * 24 * 3600 * 1000000000LL;
  int64_t ns = 0;
  size_t i = 0;
  while (i < v.size()) {
    int64_t whole = 0, frac = 0, scale = 1;
    bool digits = false;
    for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i, digits = true) {
      whole = whole * 10 + (v[i] - '0');
      if (whole > kLimitNs) return false;
    }
    if (i < v.size() && v[i] == '.') {
      for (++i; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i, digits = true) {
        if (scale < 1000000000LL) {
          frac = frac * 10 + (v[i] - '0');
          scale *= 10;
        }
      }
    }
    if (!digits) return false;
    static const struct {
      const char* unit;
      int64_t ns;
    } kUnits[] = {{"ns", 1},           {"us", 1000},           {"\xc2\xb5s", 1000},
                  {"\xce\xbcs", 1000}, {"ms", 1000000},        {"s", 1000000000LL},
                  {"m", 60000000000LL}, {"h", 3600000000000LL}};
    int64_t unit = 0;
    size_t unit_len = 0;
    for (const auto& u : kUnits) {
      const size_t n = std::strlen(u.unit);
      if (v.compare(i, n, u.unit) == 0 && n > unit_len) unit = u.ns, unit_len = n;
    }
    if (unit == 0) return false;  // Go requires a unit after every number but a lone 0
    i += unit_len;
    if (whole > kLimitNs / unit) return false;
    // frac < scale <= 1e9: neither product overflows; units are whole
    // multiples of every scale they exceed.
    ns += whole * unit + (unit >= scale ? frac * (unit / scale) : frac * unit / scale);
    if (ns > kLimitNs) return false;
  }
  *secs = ns / 1000000000LL + (ns % 1000000000LL != 0 ? 1 : 0);
  return true;
}

// Sets a dlock option from a driver's parameter; the message names both.
Status SetMapped(const std::string& param, const char* option, const std::string& value,
                 ClientOptions* o) {
  Status s = ApplyClientOption(option, value, o);
  if (s.ok()) return s;
  return Status::Invalid(param + " (dlock's " + option + "): " + s.message());
}

// A timeout in whole seconds; 0 (the drivers' "none") keeps dlock's default.
Status SetSeconds(const std::string& param, const char* option, int64_t secs, ClientOptions* o) {
  if (secs == 0) return Status::OK();
  return SetMapped(param, option, std::to_string(secs), o);
}

// Milliseconds (JDBC's timeouts) in whole seconds, rounded up.
Status MsSeconds(const std::string& param, const std::string& value, int64_t* secs) {
  int64_t ms = 0;
  Status s = ParseInt(value, 0, std::numeric_limits<int32_t>::max(), param.c_str(), &ms);
  if (!s.ok()) return Status::Invalid("JDBC parameter " + s.message() + " (milliseconds)");
  *secs = (ms + 999) / 1000;
  return Status::OK();
}

// Java's and Go's booleans; -1 when value is neither.
int DriverBool(const std::string& value) {
  const std::string v = Lower(value);
  if (v == "true" || v == "1" || v == "yes") return 1;
  if (v == "false" || v == "0" || v == "no") return 0;
  return -1;
}

constexpr const char* kDsnPasswordParam =
    "DSN: the password is not a parameter: write it between the user name's ':' and the '@' "
    "(user:password@tcp(host:3306)/db, taken as it is up to the last '@') or set DLOCK_PASSWORD";

// dlock's own options found in a driver's query: applied last, so that an
// explicit one wins over a mapped driver parameter.
using OwnOptions = std::vector<std::pair<std::string, std::string>>;

Status ApplyOwn(const OwnOptions& own, ClientOptions* o) {
  for (const auto& kv : own) {
    Status s = ApplyClientOption(kv.first, kv.second, o);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

// go-sql-driver's ?k=v&...: names taken as they are, values query-unescaped.
Status ApplyGoParams(const std::string& query, ClientOptions* o) {
  Status s;
  UnknownParams unknown(false);
  OwnOptions own;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    const std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    pos = amp == std::string::npos ? query.size() : amp + 1;
    if (kv.empty()) continue;
    if (NamesAPassword(kv)) return Status::Invalid(kDsnPasswordParam);
    const size_t eq = kv.find('=');
    const std::string key = kv.substr(0, eq);
    if (eq == std::string::npos) {
      if (IsClientKey(key) || FindGoParam(key) != nullptr)
        return Status::Invalid("DSN parameter '" + key + "' has no value");
      return Status::Invalid("DSN: a parameter after '?' has no '=' (parameters are name=value, "
                             "joined by '&')");
    }
    std::string value;
    if (!(s = FormDecode(kv.substr(eq + 1), "a DSN parameter's value", &value)).ok()) return s;
    if (IsClientKey(key)) {
      own.emplace_back(key, value);
      continue;
    }
    const DriverParam* p = FindGoParam(key);
    if (p == nullptr) {
      unknown.Add(key, false);
      continue;
    }
    int64_t secs = 0;
    switch (p->take) {
      case Take::kGoConnect:
      case Take::kGoRead:
        if (!GoDurationSeconds(value, &secs))
          return Status::Invalid("DSN parameter " + key + " must be a Go duration (5s, 1m30s, "
                                 "500ms), not '" + QuoteKey(value) + "'");
        s = SetSeconds(key, p->take == Take::kGoConnect ? "connect_timeout" : "read_timeout", secs, o);
        break;
      case Take::kGoTls: {
        const int b = DriverBool(value);
        const std::string lower = Lower(value);
        if (b == 1) o->ssl_mode = SslMode::kVerify;
        else if (b == 0) o->ssl_mode = SslMode::kDisable;
        else if (lower == "skip-verify" || lower == "preferred") o->ssl_mode = SslMode::kRequire;
        else
          return Status::Invalid("DSN parameter tls: a TLS config registered in Go "
                                 "(mysql.RegisterTLSConfig) cannot be read here; use tls=true, "
                                 "skip-verify or preferred, or dlock's ssl_mode and ssl_ca");
        break;
      }
      default:
        break;  // kIgnore
    }
    if (!s.ok()) return s;
  }
  if (!(s = unknown.Result(!o->password.empty())).ok()) return s;
  return ApplyOwn(own, o);
}

// Connector/C takes the host "localhost" as its default unix socket and
// ignores the port; a DSN's tcp(localhost:3306) and a JDBC URL mean TCP.
void TcpMeansTcp(ClientOptions* o) {
  if (o->socket.empty() && IsLocalhost(o->host)) o->host = "127.0.0.1";
}

// [user[:password]@][tcp[(address)]|unix[(path)]]/database[?params], as
// go-sql-driver reads it: the database follows the last '/', the user part
// ends at the last '@' before it, the user name at its first ':'; user and
// password are taken as they are, the database path-unescaped.
Status ParseGoDsn(const std::string& dsn, ClientOptions* out) {
  ClientOptions o;
  Status s;
  const size_t slash = dsn.rfind('/');
  if (slash == std::string::npos)
    return Status::Invalid("DSN has no '/' before the database name "
                           "(user:password@tcp(host:3306)/database)");
  const std::string head = dsn.substr(0, slash), tail = dsn.substr(slash + 1);
  const size_t at = head.rfind('@');
  const std::string address = at == std::string::npos ? head : head.substr(at + 1);
  if (at != std::string::npos) {
    const std::string userinfo = head.substr(0, at);
    const size_t colon = userinfo.find(':');
    o.user = userinfo.substr(0, colon);
    if (colon != std::string::npos) o.password = userinfo.substr(colon + 1);
    // user@pw@tcp(..): the ':' typed as '@'; the server quotes the user back.
    if (o.user.find('@') != std::string::npos)
      return Status::Invalid("DSN: the user name contains '@' (is the ':' before the password "
                             "missing? user:password@tcp(host:3306)/db; a user name with an '@' "
                             "needs a mysql:// URL, where it is written %40)");
  }
  // A raw '/' in a parameter's value made that '/' the last one: what
  // precedes it holds the '?'.
  if (address.find('?') != std::string::npos ||
      (at == std::string::npos && head.find('?') != std::string::npos))
    return Status::Invalid("DSN: a '/' in a parameter's value must be written %2F (the database "
                           "name follows the DSN's last '/')");
  const size_t paren = address.find('(');
  const std::string net = address.substr(0, paren);
  std::string addr;
  if (paren != std::string::npos) {
    if (address.back() != ')') {
      if (address.find(')', paren) != std::string::npos)
        return Status::Invalid("DSN: a '/' in a parameter's value must be written %2F (the "
                               "database name follows the DSN's last '/')");
      return Status::Invalid("DSN: unclosed '(' in the address (tcp(host:3306), "
                             "unix(/path/to/socket))");
    }
    addr = address.substr(paren + 1, address.size() - paren - 2);
  }
  constexpr const char* kBadDsnPort = "DSN: the port (after the host's ':') must be an integer 1..65535";
  if (net.empty() || net == "tcp" || net == "tcp4" || net == "tcp6") {
    std::string port;
    if (!addr.empty() && addr[0] == '[') {
      const size_t close = addr.find(']');
      if (close == std::string::npos) return Status::Invalid("DSN: unclosed '[' in the address");
      o.host = addr.substr(1, close - 1);
      const std::string after = addr.substr(close + 1);
      if (!after.empty()) {
        if (after[0] != ':') return Status::Invalid("DSN: junk after ']' in the address");
        port = after.substr(1);
        if (port.empty()) return Status::Invalid(kBadDsnPort);
      }
    } else {
      const size_t colon = addr.rfind(':');
      if (colon != std::string::npos && addr.find(':') != colon) {
        o.host = addr;  // a bare IPv6 address, as go-sql-driver reads one
      } else {
        o.host = addr.substr(0, colon);
        if (colon != std::string::npos) {
          port = addr.substr(colon + 1);
          if (port.empty()) return Status::Invalid(kBadDsnPort);
        }
      }
    }
    if (o.host.find_first_of("@()/[] \t") != std::string::npos)
      return Status::Invalid("DSN: the host in tcp(...) holds '@', '(', ')', '/', '[', ']' or a "
                             "space");
    if (o.host.empty()) o.host = "127.0.0.1";
    if (!port.empty()) {
      int64_t p = 0;
      if (!ParseInt(port, 1, 65535, "port", &p).ok()) return Status::Invalid(kBadDsnPort);
      o.port = static_cast<unsigned>(p);
    }
  } else if (net == "unix") {
    o.socket = addr.empty() ? "/tmp/mysql.sock" : addr;  // go-sql-driver's default
    o.host = "localhost";
  } else {
    // Not shown: it may be user:password with the '@' forgotten.
    return Status::Invalid(
        "DSN: the address must be tcp(host:port) or unix(/path/to/socket) "
        "(user:password@tcp(host:3306)/database); a URL starts with mysql://, mariadb:// or "
        "jdbc:mysql://");
  }
  const size_t q = tail.find('?');
  if (!(s = PercentDecode(tail.substr(0, q), "the DSN's database", &o.database)).ok()) return s;
  if (o.database.empty())
    return Status::Invalid("DSN has an empty database name (user:password@tcp(host:3306)/database)");
  if (o.database.find('/') != std::string::npos || o.database.find('`') != std::string::npos)
    return Status::Invalid("DSN database name contains '/' or '`'");
  if (q != std::string::npos && !(s = ApplyGoParams(tail.substr(q + 1), &o)).ok()) return s;
  TcpMeansTcp(&o);
  *out = std::move(o);
  return Status::OK();
}

// JDBC's TLS parameters, resolved once all are read: sslMode wins over the
// legacy ones (as in both drivers).
struct JdbcTls {
  int ssl_mode = -1;  // an SslMode, or -1: not given
  int use_ssl = -1, require_ssl = -1, verify = -1, trust = -1;

  void Resolve(bool mariadb, ClientOptions* o) const {
    if (ssl_mode >= 0) {
      o->ssl_mode = static_cast<SslMode>(ssl_mode);
    } else if (use_ssl == 0) {
      o->ssl_mode = SslMode::kDisable;
    } else if (use_ssl == 1 || require_ssl == 1) {
      // Connector/J checks the certificate only with verifyServerCertificate;
      // MariaDB's driver unless trustServerCertificate.
      const bool check = verify == 1 || (mariadb && trust != 1 && verify != 0);
      o->ssl_mode = check ? SslMode::kVerify : SslMode::kRequire;
    }
  }
};

Status JdbcBool(const std::string& key, const std::string& value, int* out) {
  *out = DriverBool(value);
  if (*out < 0)
    return Status::Invalid("JDBC parameter " + key + " must be true or false, not '" +
                           QuoteKey(value) + "'");
  return Status::OK();
}

// JDBC's ?k=v&...: names and values form-decoded ('+' is a space).
Status ApplyJdbcParams(const std::string& query, bool mariadb, ClientOptions* o) {
  Status s;
  UnknownParams unknown(true);
  OwnOptions own;
  JdbcTls tls;
  const bool user_in_authority = !o->user.empty(), password_in_authority = !o->password.empty();
  bool user_seen = false, password_seen = false, after_password = false;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    const std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    pos = amp == std::string::npos ? query.size() : amp + 1;
    if (kv.empty()) continue;
    const bool follows_password = after_password;
    after_password = false;
    const size_t eq = kv.find('=');
    std::string key, value;
    if (!FormDecode(kv.substr(0, eq), "a JDBC parameter's name", &key).ok() || key.find('\0') != std::string::npos)
      return Status::Invalid("JDBC URL: bad %-escape in a parameter's name");
    const std::string lower = Lower(key);
    if (lower == "password") {
      if (eq == std::string::npos) return Status::Invalid("JDBC URL: password has no '='");
      // Never echoed, not even in this error.
      if (!FormDecode(kv.substr(eq + 1), "password", &value).ok())
        return Status::Invalid("JDBC URL: bad %-escape in the password");
      if (password_in_authority || password_seen)
        return Status::Invalid("JDBC URL: the password is given twice (user:password@ and "
                               "password=, or password= twice)");
      o->password = value;
      password_seen = after_password = true;
      continue;
    }
    if (NamesAPassword(key) || NamesAPassword(kv))
      return Status::Invalid("JDBC URL: a parameter whose name starts like 'password' is not "
                             "password=... (dlock reads one password=, its value %-encoded; "
                             "password1..3 are not supported)");
    if (eq == std::string::npos) {
      if (IsClientKey(key) || FindJdbcParam(key) != nullptr)
        return Status::Invalid("JDBC URL parameter '" + key + "' has no value");
      return Status::Invalid("JDBC URL: a parameter after '?' has no '=' (parameters are "
                             "name=value, joined by '&'; a '&' in the password is written %26)");
    }
    if (!(s = FormDecode(kv.substr(eq + 1), "a JDBC parameter's value", &value)).ok()) return s;
    // MariaDB Connector/J's own pool=true|false, not dlock's pool size.
    if (key == "pool" && mariadb && DriverBool(value) >= 0 && value != "0" && value != "1") continue;
    if (IsClientKey(key)) {
      own.emplace_back(key, value);
      continue;
    }
    const DriverParam* p = FindJdbcParam(key);
    if (p == nullptr) {
      unknown.Add(key, follows_password);
      continue;
    }
    int64_t secs = 0;
    switch (p->take) {
      case Take::kUser:
        if (user_in_authority || user_seen)
          return Status::Invalid("JDBC URL: the user is given twice (user@ and user=, or user= "
                                 "twice)");
        o->user = value;
        user_seen = true;
        break;
      case Take::kMsConnect:
      case Take::kMsRead:
        if ((s = MsSeconds(key, value, &secs)).ok())
          s = SetSeconds(key, p->take == Take::kMsConnect ? "connect_timeout" : "read_timeout", secs, o);
        break;
      case Take::kSslMode: {
        const std::string v = Lower(value);
        if (v == "disabled" || v == "disable") tls.ssl_mode = static_cast<int>(SslMode::kDisable);
        else if (v == "preferred" || v == "required" || v == "trust")
          tls.ssl_mode = static_cast<int>(SslMode::kRequire);
        else if (v == "verify_ca" || v == "verify-ca" || v == "verify_identity" || v == "verify-full")
          tls.ssl_mode = static_cast<int>(SslMode::kVerify);
        else
          return Status::Invalid("JDBC parameter sslMode must be DISABLED, PREFERRED, REQUIRED, "
                                 "VERIFY_CA or VERIFY_IDENTITY (or disable, trust, verify-ca, "
                                 "verify-full), not '" + QuoteKey(value) + "'");
        break;
      }
      case Take::kUseSsl: s = JdbcBool(key, value, &tls.use_ssl); break;
      case Take::kRequireSsl: s = JdbcBool(key, value, &tls.require_ssl); break;
      case Take::kVerifyCert: s = JdbcBool(key, value, &tls.verify); break;
      case Take::kTrustCert: s = JdbcBool(key, value, &tls.trust); break;
      case Take::kCaFile:
        if (StartsWith(value, "-----") || StartsWith(value, "classpath:"))
          return Status::Invalid("JDBC parameter serverSslCert: only a file path can be read "
                                 "(or set dlock's ssl_ca=FILE)");
        o->ssl_ca = StartsWith(value, "file://") ? value.substr(7) : value;
        break;
      case Take::kSocket: o->socket = value; break;
      case Take::kKeyStore:
        return Status::Invalid("JDBC parameter " + key + ": a Java key store cannot be read; set "
                               "dlock's ssl_ca=FILE (a PEM file) instead");
      default:
        break;  // kIgnore
    }
    if (!s.ok()) return s;
  }
  if (!(s = unknown.Result(!o->password.empty())).ok()) return s;
  tls.Resolve(mariadb, o);
  return ApplyOwn(own, o);
}

// jdbc:mysql://[user[:password]@]host[:port]/database[?params] (and
// jdbc:mariadb://), after "jdbc:". The authority and path as mysql://
// reads them, '+' a space as Connector/J decodes them; one host only.
Status ParseJdbcUrl(const std::string& url, ClientOptions* out) {
  std::string rest;
  bool mariadb = false;
  const std::string lower = Lower(url.substr(0, 10));  // the scheme, without regard to case
  if (StartsWith(lower, "mysql://")) {
    rest = url.substr(8);
  } else if (StartsWith(lower, "mariadb://")) {
    rest = url.substr(10), mariadb = true;
  } else if (StartsWith(lower, "mysql") || StartsWith(lower, "mariadb")) {
    return Status::Invalid("JDBC URL: only the one-host form is read, jdbc:mysql://host:port/db "
                           "or jdbc:mariadb://host:port/db (load-balancing, replication, "
                           "failover and DNS SRV forms name several servers, which dlock does "
                           "not choose between)");
  } else {
    return Status::Invalid("JDBC URL must start with jdbc:mysql:// or jdbc:mariadb://");
  }
  if (rest.find('#') != std::string::npos)
    return Status::Invalid("JDBC URL: '#' is not allowed (write a '#' in a password or value as "
                           "%23)");
  const size_t q = rest.find('?');
  std::string main = rest.substr(0, q);
  const std::string query = q == std::string::npos ? "" : rest.substr(q + 1);
  // user:12/pw@host or user:12?pw@host, as for mysql://: a raw '/' or '?'
  // in a password that starts like a port cut the authority short, and the
  // password's tail went into the database or the parameters. An '@' in a
  // parameter's value with no '/' after it stays allowed (user=admin@server).
  const size_t cut = rest.find_first_of("/?");
  if (cut != std::string::npos && rest.find('@') > cut &&
      rest.substr(0, cut).find(':') != std::string::npos) {
    const size_t at_in_query = query.find('@');
    if (main.find('@', cut) != std::string::npos ||
        (at_in_query != std::string::npos && query.find('/', at_in_query) != std::string::npos))
      return Status::Invalid(
          "JDBC URL: an '@' after the '/' or '?' that follows host:port: if what follows the ':' "
          "is a password holding '/' or '?', percent-encode them (%2F, %3F); an '@' in a "
          "database name or a path in a parameter's value is written %40");
  }
  const std::string authority = main.substr(0, main.find('/'));
  const std::string hosts = authority.substr(authority.rfind('@') == std::string::npos ? 0 : authority.rfind('@') + 1);
  if (hosts.find(',') != std::string::npos)
    return Status::Invalid("JDBC URL: several hosts; dlock takes one (jdbc:mysql://host:port/db)");
  if (hosts.find_first_of("()=") != std::string::npos)
    return Status::Invalid("JDBC URL: the address=(...) and (host=..) forms are not read; write "
                           "host:port");
  for (char& c : main)
    if (c == '+') c = ' ';  // percent-decoding keeps the space; '%2B' is a '+'
  ClientOptions o;
  Status s = ParseMysqlUrl(main, &o);
  if (!s.ok()) return s;
  if (!(s = ApplyJdbcParams(query, mariadb, &o)).ok()) return s;
  TcpMeansTcp(&o);  // Connector/J always connects by TCP
  *out = std::move(o);
  return Status::OK();
}

// scheme:// at the start (http://, mysq://): a URL, not a DSN.
bool HasScheme(const std::string& url) {
  size_t i = 0;
  while (i < url.size() && ((url[i] >= 'a' && url[i] <= 'z') || (url[i] >= 'A' && url[i] <= 'Z') ||
                            (url[i] >= '0' && url[i] <= '9') || url[i] == '+' || url[i] == '.' ||
                            url[i] == '-'))
    ++i;
  return i > 0 && (url.compare(i, 3, "://") == 0 || url.compare(i, 2, ":/") == 0 ||
                   url.compare(i, 2, ":\\") == 0);
}

bool IsAsciiAlnumOrUnderscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The length of `word` at url[pos] without regard to case, or 0.
size_t MatchWord(const std::string& url, size_t pos, const char* word) {
  const size_t n = std::strlen(word);
  return url.size() - pos >= n && strncasecmp(url.c_str() + pos, word, n) == 0 ? n : 0;
}

}  // namespace

UrlForm ServerUrlForm(const std::string& url, size_t pos, size_t* scheme_len) {
  if (pos > url.size()) return UrlForm::kNone;
  size_t i = pos;
  const size_t jdbc = MatchWord(url, i, "jdbc:");
  i += jdbc;
  size_t name = MatchWord(url, i, "mysql");
  if (name == 0) name = MatchWord(url, i, "mariadb");
  if (name == 0) return UrlForm::kNone;
  i += name;
  // SQLAlchemy's mysql+DRIVER:// names the same server; JDBC has no such form.
  if (jdbc == 0 && i < url.size() && url[i] == '+') {
    size_t j = i + 1;
    while (j < url.size() && IsAsciiAlnumOrUnderscore(url[j])) ++j;
    if (j == i + 1) return UrlForm::kNone;
    i = j;
  }
  if (url.compare(i, 3, "://") != 0) return UrlForm::kNone;
  if (scheme_len != nullptr) *scheme_len = i + 3 - pos;
  return jdbc != 0 ? UrlForm::kJdbc : UrlForm::kMysql;
}

Status ParseUrl(const std::string& url, ClientOptions* out) {
  if (url.find('\0') != std::string::npos) return Status::Invalid("URL contains a NUL byte");
  if (const size_t n = SplitServerUrls(url).size(); n > 1)
    return Status::Invalid("URL names " + std::to_string(n) +
                           " servers (URLs joined by ';'): only a lock client spreads keys over "
                           "several servers; here give one server's URL");
  ClientOptions o;
  Status s;
  size_t scheme_len = 0;
  if (ServerUrlForm(url, 0, &scheme_len) == UrlForm::kMysql) {
    s = ParseMysqlUrl(url.substr(scheme_len), &o);
  } else if (StartsWith(Lower(url.substr(0, 5)), "jdbc:")) {
    s = ParseJdbcUrl(url.substr(5), &o);  // it says what a JDBC URL dlock reads looks like
  } else if (HasScheme(url)) {
    return Status::Invalid(
        "URL must start with mysql://, mariadb:// (also mysql+DRIVER://), jdbc:mysql:// or "
        "jdbc:mariadb://, or be a go-sql-driver DSN "
        "(mysql://user[:password]@host[:port]/database[?options], "
        "user:password@tcp(host:3306)/database[?params])");
  } else {
    s = ParseGoDsn(url, &o);
  }
  if (!s.ok()) return s;
  if (o.password.empty()) {
    const char* env = std::getenv("DLOCK_PASSWORD");
    if (env != nullptr) o.password = env;
  }
  *out = std::move(o);
  return Status::OK();
}

std::vector<std::string> DriverParamNames(bool jdbc) {
  std::vector<std::string> names;
  if (jdbc)
    for (const DriverParam& p : kJdbcParams) names.push_back(p.name);
  else
    for (const DriverParam& p : kGoParams) names.push_back(p.name);
  return names;
}

Status UrlWithoutPasswordText(const std::string& url, std::string* out) {
  out->clear();
  if (const std::vector<std::string> servers = SplitServerUrls(url); servers.size() > 1) {
    std::string joined;
    for (size_t i = 0; i < servers.size(); ++i) {
      std::string one;
      Status s = UrlWithoutPasswordText(servers[i], &one);
      if (!s.ok()) return ServerError(i, servers.size(), "", s);
      joined += (i == 0 ? "" : ";") + one;
    }
    *out = std::move(joined);
    return Status::OK();
  }
  ClientOptions o;
  Status s = ParseUrl(url, &o);
  if (!s.ok()) return s;
  const bool jdbc = StartsWith(Lower(url.substr(0, 5)), "jdbc:");
  if (!jdbc && ServerUrlForm(url, 0) == UrlForm::kNone) {
    // A DSN: the user part ends at the last '@' before the last '/', the
    // user name at its first ':'.
    const size_t slash = url.rfind('/');
    const size_t at = url.substr(0, slash).rfind('@');
    const size_t colon = url.find(':');
    *out = at != std::string::npos && colon < at ? url.substr(0, colon) + url.substr(at) : url;
    return Status::OK();
  }
  // Split as the parser does: the authority ends at the first '/', the user
  // part at its last '@', the user name at the first ':' of that.
  const size_t scheme_end = url.find("://") + 3;
  const size_t slash = url.find('/', scheme_end);
  const std::string authority = url.substr(scheme_end, slash - scheme_end);
  const size_t at = authority.rfind('@');
  std::string result = url;
  if (at != std::string::npos) {
    const std::string user = authority.substr(0, std::min(authority.find(':'), at));
    result = url.substr(0, scheme_end) + user + authority.substr(at) + url.substr(slash);
  }
  const size_t q = result.find('?');
  if (jdbc && q != std::string::npos) {
    // ...and JDBC's password= parameter goes.
    const std::string query = result.substr(q + 1);
    std::string kept;
    size_t pos = 0;
    while (pos <= query.size()) {
      size_t amp = query.find('&', pos);
      if (amp == std::string::npos) amp = query.size();
      const std::string kv = query.substr(pos, amp - pos);
      std::string key;
      if (!kv.empty() && !(FormDecode(kv.substr(0, kv.find('=')), "name", &key).ok() &&
                           Lower(key) == "password"))
        kept += (kept.empty() ? "" : "&") + kv;
      pos = amp + 1;
    }
    result = result.substr(0, q) + (kept.empty() ? "" : "?" + kept);
  }
  *out = result;
  return Status::OK();
}

}  // namespace dlock
