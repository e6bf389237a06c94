// core_unit: the core's tables of options, counters and result codes (each
// fact defined once) against the C header's lists, and the promises each
// option row makes (range, words, default), checked through Config::Set. No
// database.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "counter_table.h"
#include "dlock/core.hpp"
#include "dlock/dlock.h"
#include "options.h"

using dlock::Code;
using dlock::Config;
using dlock::OptionInfo;
using dlock::OptionKind;
using dlock::OptionRule;
using dlock::Status;

namespace {

std::vector<std::string> HeaderLines() {
  std::ifstream in(DLOCK_C_HEADER);
  REQUIRE_MESSAGE(in.good(), "cannot read ", DLOCK_C_HEADER);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs of blanks become one space; no blanks at either end.
std::string Squeeze(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

size_t Find(const std::vector<std::string>& lines, const std::string& what, size_t from = 0) {
  for (size_t i = from; i < lines.size(); ++i)
    if (lines[i].find(what) != std::string::npos) return i;
  FAIL("dlock.h has no line with '", what, "'");
  return lines.size();
}

struct Entry {
  std::string section;  // "client" / "lock" for options
  std::string name;
  std::string text;     // its lines joined, blanks squeezed
};

// The entries of a list in a comment, lines [from, to): " *" + exactly
// `indent` spaces + a name starts one; a line indented deeper continues it;
// " *   client (" / " *   lock (" start a section.
std::vector<Entry> ListIn(const std::vector<std::string>& lines, size_t from, size_t to,
                          size_t indent) {
  const std::regex entry(" \\*" + std::string(indent, ' ') + "([a-z_]+) +(.*)");
  const std::regex more(" \\*" + std::string(indent + 1, ' ') + " *(\\S.*)");
  const std::regex section(" \\*   (client|lock) \\(.*");
  std::vector<Entry> out;
  std::string current;
  std::smatch m;
  for (size_t i = from; i < to; ++i) {
    if (std::regex_match(lines[i], m, section)) {
      current = m[1];
    } else if (std::regex_match(lines[i], m, entry)) {
      out.push_back({current, m[1], Squeeze(m[2])});
    } else if (!out.empty() && std::regex_match(lines[i], m, more)) {
      out.back().text = Squeeze(out.back().text + " " + std::string(m[1]));
    }
  }
  return out;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<const OptionInfo*> AllOptions() {
  size_t n = 0;
  const OptionInfo* options = dlock::Options(&n);
  std::vector<const OptionInfo*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(&options[i]);
  return out;
}

std::string Words(const OptionInfo& o, const char* sep) {
  std::string out;
  for (size_t i = 0; o.words[i] != nullptr; ++i)
    out += (i > 0 ? sep : "") + std::string(o.words[i]);
  return out;
}

}  // namespace

TEST_CASE("dlock.h lists every option of the core's table, as the table has it") {
  const std::vector<std::string> lines = HeaderLines();
  const size_t end = Find(lines, "DLOCK_EXPORT int dlock_config_set(");
  size_t begin = end;
  while (begin > 0 && !Has(lines[begin], "/* Sets key to value")) --begin;
  const std::vector<Entry> listed = ListIn(lines, begin, end, 5);

  const std::vector<const OptionInfo*> options = AllOptions();
  REQUIRE(listed.size() == options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    const OptionInfo& o = *options[i];
    const Entry& e = listed[i];
    INFO("option ", o.name, " in dlock.h: '", e.text, "'");
    CHECK(e.name == o.name);
    CHECK(e.section == (o.kind == OptionKind::kClient ? "client" : "lock"));
    CHECK(StartsWith(e.text, Squeeze(o.doc)));
    const std::string range = std::to_string(o.min) + ".." + std::to_string(o.max);
    switch (o.rule) {
      case OptionRule::kInt: CHECK(Has(e.text, range)); break;
      case OptionRule::kKeyPrefix: CHECK(Has(e.text, range + " bytes")); break;
      case OptionRule::kBool: CHECK(Has(e.text, "0|1")); break;
      case OptionRule::kWords: CHECK(Has(e.text, Words(o, "|"))); break;
      case OptionRule::kTable:
      case OptionRule::kText: break;
    }
    const std::string def = dlock::OptionDefault(o);
    if (!def.empty()) CHECK(Has(e.text, "default " + def));
  }
  CHECK(std::string(DLOCK_MODE_LEASE) == dlock::kLockModeWords[0]);
  CHECK(std::string(DLOCK_MODE_ROW) == dlock::kLockModeWords[1]);
}

TEST_CASE("Every option row: its default, range and words hold in Config::Set") {
  // The defaults before the table existed: a row that changes one is seen.
  const std::map<std::string, std::string> kDefaults = {
      {"socket", ""},           {"pool", "8"},           {"pool_idle_ms", "60000"},
      {"connect_timeout", "5"}, {"read_timeout", "30"},
      {"table", "distributed_lock"}, {"row_table", "fixed_lock"}, {"dialect", "auto"},
      {"ssl_mode", "disable"},  {"ssl_ca", ""},
      {"cleanup_interval_ms", "0"}, {"cleanup_grace_ms", "3600000"},
      {"cleanup_batch", "1000"}, {"events", "1024"},
      {"mode", "lease"},        {"ttl_ms", "30000"},
      {"auto_renew", "0"},      {"max_hold_ms", "300000"},
      {"reentrant", "1"},       {"holder", "thread"},
      {"shards", "0"},          {"shard_group", "dlock-shard"},
      {"transaction", "0"},     {"wakeup", "auto"},
      {"fair", "1"}};
  const std::vector<const OptionInfo*> options = AllOptions();
  CHECK(options.size() == kDefaults.size());
  for (const OptionInfo* option : options) {
    const OptionInfo& o = *option;
    const std::string name = o.name;
    INFO("option ", name);
    CHECK(dlock::FindOption(name) == &o);
    CHECK(dlock::IsClientKey(name) == (o.kind == OptionKind::kClient));
    CHECK(dlock::IsLockKey(name) == (o.kind == OptionKind::kLock));
    REQUIRE(kDefaults.count(name) == 1);
    CHECK(dlock::OptionDefault(o) == kDefaults.at(name));
    CHECK(std::string(o.doc).find('\n') == std::string::npos);

    Config cfg;
    auto good = [&](const std::string& v) {
      Status s = cfg.Set(name, v);
      CHECK_MESSAGE(s.ok(), "'", v, "': ", s.message());
    };
    // A rejected value: the message names the option and what is allowed.
    auto bad = [&](const std::string& v, const std::string& allowed) {
      Status s = cfg.Set(name, v);
      INFO("value '", v, "': ", s.message());
      CHECK(s.code() == Code::kInvalid);
      CHECK(Has(s.message(), name));
      CHECK(Has(s.message(), allowed));
    };
    if (!kDefaults.at(name).empty() || o.rule == OptionRule::kText) good(kDefaults.at(name));
    switch (o.rule) {
      case OptionRule::kInt: {
        const std::string range =
            "allowed " + std::to_string(o.min) + ".." + std::to_string(o.max);
        good(std::to_string(o.min));
        good(std::to_string(o.max));
        bad(std::to_string(o.min - 1), range);
        bad(std::to_string(o.max + 1), range);
        bad("x1", range);
        break;
      }
      case OptionRule::kBool:
        for (const char* v : {"0", "1", "true", "false", "on", "off", "yes", "no"}) good(v);
        bad("2", "0/1");
        break;
      case OptionRule::kWords:
        for (size_t i = 0; o.words[i] != nullptr; ++i) good(o.words[i]);
        bad("bogus", "'bogus'");
        bad("bogus", std::string("'") + o.words[0] + "'");
        break;
      case OptionRule::kTable:
        good("t_1");
        bad("a-b", "table name");
        break;
      case OptionRule::kKeyPrefix:
        good(std::string(static_cast<size_t>(o.max), 'g'));
        bad(std::string(static_cast<size_t>(o.max) + 1, 'g'), std::to_string(o.max));
        bad("", "empty");
        break;
      case OptionRule::kText:
        good("/any/thing");
        break;
    }
  }
}

TEST_CASE("dlock.h lists every counter of the core's table, in order, with its line") {
  const std::vector<std::string> lines = HeaderLines();
  const size_t end = Find(lines, "DLOCK_EXPORT int dlock_client_counter(");
  size_t begin = end;
  while (begin > 0 && !Has(lines[begin], "/* Reads a counter by name")) --begin;
  const std::vector<Entry> listed = ListIn(lines, begin, end, 3);

  struct Row {
    const char* name;
    const char* doc;
  };
  const std::vector<Row> rows = {
#define DLOCK_COUNTER_ROW(name, doc) {#name, doc},
#define DLOCK_POOL_COUNTER_ROW(name, read, doc) {#name, doc},
      DLOCK_COUNTERS(DLOCK_COUNTER_ROW) DLOCK_POOL_COUNTERS(DLOCK_POOL_COUNTER_ROW)
#undef DLOCK_COUNTER_ROW
#undef DLOCK_POOL_COUNTER_ROW
  };
  REQUIRE(listed.size() == rows.size());
  const char* const* names = dlock::Client::CounterNames();
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO("counter ", rows[i].name);
    CHECK(listed[i].name == rows[i].name);
    CHECK(listed[i].text == Squeeze(rows[i].doc));
    REQUIRE(names[i] != nullptr);
    CHECK(std::string(names[i]) == rows[i].name);
  }
  CHECK(names[rows.size()] == nullptr);
}

TEST_CASE("dlock.h's dlock_code is the core's code table: names, values, comments") {
  const std::vector<std::string> lines = HeaderLines();
  const size_t begin = Find(lines, "typedef enum dlock_code {");
  const size_t end = Find(lines, "} dlock_code;", begin);
  const std::regex entry(" *(DLOCK_\\w+) = (-?\\d+),? *(/\\*(.*))?");
  struct Listed {
    std::string name;
    int value;
    std::string comment;
  };
  std::vector<Listed> listed;
  bool open = false;  // a comment continues on the next line
  std::smatch m;
  for (size_t i = begin + 1; i < end; ++i) {
    std::string text;
    if (std::regex_match(lines[i], m, entry)) {
      listed.push_back({m[1], std::stoi(m[2]), ""});
      text = m[4];
    } else if (open) {
      text = lines[i];
    } else {
      continue;
    }
    const size_t close = text.find("*/");
    open = close == std::string::npos;
    listed.back().comment = Squeeze(listed.back().comment + " " + text.substr(0, close));
    if (!listed.back().comment.empty() && listed.back().comment[0] == ' ')
      listed.back().comment.erase(0, 1);
  }
  size_t n = 0;
  const dlock::CodeInfo* codes = dlock::Codes(&n);
  REQUIRE(listed.size() == n);
  for (size_t i = 0; i < n; ++i) {
    INFO("code ", codes[i].name);
    CHECK(listed[i].name == codes[i].name);
    CHECK(listed[i].value == codes[i].value);
    CHECK(listed[i].comment == Squeeze(codes[i].doc));
    CHECK(std::string(dlock::CodeName(codes[i].value)) == codes[i].name);
  }
}
