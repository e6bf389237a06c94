// The operator's view of dlock's tables: what the `dlock` command's list,
// release --force, init and doctor need, as part of the core's public C++
// face (no caller writes SQL of its own or reaches into core/src). Not for
// taking locks: that is dlock::Client and dlock::Lock (core.hpp).
#ifndef DLOCK_ADMIN_HPP_
#define DLOCK_ADMIN_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlock/core.hpp"

namespace dlock {

// A lease row as the operator sees it, timed by the database's clock.
struct LeaseInfo {
  std::string key;    // the lock name, bytes
  std::string owner;  // host:pid:uuid of the holder; "" once revoked
  std::string host;   // parsed from owner; "" when owner is not in dlock's form
  int64_t pid = 0;    // parsed from owner; 0 when unknown
  uint64_t token = 0;
  bool revoked = false;        // freed by Revoke: nobody may take it until it expires
  int64_t held_for_us = 0;     // since the holder acquired it
  int64_t expires_in_us = 0;   // until another owner may take it
};

// The lock tables by name, and the statements that create them.
struct SchemaSql {
  std::string lease_table, fence_table, row_table;
  std::string claim_table;  // used on a Galera node only (fair=1's claim order)
  std::vector<std::string> statements;  // CREATE TABLE IF NOT EXISTS ..., then the seed row
};

// Table names from url's query (table=, row_table=), or the defaults for an
// empty url. Needs no server.
Status DescribeSchema(const std::string& url, SchemaSql* out);

// url with the password taken out of it (mysql://user@host/db?...,
// user@tcp(host)/db?... for a DSN, a JDBC URL without user:password@'s
// password and without password=), in the form it came in, to pass on where a password must not go (a job's environment). kInvalid, and *out
// empty, when url does not parse.
Status UrlWithoutPassword(const std::string& url, std::string* out);

// With a URL naming several servers (core.hpp, SplitServerUrls), the URL of
// the one key lives on (its own URL for a URL naming one): an Admin opens
// one server, so the operator's calls about one key go there. cfg: the
// options the clients are opened with (Client::Open), whose table= and
// row_table= are part of each server's identity, so the key's server is the
// one those clients pick. *out is that server's URL as written: cfg's
// table= / row_table= are not added to it, so a caller that opened its
// clients with other tables than the URL names must name them again to
// whatever reads the key's row there. kInvalid as ServerIds.
Status KeyServerUrl(const std::string& url, const Config& cfg, const std::string& key,
                    std::string* out);

// What `dlock doctor` reports, gathered by Admin. Facts only: what to make of
// them is the caller's.
struct ServerFacts {
  std::string version;  // "10.11.6-MariaDB-0+deb12u1"
  bool mariadb = false;
  std::string dialect;  // the statements dlock sends it: "mariadb", "mysql"
  bool read_only = false;
  bool galera = false;
  // Galera: "" when the node can take locks, else why not (not ready, not
  // in the primary component, not Synced); and the cluster's size.
  std::string galera_unhealthy;
  int cluster_size = 0;
  // The URL's (or default) read timeout and the node dlock connected to
  // (with a multi-host URL, the first healthy one).
  int read_timeout_s = 0;
  std::string node;
};

struct TableCheck {
  std::string name;
  bool exists = false;
  std::string problem;  // "" = the columns dlock needs are there
};

struct GrantCheck {
  // "INSERT on distributed_lock", one per privilege the current user lacks
  // on the lock tables (CREATE too when a table is missing).
  std::vector<std::string> missing;
  bool via_roles = false;  // SHOW GRANTS lists roles, which may grant more
};

struct ClockCheck {
  double offset_s = 0;  // this host's clock minus the server's
  double round_trip_s = 0;
};

struct LeaseCounts {
  int64_t rows = 0, held = 0, expired_over_1h = 0;
};

// One connection of the operator's own, made with the same URL rules and
// session setup as a client's, but creating nothing: opening it checks and
// changes no table. Not thread-safe: one caller at a time.
class AdminImpl;
class Admin {
 public:
  // kInvalid for a bad URL (also one naming several servers: open one Admin
  // per server, SplitServerUrls), kConnect when the server cannot be
  // reached or refuses the user.
  static Status Open(const std::string& url, std::unique_ptr<Admin>* out);
  ~Admin();
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;

  // "host:port/db" (or the socket): safe to print, no user or password.
  std::string where() const;
  std::string user() const;  // "" = the connector's default
  const std::string& database() const;
  const std::string& lease_table() const;
  const std::string& row_table() const;

  // The leases held now (and those revoked but not yet free), keys starting
  // with prefix, in key order. *table_exists false (and OK) when the lease
  // table is not there yet.
  Status ListLeases(const std::string& prefix, std::vector<LeaseInfo>* out, bool* table_exists);
  // The lease of one key: *held false when nobody holds it.
  Status GetLease(const std::string& key, LeaseInfo* out, bool* held);
  // Takes a lease away from its holder, leaving a lock-delay: the row keeps
  // its expiry (no other owner can take the key before the revoked lease
  // would have ended) but loses its owner, so the holder's next renewal
  // fails and it finds the lock lost. The key's fencing counter is kept.
  // *out: what was revoked; *was_held false (and nothing changed) when the
  // key was not held.
  Status Revoke(const std::string& key, LeaseInfo* out, bool* was_held);

  // Creates the missing lock tables and checks the columns of those that
  // exist, as a client does on open. Idempotent.
  Status CreateSchema();

  const ServerFacts& facts() const;
  // One entry per lock table, in SchemaSql's order.
  Status CheckSchema(std::vector<TableCheck>* out);
  // The current user's privileges on the lock tables, from SHOW GRANTS.
  // need_create: a table is missing, so CREATE is needed too.
  Status CheckGrants(bool need_create, GrantCheck* out);
  Status CheckClock(ClockCheck* out);
  Status CountLeases(LeaseCounts* out);

 private:
  explicit Admin(std::unique_ptr<AdminImpl> impl);
  std::unique_ptr<AdminImpl> impl_;
};

}  // namespace dlock

#endif  // DLOCK_ADMIN_HPP_
