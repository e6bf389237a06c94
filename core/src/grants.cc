// Reading SHOW GRANTS lines (MariaDB's spelling) without a server.
#include "grants.h"

#include <cctype>

namespace dlock {

namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// SQL LIKE-style match of a grant's database pattern (% _ and \ escapes).
bool DbPatternMatches(const std::string& pat, size_t pi, const std::string& s, size_t si) {
  while (pi < pat.size()) {
    char c = pat[pi];
    if (c == '%') {
      for (size_t k = si; k <= s.size(); ++k)
        if (DbPatternMatches(pat, pi + 1, s, k)) return true;
      return false;
    }
    if (si >= s.size()) return false;
    if (c == '\\' && pi + 1 < pat.size()) {
      if (pat[pi + 1] != s[si]) return false;
      pi += 2;
    } else {
      if (c != '_' && c != s[si]) return false;
      ++pi;
    }
    ++si;
  }
  return si == s.size();
}

// Reads one `quoted` or bare identifier at pos.
std::string ReadIdent(const std::string& s, size_t* pos) {
  std::string out;
  if (*pos < s.size() && s[*pos] == '`') {
    ++*pos;
    while (*pos < s.size()) {
      if (s[*pos] == '`') {
        if (*pos + 1 < s.size() && s[*pos + 1] == '`') {
          out.push_back('`');
          *pos += 2;
          continue;
        }
        ++*pos;
        break;
      }
      out.push_back(s[(*pos)++]);
    }
  } else {
    while (*pos < s.size() && s[*pos] != '.' && s[*pos] != ' ') out.push_back(s[(*pos)++]);
  }
  return out;
}

// Does a grant's object ("*.*", "`db`.*", "`db`.`t`", "TABLE ...") cover db.table?
bool Covers(std::string object, const std::string& db, const std::string& table) {
  if (object.compare(0, 6, "TABLE ") == 0) object = object.substr(6);
  if (object == "*.*") return true;
  size_t pos = 0;
  std::string gdb = ReadIdent(object, &pos);
  if (pos >= object.size() || object[pos] != '.') return false;
  ++pos;
  if (object.substr(pos) == "*") return DbPatternMatches(gdb, 0, db, 0);
  return gdb == db && ReadIdent(object, &pos) == table;
}

// "SELECT, INSERT (a, b), UPDATE": the privileges, column lists skipped
// (a column grant is not a table privilege).
void AddPrivileges(const std::string& list, std::set<std::string>* out) {
  std::string cur;
  int depth = 0;
  bool columns = false;
  auto flush = [&] {
    size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
    if (b != std::string::npos && !columns) out->insert(Upper(cur.substr(b, e - b + 1)));
    cur.clear();
    columns = false;
  };
  for (char c : list) {
    if (c == '(') {
      ++depth;
      columns = true;
    } else if (c == ')') {
      --depth;
    } else if (c == ',' && depth == 0) {
      flush();
    } else if (depth == 0) {
      cur.push_back(c);
    }
  }
  flush();
}

}  // namespace

std::set<std::string> PrivilegesOn(const std::vector<std::string>& grants, const std::string& db,
                                   const std::string& table) {
  std::set<std::string> out;
  for (const std::string& g : grants) {
    if (g.compare(0, 6, "GRANT ") != 0) continue;
    size_t on = g.find(" ON ");
    size_t to = g.find(" TO ", on == std::string::npos ? 0 : on);
    if (on == std::string::npos || to == std::string::npos) continue;  // a role grant
    const std::string object = g.substr(on + 4, to - on - 4);
    if (object.compare(0, 9, "FUNCTION ") == 0 || object.compare(0, 10, "PROCEDURE ") == 0 ||
        object.compare(0, 8, "PACKAGE ") == 0)
      continue;
    if (Covers(object, db, table)) AddPrivileges(g.substr(6, on - 6), &out);
  }
  return out;
}

bool HasPrivilege(const std::set<std::string>& p, const std::string& priv) {
  return p.count("ALL PRIVILEGES") > 0 || p.count("ALL") > 0 || p.count(priv) > 0;
}

}  // namespace dlock
