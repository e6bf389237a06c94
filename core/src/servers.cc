// Several independent servers in one client (a URL of several full URLs
// joined by ';'): splitting such a URL, each server's identity, and the
// rendezvous hash that puts every key on exactly one of them.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/core.hpp"
#include "options.h"

namespace dlock {

namespace {

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
  // A server's URL starts at one of the forms ServerUrlForm knows (without
  // regard to case, as ParseUrl reads them); a ';' elsewhere (in a password,
  // a database name, an option value) does not split.
  if (ServerUrlForm(url, 0) == UrlForm::kNone) return {url};
  size_t start = 0;
  for (size_t pos = url.find(';'); pos != std::string::npos; pos = url.find(';', pos + 1)) {
    if (ServerUrlForm(url, pos + 1) == UrlForm::kNone) continue;
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

Status ServerError(size_t i, size_t n, const std::string& id, const Status& s) {
  return Status(s.code(),
                "server " + std::to_string(i + 1) + " of " + std::to_string(n) +
                    (id.empty() ? " in the URL" : " (" + PrintableText(id) + ")") + ": " +
                    s.message(),
                s.server_errno());
}

namespace {

// One server's URL with cfg's client options applied (they win), as a
// client opens it.
Status ParseServer(const std::string& url, const Config& cfg, ClientOptions* out) {
  Status s = ParseUrl(url, out);
  if (!s.ok()) return s;
  for (const auto& kv : cfg.values())
    if (IsClientKey(kv.first) && !(s = ApplyClientOption(kv.first, kv.second, out)).ok()) return s;
  return Status::OK();
}

// The options every server of one client must agree on: a client over
// several servers has one event queue, sized by events (the others, pool,
// timeouts, tables, TLS, cleanup, are each server's own).
Status CheckClientWide(const std::vector<ServerSpec>& servers) {
  const ClientOptions& first = servers.front().options;
  for (size_t i = 1; i < servers.size(); ++i)
    if (servers[i].options.events != first.events)
      return ServerError(
          i, servers.size(), "",
          Status::Invalid("events=" + std::to_string(servers[i].options.events) +
                          ", but server 1 has events=" + std::to_string(first.events) +
                          ": a client over several servers has one event queue; give every "
                          "server the same events=, or set events once in the client's options"));
  return Status::OK();
}

}  // namespace

Status ParseServers(const std::string& url, const Config& cfg, std::vector<ServerSpec>* out) {
  out->clear();
  std::vector<std::string> urls = SplitServerUrls(url);
  const size_t n = urls.size();
  if (n > kMaxServers)
    return Status::Invalid("URL names " + std::to_string(n) + " servers; at most " +
                           std::to_string(kMaxServers));
  std::vector<ServerSpec> servers(n);
  for (size_t i = 0; i < n; ++i) {
    ServerSpec& one = servers[i];
    one.url = std::move(urls[i]);
    Status s = ParseServer(one.url, cfg, &one.options);
    if (!s.ok()) return n == 1 ? s : ServerError(i, n, "", s);
    // localhost:PORT was read as 127.0.0.1:PORT (ParseUrl); a host still
    // "localhost" is the port-less one, Connector/C's default unix socket:
    // most often the server that 127.0.0.1:3306 also reaches, under another
    // identity, and clients given the two spellings would place a key
    // differently. Refused.
    const ClientOptions& o = one.options;
    if (n > 1 && o.socket.empty() && o.nodes.empty() && LowerAscii(o.host) == "localhost")
      return ServerError(i, n, "",
                         Status::Invalid("host localhost without a port is the default unix "
                                         "socket; in a list of servers write localhost:PORT or "
                                         "127.0.0.1:PORT (TCP), or ?socket=PATH"));
    one.id = ServerIdentity(o);
    for (size_t j = 0; j < i; ++j)
      if (servers[j].id == one.id)
        return Status::Invalid("URL: servers " + std::to_string(j + 1) + " and " +
                               std::to_string(i + 1) + " are the same server (" +
                               PrintableText(one.id) +
                               "): each key must map to one place; list every server once");
  }
  if (n > 1) {
    Status s = CheckClientWide(servers);
    if (!s.ok()) return s;
  }
  *out = std::move(servers);
  return Status::OK();
}

Status ServerIds(const std::string& url, const Config& cfg, std::vector<std::string>* out) {
  out->clear();
  std::vector<ServerSpec> servers;
  Status s = ParseServers(url, cfg, &servers);
  if (!s.ok()) return s;
  for (auto& one : servers) out->push_back(std::move(one.id));
  return Status::OK();
}

Status KeyServerUrl(const std::string& url, const Config& cfg, const std::string& key,
                    std::string* out) {
  out->clear();
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  std::vector<ServerSpec> servers;
  if (!(s = ParseServers(url, cfg, &servers)).ok()) return s;
  std::vector<std::string> ids;
  for (const auto& one : servers) ids.push_back(one.id);
  *out = std::move(servers[RendezvousPick(ids, key)].url);
  return Status::OK();
}

}  // namespace dlock
