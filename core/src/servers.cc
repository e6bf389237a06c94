// Several independent servers in one client (a URL of several full URLs
// joined by ';'): splitting such a URL, each server's identity, and the
// rendezvous hash that puts every key on exactly one of them.
#include <strings.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/core.hpp"
#include "options.h"

namespace dlock {

namespace {

// A server's URL starts at one of these (the JDBC prefixes without regard
// to case, as ParseUrl reads them). A ';' elsewhere (in a password, a
// database name, an option value) does not split.
bool StartsServerUrl(const std::string& url, size_t pos) {
  static const char* const kPrefixes[] = {"mysql://", "mariadb://", "jdbc:mysql://",
                                          "jdbc:mariadb://"};
  for (const char* p : kPrefixes) {
    const size_t n = std::char_traits<char>::length(p);
    if (url.size() - pos >= n && strncasecmp(url.c_str() + pos, p, n) == 0) return true;
  }
  return false;
}

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

uint64_t Fnv1a(const std::string& bytes, uint64_t h) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

// SplitMix64's finalizer: FNV-1a's last bytes reach only its low bits well,
// so the state is mixed before scores are compared.
uint64_t Mix(uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z;
}

std::string LowerAscii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

std::string HostPort(const std::string& host, unsigned port) {
  const std::string h = LowerAscii(host);
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
}

}  // namespace

std::vector<std::string> SplitServerUrls(const std::string& url) {
  std::vector<std::string> out;
  // A string that is not a URL (a go-sql-driver DSN) is never a list: its
  // password is raw text, and whether it holds ";mysql://" must not change
  // how the string is read (fuzz_url found that).
  if (!StartsServerUrl(url, 0)) return {url};
  size_t start = 0;
  for (size_t pos = url.find(';'); pos != std::string::npos; pos = url.find(';', pos + 1)) {
    if (!StartsServerUrl(url, pos + 1)) continue;
    out.push_back(url.substr(start, pos - start));
    start = pos + 1;
  }
  out.push_back(url.substr(start));
  return out;
}

uint64_t RendezvousScore(const std::string& server_id, const std::string& key) {
  uint64_t h = Fnv1a(server_id, kFnvOffset);
  h = (h ^ 0u) * kFnvPrime;  // the NUL between the two (neither holds one)
  return Mix(Fnv1a(key, h));
}

size_t RendezvousPick(const std::vector<std::string>& server_ids, const std::string& key) {
  size_t best = 0;
  uint64_t best_score = 0;
  for (size_t i = 0; i < server_ids.size(); ++i) {
    const uint64_t s = RendezvousScore(server_ids[i], key);
    if (i == 0 || s > best_score || (s == best_score && server_ids[i] < server_ids[best])) {
      best = i;
      best_score = s;
    }
  }
  return best;
}

std::string ServerIdentity(const ClientOptions& o) {
  std::string id;
  if (!o.socket.empty()) {
    id = "unix:" + o.socket;
  } else if (o.nodes.empty()) {
    id = HostPort(o.host, o.port);
  } else {
    // The nodes of one cluster, in any order, are one server.
    std::vector<std::string> nodes;
    for (const auto& n : o.nodes) nodes.push_back(HostPort(n.host, n.port));
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    for (const auto& n : nodes) id += (id.empty() ? "" : ",") + n;
  }
  return id + "/" + o.database + "?table=" + o.table + "&row_table=" + o.row_table;
}

Status ParseServer(const std::string& url, const Config& cfg, ClientOptions* out) {
  Status s = ParseUrl(url, out);
  if (!s.ok()) return s;
  for (const auto& kv : cfg.values())
    if (IsClientKey(kv.first) && !(s = ApplyClientOption(kv.first, kv.second, out)).ok()) return s;
  return Status::OK();
}

Status ServerIds(const std::string& url, const Config& cfg, std::vector<std::string>* out) {
  out->clear();
  const std::vector<std::string> urls = SplitServerUrls(url);
  if (urls.size() > kMaxServers)
    return Status::Invalid("URL names " + std::to_string(urls.size()) + " servers; at most " +
                           std::to_string(kMaxServers));
  for (size_t i = 0; i < urls.size(); ++i) {
    ClientOptions o;
    Status s = ParseServer(urls[i], cfg, &o);
    if (!s.ok()) {
      if (urls.size() == 1) return s;
      return Status(s.code(), "server " + std::to_string(i + 1) + " of " +
                                  std::to_string(urls.size()) + " in the URL: " + s.message());
    }
    // Connector/C takes a lone host "localhost" as its default unix socket,
    // port ignored, while other spellings (127.0.0.1:PORT, the bindings'
    // own rewriting) reach the port: one server under two identities, and
    // clients given the same list would place a key differently. Refused.
    if (urls.size() > 1 && o.socket.empty() && o.nodes.empty() && LowerAscii(o.host) == "localhost")
      return Status::Invalid("server " + std::to_string(i + 1) + " of " +
                             std::to_string(urls.size()) +
                             " in the URL: host localhost is the default unix socket whatever the "
                             "port; in a list of servers write 127.0.0.1:PORT, or ?socket=PATH");
    std::string id = ServerIdentity(o);
    for (size_t j = 0; j < out->size(); ++j)
      if ((*out)[j] == id)
        return Status::Invalid("URL: servers " + std::to_string(j + 1) + " and " +
                               std::to_string(i + 1) + " are the same server (" +
                               PrintableText(id) +
                               "): each key must map to one place; list every server once");
    out->push_back(std::move(id));
  }
  return Status::OK();
}

Status KeyServerUrl(const std::string& url, const std::string& key, std::string* out) {
  out->clear();
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  std::vector<std::string> ids;
  if (!(s = ServerIds(url, Config(), &ids)).ok()) return s;
  *out = SplitServerUrls(url)[RendezvousPick(ids, key)];
  return Status::OK();
}

}  // namespace dlock
