// The URL parser (ParseUrl): never crashes, every message is one printable
// line, and no message ever shows the password, in any of its forms
// (mysql://, a go-sql-driver DSN, jdbc:mysql:// with the password in the
// authority or as password=).
//
// The input is parsed twice over. First as it is, as a whole URL (no crash,
// one-line messages). Then as the fields of
//   mysql://USER:PASSWORD@HOST/DATABASE?QUERY
// separated by newlines, so that which part is the password is known by
// construction: USER without ":@/?#", HOST without "@/?#"; DATABASE and
// QUERY anything; PASSWORD anything (an unencoded '/', '?', '#' or '@' in a
// password is exactly where a parser goes wrong) but an '@' followed by
// one of "/?#": "pw@host:3306/db?x" typed as a password reads, by any
// parser, as the password "pw" and a URL of its own, so the rest of it is
// not known to be password. The check is
// differential: the same URL is parsed again with every letter and digit of
// the password replaced by another (the hex digits of a %-escape kept, so
// the escapes stay what they were). Nothing the user is shown — the error
// message, or on success where the client connects (Where(), used in every
// later message), the user name and the text options — may change: if it
// does, some of the password reached it.
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <strings.h>

#include "fuzz_check.h"
#include "options.h"

namespace {

// Letters to letters (rot13), digits to digits (+5): the same character
// classes, so that no structure changes, but other characters.
char Rotate(char c) {
  if (c >= 'a' && c <= 'z') return static_cast<char>('a' + (c - 'a' + 13) % 26);
  if (c >= 'A' && c <= 'Z') return static_cast<char>('A' + (c - 'A' + 13) % 26);
  if (c >= '0' && c <= '9') return static_cast<char>('0' + (c - '0' + 5) % 10);
  return c;
}

// Field i of in (newline-separated), without the bytes in drop; def when
// the input has fewer fields.
std::string Field(const std::string& in, int i, const char* drop, const char* def) {
  size_t pos = 0;
  for (int k = 0; k < i; ++k) {
    pos = in.find('\n', pos);
    if (pos == std::string::npos) return def;
    ++pos;
  }
  std::string f = in.substr(pos, in.find('\n', pos) - pos);
  std::string out;
  for (char c : f)
    if (std::strchr(drop, c) == nullptr || c == '\0') out.push_back(c);
  return out;
}

struct Seen {
  dlock::Code code;
  std::string shown;  // the message, or on success Where() and the other shown parts
};

Seen Parse(const std::string& url) {
  dlock::ClientOptions o;
  dlock::Status s = dlock::ParseUrl(url, &o);
  FUZZ_CHECK(dlock_fuzz::OneLine(s.message()), "message not one line: %s for %s",
             dlock_fuzz::Show(s.message()).c_str(), dlock_fuzz::Show(url).c_str());
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == dlock::Code::kInvalid && !s.message().empty(),
               "a bad URL is kInvalid with a message: %d %s", static_cast<int>(s.code()),
               dlock_fuzz::Show(url).c_str());
    return {s.code(), s.message()};
  }
  const std::string where = o.Where();
  FUZZ_CHECK(dlock_fuzz::OneLine(where), "Where() not one line: %s", dlock_fuzz::Show(where).c_str());
  // What else reaches a user: the user name (the server quotes it back in
  // "Access denied for user ..."), and text options that messages may name.
  FUZZ_CHECK(o.pool >= 1 && o.pool <= 1024 && o.port >= 1 && o.port <= 65535 && !o.database.empty(),
             "accepted options out of range: pool %d port %u for %s", o.pool, o.port,
             dlock_fuzz::Show(url).c_str());
  return {s.code(), where + " | user " + o.user + " | ssl_ca " + o.ssl_ca + " | tables " + o.table +
                       " " + o.row_table};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  unsetenv("DLOCK_PASSWORD");  // the password comes from the URL only
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string url(reinterpret_cast<const char*>(data), size);
  (void)Parse(url);

  const std::string user = Field(url, 0, ":@/?#", "u");
  const std::string password = Field(url, 1, "", "pw");
  const std::string host = Field(url, 2, "@/?#", "h");
  const std::string database = Field(url, 3, "", "db");
  const std::string query = Field(url, 4, "", "");
  std::string rotated_password = password;
  for (size_t i = 0; i < password.size(); ++i) {
    if (password[i] == '%') {
      i += 2;  // the escape's hex digits stay
      continue;
    }
    rotated_password[i] = Rotate(password[i]);
  }
  if (rotated_password == password) return 0;  // nothing to rotate (no letter or digit)
  // Each form from the same fields; nothing shown may change when only the
  // password does.
  auto same_shown = [](const std::string& built, const std::string& other, const std::string& pw) {
    const Seen first = Parse(built);
    const Seen second = Parse(other);
    FUZZ_CHECK(first.code == second.code && first.shown == second.shown,
               "the password reached what the user is shown\n  url:      %s\n  password: %s\n"
               "  shown:    %s\n  rotated:  %s\n  shown:    %s",
               dlock_fuzz::Show(built).c_str(), dlock_fuzz::Show(pw).c_str(),
               dlock_fuzz::Show(first.shown).c_str(), dlock_fuzz::Show(other).c_str(),
               dlock_fuzz::Show(second.shown).c_str());
  };
  const std::string q = query.empty() ? "" : "?" + query;
  // go-sql-driver's DSN: the password runs to the last '@' before the last
  // '/', whatever it holds. Unless user:password itself reads as scheme://
  // (user mysql, password //x), or starts as a JDBC URL does (user jdbc, in
  // any case): a string that starts so is a URL, whatever follows
  // (ParseUrl), as go-sql-driver's DSN cannot say otherwise.
  // The core's own rule decides what is a server's URL (ServerUrlForm: the
  // driver of mysql+DRIVER:// may hold '_', which no other scheme may);
  // any other scheme:// reads as a URL too (refused with one fixed message).
  auto url_like = [](const std::string& s) {
    if (dlock::ServerUrlForm(s, 0) != dlock::UrlForm::kNone) return true;
    if (s.size() >= 5 && strncasecmp(s.c_str(), "jdbc:", 5) == 0) return true;
    size_t i = 0;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) != 0 || s[i] == '+' ||
                            s[i] == '.' || s[i] == '-'))
      ++i;
    return i > 0 && s.compare(i, 3, "://") == 0;
  };
  if (!url_like(user + ":" + password) && !url_like(user + ":" + rotated_password))
      same_shown(user + ":" + password + "@tcp(" + host + ")/" + database + q,
               user + ":" + rotated_password + "@tcp(" + host + ")/" + database + q, password);
  // In a URL, a ';' followed by a URL's scheme separates servers (a list
  // of several), also inside a password, as documented (write it %3B); the
  // DSN form above is never split, whatever its password holds.
  // The schemes: jdbc:mysql://, jdbc:mariadb://, and mysql:// or mariadb://,
  // either also with a +DRIVER suffix (SQLAlchemy's), in any case.
  auto splits = [](const std::string& pw) {
    for (size_t i = pw.find(';'); i != std::string::npos; i = pw.find(';', i + 1))
      if (dlock::ServerUrlForm(pw, i + 1) != dlock::UrlForm::kNone) return true;
    return false;
  };
  if (splits(password) || splits(rotated_password)) return 0;
  // JDBC, the password as password=: a raw '&' in it starts a parameter of
  // its own (password=a&table=b), which no parser can tell from one.
  if (password.find('&') == std::string::npos)
    same_shown("jdbc:mysql://" + host + "/" + database + "?user=" + user + "&password=" + password +
                   (query.empty() ? "" : "&" + query),
               "jdbc:mysql://" + host + "/" + database + "?user=" + user + "&password=" +
                   rotated_password + (query.empty() ? "" : "&" + query),
               password);
  const size_t at = password.find('@');
  if (at != std::string::npos && password.find_first_of("/?#", at) != std::string::npos) return 0;
  const std::string tail = "@" + host + "/" + database + q;
  same_shown("mysql://" + user + ":" + password + tail, "mysql://" + user + ":" + rotated_password + tail,
             password);
  // JDBC with user:password@ in the authority, read as mysql:// reads it.
  same_shown("jdbc:mariadb://" + user + ":" + password + tail,
             "jdbc:mariadb://" + user + ":" + rotated_password + tail, password);
  return 0;
}
