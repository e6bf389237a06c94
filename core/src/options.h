// Parsed, validated options for clients and locks. Every option is a row of
// option_table.h: its member, default, range and parsing come from there.
#ifndef DLOCK_CORE_OPTIONS_H_
#define DLOCK_CORE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dlock/core.hpp"
#include "dialect_table.h"
#include "option_table.h"

namespace dlock {

constexpr size_t kMaxKeyBytes = 512;
constexpr int64_t kMaxTtlMs = 30LL * 24 * 3600 * 1000;  // 30 days

// Enums an option picks with a word: the words are the values in order
// (nullptr-terminated), so that the enum's value is the word's index.
enum class SslMode { kDisable, kRequire, kVerify };
constexpr const char* kSslModeWords[] = {"disable", "require", "verify", nullptr};
enum class LockMode { kLease, kRow };
constexpr const char* kLockModeWords[] = {"lease", "row", nullptr};
enum class Holder { kThread, kLock };
constexpr const char* kHolderWords[] = {"thread", "lock", nullptr};
enum class Wakeup { kAuto, kPoll };
constexpr const char* kWakeupWords[] = {"auto", "poll", nullptr};
// Which statements a client sends (dialect.h): kAuto takes the server's
// word at connect; the others force one (dialect_table.h).
#define DLOCK_DIALECT_ENUM(id, word, marker, object) id,
#define DLOCK_DIALECT_WORD(id, word, marker, object) #word,
enum class SqlDialect { kAuto, DLOCK_DIALECTS(DLOCK_DIALECT_ENUM) };
constexpr const char* kSqlDialectWords[] = {"auto", DLOCK_DIALECTS(DLOCK_DIALECT_WORD) nullptr};
#undef DLOCK_DIALECT_ENUM
#undef DLOCK_DIALECT_WORD

// One member per row of the option table, with its type and default.
#define DLOCK_OPTION_FIELD(name, field, type, rule, min, max, words, def, doc) type field = def;

struct ClientOptions {
  // From the URL, not options.
  std::string user;
  std::string password;  // never printed
  std::string host = "127.0.0.1";
  unsigned port = 3306;
  std::string database;
  // Every node a URL names when it names several (mysql://u@h1:p1,h2:p2/db),
  // in its order; host and port are then the first. Empty for one address.
  // Connections go to the first healthy node (Conn::Connect).
  struct Node {
    std::string host;
    unsigned port = 3306;
  };
  std::vector<Node> nodes;

  DLOCK_CLIENT_OPTIONS(DLOCK_OPTION_FIELD)

  // "host:port/db" or "socket/db": safe to print (no user, no password).
  std::string Where() const;
};

struct LockOptions {
  DLOCK_LOCK_OPTIONS(DLOCK_OPTION_FIELD)
};

#undef DLOCK_OPTION_FIELD

enum class OptionKind { kClient, kLock };
enum class OptionRule { kInt, kBool, kWords, kTable, kText, kKeyPrefix };

// A row of the option table, for messages, docs and tests.
struct OptionInfo {
  const char* name;
  OptionKind kind;
  OptionRule rule;
  int64_t min, max;          // kInt: the range; kKeyPrefix: its length in bytes
  const char* const* words;  // kWords: nullptr-terminated; else nullptr
  const char* doc;
};

// Every option: the client's, then the lock's, each in the table's order.
const OptionInfo* Options(size_t* count);
// nullptr for a name that is no option.
const OptionInfo* FindOption(const std::string& name);
// The default as dlock_config_set takes it: "8", "lease", "0" (false), "" (none).
std::string OptionDefault(const OptionInfo& option);
// The first lock option (in the table's order) whose value differs between a
// and b, or nullptr when every one is equal; *va and *vb get the two values
// as dlock_config_set takes them. Every row of the table is compared, so a
// new option takes part without anyone listing it.
const OptionInfo* FirstDifference(const LockOptions& a, const LockOptions& b, std::string* va,
                                  std::string* vb);

// The URL forms a server's URL may start with, schemes without regard to
// case: mysql:// and mariadb://, each also with SQLAlchemy's driver suffix
// (mysql+pymysql://, mariadb+mariadbconnector://; the driver is ignored),
// and jdbc:mysql:// / jdbc:mariadb://. kNone for anything else (a
// go-sql-driver DSN, another scheme). *scheme_len: the scheme and its "://".
enum class UrlForm { kNone, kMysql, kJdbc };
UrlForm ServerUrlForm(const std::string& url, size_t pos, size_t* scheme_len = nullptr);

// Parses mysql://user[:password]@host[:port]/database[?k=v&...] (the forms
// of ServerUrlForm's kMysql; host localhost with a port is 127.0.0.1 at that
// port unless socket= is given, localhost without one stays Connector/C's
// default unix socket), a go-sql-driver DSN
// (user:password@tcp(host:port)/database?..) or a jdbc:mysql:// /
// jdbc:mariadb:// URL; then DLOCK_PASSWORD fills in a missing password.
// A URL naming several servers (SplitServerUrls, core.hpp) is kInvalid here:
// each is parsed on its own (ParseServers).
Status ParseUrl(const std::string& url, ClientOptions* out);
// The server's identity for rendezvous hashing (ServerIds in core.hpp).
std::string ServerIdentity(const ClientOptions& o);

// One server of a URL: its own URL (as written), its options as a client
// opens it (its URL with cfg's client options applied) and its identity.
struct ServerSpec {
  std::string url;
  ClientOptions options;
  std::string id;
};
// Every server of url (SplitServerUrls), each parsed once, and the list
// checked: at most kMaxServers, no server twice, no port-less localhost in a
// list (it is the default unix socket), and the client-wide options
// (events: a client over several servers has one event queue) the same on
// every server. An error about one server of several names its place
// (ServerError); a URL naming one server gets its parser's error as it is.
Status ParseServers(const std::string& url, const Config& cfg, std::vector<ServerSpec>* out);
// s (its code and errno kept) with its message after "server I of N in the
// URL: ", or "server I of N (ID): " when the server's identity is known (id
// not empty). i counts from 0.
Status ServerError(size_t i, size_t n, const std::string& id, const Status& s);
// The parameters of a go-sql-driver DSN (jdbc false) or a JDBC URL that
// ParseUrl reads or ignores (dlock.h lists them; core_unit checks that).
std::vector<std::string> DriverParamNames(bool jdbc);
// url, in any form ParseUrl reads, with its password taken out; empty and
// the parse error when it does not parse.
Status UrlWithoutPasswordText(const std::string& url, std::string* out);
// Applies one option (from the URL query or a Config) to client options.
Status ApplyClientOption(const std::string& key, const std::string& value, ClientOptions* out);
Status ApplyLockOption(const std::string& key, const std::string& value, LockOptions* out);
bool IsClientKey(const std::string& key);
bool IsLockKey(const std::string& key);

// Table names: [A-Za-z_][A-Za-z0-9_]*, at most 58 bytes (a suffix is added
// for the lease table's companion).
Status ValidateIdentifier(const std::string& name, const char* what);
Status ValidateKey(const std::string& key);
// Whole decimal integer in [lo, hi]; what names the option in the message.
Status ParseInt(const std::string& s, int64_t lo, int64_t hi, const char* what, int64_t* out);
// A printable, bounded rendering of a value taken from input (a key, an
// option value, a part of the URL) for messages: control bytes, quotes and
// backslashes become \xNN; longer than 80 bytes is cut with "...".
std::string QuoteKey(const std::string& key);
// Text from elsewhere (the server's error messages, which may echo input)
// with control bytes as \xNN, so a message stays one line.
std::string PrintableText(const std::string& text);

}  // namespace dlock

#endif  // DLOCK_CORE_OPTIONS_H_
