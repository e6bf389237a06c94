#include "options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

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

// host[:port], host as a name, an address or [v6]; port stays as it is
// when none is given.
Status ParseHostPort(const std::string& hostport, const std::string& rest, std::string* host,
                     unsigned* port) {
  Status s;
  if (!hostport.empty() && hostport[0] == '[') {  // [v6]:port
    size_t close = hostport.find(']');
    if (close == std::string::npos) return Status::Invalid("URL: unclosed '[' in host");
    *host = hostport.substr(1, close - 1);
    if (host->empty()) return Status::Invalid("URL: empty host '[]'");
    std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Status::Invalid("URL: junk after ']' in host");
      if (!(s = ParsePort(after.substr(1), rest, port)).ok()) return s;
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
    }
  }
  if (host->empty()) *host = "127.0.0.1";
  return Status::OK();
}

constexpr size_t kMaxNodes = 16;

// user[:password]@host[:port][,host[:port]...], host as a name, an address or [v6].
//
// No message here shows any part of the authority: after a typo, any of it
// may be the password. A typo that still parses is refused when it would put
// the password where messages show it (the host, the user name).
Status ParseAuthority(const std::string& authority, const std::string& rest, ClientOptions* o) {
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
    return ParseHostPort(hostport, rest, &o->host, &o->port);
  size_t pos = 0;
  for (;;) {
    size_t comma = hostport.find(',', pos);
    std::string one = hostport.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (one.empty())
      return Status::Invalid("URL: an empty host in the host list (h1:port,h2:port,...)");
    ClientOptions::Node n;
    if (!(s = ParseHostPort(one, rest, &n.host, &n.port)).ok()) return s;
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

}  // namespace

Status ParseUrl(const std::string& url, ClientOptions* out) {
  ClientOptions o;
  std::string rest;
  if (url.compare(0, 8, "mysql://") == 0) {
    rest = url.substr(8);
  } else if (url.compare(0, 10, "mariadb://") == 0) {
    rest = url.substr(10);
  } else {
    return Status::Invalid("URL must start with mysql:// or mariadb:// "
                           "(mysql://user[:password]@host[:port]/database[?options])");
  }
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
  if (!(s = ParseAuthority(path.substr(0, slash), rest, &o)).ok()) return s;
  if (!(s = ApplyQuery(query, &o)).ok()) return s;
  if (!o.nodes.empty() && !o.socket.empty())
    return Status::Invalid("URL: socket= names one server; it cannot go with a list of hosts");
  if (o.password.empty()) {
    const char* env = std::getenv("DLOCK_PASSWORD");
    if (env != nullptr) o.password = env;
  }
  *out = std::move(o);
  return Status::OK();
}

}  // namespace dlock
