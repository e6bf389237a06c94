#include "txn_enders.h"

#include <cctype>

namespace dlock {

namespace {

// Reads a statement as words, skipping blanks and comments: enough to find
// its keyword and the variables a SET assigns, never a parser. An
// executable comment (/*! or /*M!) holds text the server runs; the scanner
// stops there and gives no verdict (the in-transaction flag and the session
// reset after the hold are the real defence; this check is the clear early
// error).
class Scanner {
 public:
  explicit Scanner(const std::string& sql) : s_(sql) {}

  // Skips blanks and comments; false at the end or at an executable comment.
  bool SkipBlanks() {
    for (;;) {
      while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (At("/*")) {
        if (At("/*!") || At("/*M!")) return false;
        size_t e = s_.find("*/", i_ + 2);
        if (e == std::string::npos) return false;
        i_ = e + 2;
      } else if (At("#") || (At("--") && i_ + 2 < s_.size() &&
                             std::isspace(static_cast<unsigned char>(s_[i_ + 2])))) {
        size_t e = s_.find('\n', i_);
        if (e == std::string::npos) return false;
        i_ = e + 1;
      } else {
        return i_ < s_.size();
      }
    }
  }

  // The next word, upper-cased: letters, digits, _ $ @ . and `quoted`
  // parts (without the quotes); "" when the next thing is not a word.
  std::string Word() {
    std::string w;
    if (!SkipBlanks()) return w;
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (std::isalnum(c) || c == '_' || c == '$' || c == '@' || c == '.' || c >= 0x80) {
        w += static_cast<char>(std::toupper(c));
        ++i_;
      } else if (c == '`') {
        size_t e = s_.find('`', i_ + 1);
        if (e == std::string::npos) e = s_.size();
        for (size_t j = i_ + 1; j < e; ++j)
          w += static_cast<char>(std::toupper(static_cast<unsigned char>(s_[j])));
        i_ = e + 1;
      } else {
        break;
      }
    }
    return w;
  }

  // Skips the rest of one item of a list: up to a ',' outside parentheses,
  // strings and comments (true: consumed, another item follows), or the
  // end (false). stop_at_for: a top-level FOR also ends it (SET STATEMENT
  // .. FOR), left unconsumed.
  bool SkipItem(bool stop_at_for, bool* at_for) {
    *at_for = false;
    int depth = 0;
    for (;;) {
      if (!SkipBlanks()) return false;
      const char c = s_[i_];
      if (c == '\'' || c == '"' || c == '`') {
        SkipQuoted(c);
      } else if (c == '(') {
        ++depth;
        ++i_;
      } else if (c == ')') {
        if (depth > 0) --depth;
        ++i_;
      } else if (c == ',' && depth == 0) {
        ++i_;
        return true;
      } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '@') {
        const size_t at = i_;
        if (Word() == "FOR" && stop_at_for && depth == 0) {
          i_ = at;
          *at_for = true;
          return false;
        }
      } else {
        ++i_;
      }
    }
  }

  size_t pos() const { return i_; }
  void set_pos(size_t p) { i_ = p; }
  char Peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void Skip(size_t n) { i_ += n; }

 private:
  bool At(const char* p) const { return s_.compare(i_, std::char_traits<char>::length(p), p) == 0; }
  void SkipQuoted(char q) {
    ++i_;
    while (i_ < s_.size() && s_[i_] != q) i_ += (s_[i_] == '\\' && q != '`') ? 2 : 1;
    ++i_;
  }

  const std::string& s_;
  size_t i_ = 0;
};

// The variable an item of a SET list assigns, without its scope: SESSION x,
// @@session.x, @@x -> X. User variables keep their @.
std::string AssignedVariable(Scanner* sc) {
  std::string w = sc->Word();
  if (w == "GLOBAL" || w == "SESSION" || w == "LOCAL") w = sc->Word();
  for (const char* p : {"@@GLOBAL.", "@@SESSION.", "@@LOCAL.", "@@"}) {
    const std::string prefix(p);
    if (w.compare(0, prefix.size(), prefix) == 0) return w.substr(prefix.size());
  }
  return w;
}

const char* SetEndsTransaction(Scanner* sc, const std::string& sql);

const char* Statement(const std::string& sql) {
  Scanner sc(sql);
  for (;;) {  // "(COMMIT)": parentheses around a statement
    if (!sc.SkipBlanks()) return nullptr;
    if (sc.Peek() != '(') break;
    sc.Skip(1);
  }
  const std::string w = sc.Word();
  static const char* const kEnding[] = {
      "COMMIT", "ROLLBACK", "BEGIN",  "START",  "XA",      "LOCK",     "UNLOCK",  "CREATE",
      "ALTER",  "DROP",     "RENAME", "TRUNCATE", "GRANT", "REVOKE",   "ANALYZE", "OPTIMIZE",
      "REPAIR", "FLUSH",    "INSTALL", "UNINSTALL", "SHUTDOWN", "RESET", "PURGE", "CHANGE",
      "BACKUP"};
  for (const char* k : kEnding) {
    if (w != k) continue;
    const std::string next = sc.Word();
    if (w == "ROLLBACK" && (next == "TO" || (next == "WORK" && sc.Word() == "TO")))
      return nullptr;  // to a savepoint: the transaction goes on
    if ((w == "CREATE" || w == "DROP") && next == "TEMPORARY") return nullptr;
    return k;
  }
  if (w == "SET") return SetEndsTransaction(&sc, sql);
  return nullptr;
}

// Every assignment of a SET is checked, not only the first: SET
// sql_mode=DEFAULT, autocommit=0 sets autocommit too. SET STATEMENT ..
// FOR s is judged by s (and its assignments).
const char* SetEndsTransaction(Scanner* sc, const std::string& sql) {
  const size_t start = sc->pos();
  const bool statement = sc->Word() == "STATEMENT";
  if (!statement) sc->set_pos(start);
  for (;;) {
    if (AssignedVariable(sc) == "AUTOCOMMIT") return "SET autocommit";
    bool at_for = false;
    if (sc->SkipItem(statement, &at_for)) continue;
    if (!at_for) return nullptr;
    sc->Word();  // FOR
    return Statement(sql.substr(sc->pos()));
  }
}

}  // namespace

const char* TxnEndingStatement(const std::string& sql) { return Statement(sql); }

}  // namespace dlock
