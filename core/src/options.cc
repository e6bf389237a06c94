#include "options.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

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

const char* const kClientKeys[] = {"socket",   "pool",     "connect_timeout",     "read_timeout",
                                   "table",    "row_table", "ssl_mode",           "ssl_ca",
                                   "cleanup_interval_ms", "cleanup_grace_ms", "cleanup_batch",
                                   "events"};
const char* const kLockKeys[] = {"mode",      "ttl_ms", "auto_renew",  "max_hold_ms",
                                 "reentrant", "holder", "shards", "shard_group", "wakeup",
                                 "transaction"};

Status ParseBool(const std::string& v, const char* what, bool* out) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") *out = true;
  else if (v == "0" || v == "false" || v == "off" || v == "no") *out = false;
  else return Status::Invalid(std::string(what) + " must be 0/1 (or true/false), not '" + QuoteKey(v) + "'");
  return Status::OK();
}

}  // namespace

std::string ClientOptions::Where() const {
  std::string w = socket.empty() ? host + ":" + std::to_string(port) : socket;
  return w + "/" + database;
}

bool IsClientKey(const std::string& key) {
  for (const char* k : kClientKeys)
    if (key == k) return true;
  return false;
}

bool IsLockKey(const std::string& key) {
  for (const char* k : kLockKeys)
    if (key == k) return true;
  return false;
}

Status ParseInt(const std::string& s, int64_t lo, int64_t hi, const char* what, int64_t* out) {
  const std::string range = " (allowed " + std::to_string(lo) + ".." + std::to_string(hi) + ")";
  if (s.empty() || s.size() > 20) return Status::Invalid(std::string(what) + ": not an integer" + range);
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i == s.size()) return Status::Invalid(std::string(what) + ": not an integer" + range);
  for (size_t j = i; j < s.size(); ++j)
    if (s[j] < '0' || s[j] > '9')
      return Status::Invalid(std::string(what) + ": not an integer: '" + s.substr(0, 32) + "'" + range);
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE || v < lo || v > hi)
    return Status::Invalid(std::string(what) + " out of range: " + s.substr(0, 32) + range);
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

std::string QuoteKey(const std::string& key) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < key.size() && out.size() < 80; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (out.size() >= 80) out += "...";
  return out;
}

Status ValidateKey(const std::string& key) {
  if (key.empty()) return Status::Invalid("key is empty");
  if (key.size() > kMaxKeyBytes)
    return Status::Invalid("key is " + std::to_string(key.size()) + " bytes; the maximum is " +
                           std::to_string(kMaxKeyBytes) + " (keys are never truncated)");
  if (std::memchr(key.data(), '\0', key.size()) != nullptr)
    return Status::Invalid("key contains a NUL byte: '" + QuoteKey(key) + "'");
  return Status::OK();
}

Status ApplyClientOption(const std::string& key, const std::string& value, ClientOptions* o) {
  int64_t v = 0;
  Status s;
  if (key == "socket") {
    o->socket = value;
  } else if (key == "pool") {
    if (!(s = ParseInt(value, 1, 1024, "pool", &v)).ok()) return s;
    o->pool = static_cast<int>(v);
  } else if (key == "connect_timeout") {
    if (!(s = ParseInt(value, 1, 3600, "connect_timeout", &v)).ok()) return s;
    o->connect_timeout_s = static_cast<int>(v);
  } else if (key == "read_timeout") {
    if (!(s = ParseInt(value, 1, 86400, "read_timeout", &v)).ok()) return s;
    o->read_timeout_s = static_cast<int>(v);
  } else if (key == "table") {
    if (!(s = ValidateIdentifier(value, "table")).ok()) return s;
    o->table = value;
  } else if (key == "row_table") {
    if (!(s = ValidateIdentifier(value, "row_table")).ok()) return s;
    o->row_table = value;
  } else if (key == "ssl_mode") {
    if (value == "disable") o->ssl_mode = SslMode::kDisable;
    else if (value == "require") o->ssl_mode = SslMode::kRequire;
    else if (value == "verify") o->ssl_mode = SslMode::kVerify;
    else return Status::Invalid("ssl_mode must be disable, require or verify");
  } else if (key == "ssl_ca") {
    o->ssl_ca = value;
  } else if (key == "cleanup_interval_ms") {
    if (!(s = ParseInt(value, 0, kMaxTtlMs, "cleanup_interval_ms", &v)).ok()) return s;
    o->cleanup_interval_ms = v;
  } else if (key == "cleanup_grace_ms") {
    if (!(s = ParseInt(value, 0, kMaxTtlMs, "cleanup_grace_ms", &v)).ok()) return s;
    o->cleanup_grace_ms = v;
  } else if (key == "cleanup_batch") {
    if (!(s = ParseInt(value, 1, 100000, "cleanup_batch", &v)).ok()) return s;
    o->cleanup_batch = static_cast<int>(v);
  } else if (key == "events") {
    if (!(s = ParseInt(value, 0, 1000000, "events", &v)).ok()) return s;
    o->events = static_cast<int>(v);
  } else {
    return Status::Invalid("unknown client option '" + QuoteKey(key) + "'");
  }
  return Status::OK();
}

Status ApplyLockOption(const std::string& key, const std::string& value, LockOptions* o) {
  int64_t v = 0;
  Status s;
  if (key == "mode") {
    if (value == "lease") o->mode = LockMode::kLease;
    else if (value == "row") o->mode = LockMode::kRow;
    else return Status::Invalid("mode must be 'lease' or 'row', not '" + QuoteKey(value) + "'");
  } else if (key == "ttl_ms") {
    if (!(s = ParseInt(value, 1, kMaxTtlMs, "ttl_ms", &v)).ok()) return s;
    o->ttl_ms = v;
  } else if (key == "auto_renew") {
    return ParseBool(value, "auto_renew", &o->auto_renew);
  } else if (key == "max_hold_ms") {
    if (!(s = ParseInt(value, 0, kMaxTtlMs, "max_hold_ms", &v)).ok()) return s;
    o->max_hold_ms = v;
  } else if (key == "transaction") {
    return ParseBool(value, "transaction", &o->transaction);
  } else if (key == "reentrant") {
    return ParseBool(value, "reentrant", &o->reentrant);
  } else if (key == "holder") {
    if (value == "thread") o->holder = Holder::kThread;
    else if (value == "lock") o->holder = Holder::kLock;
    else return Status::Invalid("holder must be 'thread' or 'lock', not '" + QuoteKey(value) + "'");
  } else if (key == "shards") {
    if (!(s = ParseInt(value, 0, 65536, "shards", &v)).ok()) return s;
    o->shards = static_cast<int>(v);
  } else if (key == "shard_group") {
    if (!(s = ValidateKey(value)).ok())
      return Status::Invalid("shard_group: " + s.message());
    if (value.size() > kMaxKeyBytes - 8)
      return Status::Invalid("shard_group is longer than " + std::to_string(kMaxKeyBytes - 8) + " bytes");
    o->shard_group = value;
  } else if (key == "wakeup") {
    if (value == "auto") o->wakeup = Wakeup::kAuto;
    else if (value == "poll") o->wakeup = Wakeup::kPoll;
    else return Status::Invalid("wakeup must be 'auto' or 'poll', not '" + QuoteKey(value) + "'");
  } else {
    return Status::Invalid("unknown lock option '" + QuoteKey(key) + "'");
  }
  return Status::OK();
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
  std::string query;
  size_t q = rest.find('?');
  if (q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
  }
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return Status::Invalid("URL has no /database");
  std::string authority = rest.substr(0, slash);
  Status s = PercentDecode(rest.substr(slash + 1), "database", &o.database);
  if (!s.ok()) return s;
  if (o.database.empty()) return Status::Invalid("URL has an empty database name");
  if (o.database.find('/') != std::string::npos || o.database.find('`') != std::string::npos)
    return Status::Invalid("URL database name contains '/' or '`'");

  size_t at = authority.rfind('@');
  std::string hostport = authority;
  if (at != std::string::npos) {
    std::string userinfo = authority.substr(0, at);
    hostport = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (!(s = PercentDecode(userinfo.substr(0, colon), "user", &o.user)).ok()) return s;
    if (colon != std::string::npos) {
      // The password is never echoed, not even in this error.
      if (!(s = PercentDecode(userinfo.substr(colon + 1), "password", &o.password)).ok())
        return Status::Invalid("URL: bad %-escape in the password");
    }
  }
  if (!hostport.empty() && hostport[0] == '[') {  // [v6]:port
    size_t close = hostport.find(']');
    if (close == std::string::npos) return Status::Invalid("URL: unclosed '[' in host");
    o.host = hostport.substr(1, close - 1);
    std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Status::Invalid("URL: junk after ']' in host");
      int64_t p = 0;
      if (!(s = ParseInt(after.substr(1), 1, 65535, "port", &p)).ok()) return s;
      o.port = static_cast<unsigned>(p);
    }
  } else {
    size_t colon = hostport.rfind(':');
    std::string host = hostport.substr(0, colon);
    if (!(s = PercentDecode(host, "host", &o.host)).ok()) return s;
    if (colon != std::string::npos) {
      int64_t p = 0;
      if (!(s = ParseInt(hostport.substr(colon + 1), 1, 65535, "port", &p)).ok()) return s;
      o.port = static_cast<unsigned>(p);
    }
  }
  if (o.host.empty()) o.host = "127.0.0.1";

  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    pos = amp == std::string::npos ? query.size() : amp + 1;
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) return Status::Invalid("URL option '" + QuoteKey(kv) + "' has no value");
    std::string k, v;
    if (!(s = PercentDecode(kv.substr(0, eq), "option name", &k)).ok()) return s;
    if (!(s = PercentDecode(kv.substr(eq + 1), "option value", &v)).ok()) return s;
    if (!IsClientKey(k)) return Status::Invalid("unknown URL option '" + QuoteKey(k) + "'");
    if (!(s = ApplyClientOption(k, v, &o)).ok()) return s;
  }
  if (o.password.empty()) {
    const char* env = std::getenv("DLOCK_PASSWORD");
    if (env != nullptr) o.password = env;
  }
  *out = std::move(o);
  return Status::OK();
}

}  // namespace dlock
