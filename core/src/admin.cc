// The operator's view of the lock tables (dlock/admin.hpp): listing and
// revoking leases, creating and checking the schema, and the server facts
// `dlock doctor` reports. Its statements are the dialect's (dialect.cc,
// AdminSql): the lease scheme's rows seen from outside.
#include "dlock/admin.hpp"

#include <mysqld_error.h>
#include <sys/time.h>

#include <cstdlib>

#include "client_impl.h"
#include "conn.h"
#include "grants.h"
#include "options.h"

namespace dlock {

namespace {

int64_t ToInt(const std::optional<std::string>& v) {
  return v ? std::strtoll(v->c_str(), nullptr, 10) : 0;
}

// LIKE pattern matching the keys that start with prefix.
std::string PrefixPattern(const std::string& prefix) {
  std::string p;
  for (char c : prefix) {
    if (c == '%' || c == '_' || c == '\\') p.push_back('\\');
    p.push_back(c);
  }
  return p + "%";
}

// An owner id is host:pid:uuid (ClientImpl::NewOwner); the host is what is
// left of the two last fields, so a host name with a ':' still reads right.
void SplitOwner(LeaseInfo* l) {
  l->host.clear();
  l->pid = 0;
  size_t u = l->owner.rfind(':');
  if (u == std::string::npos || u == 0) return;
  size_t p = l->owner.rfind(':', u - 1);
  if (p == std::string::npos) return;
  const std::string pid = l->owner.substr(p + 1, u - p - 1);
  if (pid.empty() || pid.size() > 10 || pid.find_first_not_of("0123456789") != std::string::npos)
    return;
  l->pid = std::strtoll(pid.c_str(), nullptr, 10);
  l->host = l->owner.substr(0, p);
}

// A lease read (AdminSql): key, owner, fence, held us, remaining us.
LeaseInfo ReadLease(const Row& row) {
  LeaseInfo l;
  l.key = row[0].value_or("");
  l.owner = row[1].value_or("");
  l.token = std::strtoull(row[2].value_or("0").c_str(), nullptr, 10);
  l.held_for_us = ToInt(row[3]);
  l.expires_in_us = ToInt(row[4]);
  l.revoked = l.owner.empty();
  SplitOwner(&l);
  return l;
}

}  // namespace

class AdminImpl {
 public:
  ClientOptions opts;
  std::unique_ptr<Conn> conn;
  ServerFacts facts;  // read once, on connecting
  Statements sql;     // in the server's dialect, built on connecting
  // A statement that failed half-way through a transaction leaves none open.
  Status Abandon(Status s) {
    if (!conn->broken()) (void)conn->Query("ROLLBACK");
    return s;
  }
};

Status DescribeSchema(const std::string& url, SchemaSql* out) {
  ClientOptions o;
  if (!url.empty()) {
    Status s = ParseUrl(url, &o);
    if (!s.ok()) return s;
  }
  out->lease_table = o.table;
  out->fence_table = o.table + "_fence";
  out->row_table = o.row_table;
  out->claim_table = o.table + "_claim";
  out->statements.clear();
  const Statements sql = OfflineStatements(o);
  for (const SchemaTable& t : sql.schema.tables) out->statements.push_back(t.ddl);
  out->statements.push_back(sql.schema.seed);
  return Status::OK();
}

Status UrlWithoutPassword(const std::string& url, std::string* out) {
  return UrlWithoutPasswordText(url, out);
}

Admin::Admin(std::unique_ptr<AdminImpl> impl) : impl_(std::move(impl)) {}
Admin::~Admin() = default;

Status Admin::Open(const std::string& url, std::unique_ptr<Admin>* out) {
  auto impl = std::make_unique<AdminImpl>();
  Status s = ParseUrl(url, &impl->opts);
  if (!s.ok()) return s;
  s = Conn::Connect(impl->opts, &impl->conn);
  if (!s.ok()) return s;
  const ServerInfo& info = impl->conn->server();
  impl->facts.version = info.version;
  impl->facts.mariadb = info.mariadb;
  impl->facts.dialect = info.dialect->name;
  impl->sql = info.dialect->build(impl->opts, info.mariadb);
  impl->facts.read_only = info.read_only;
  impl->facts.galera = info.galera;
  impl->facts.galera_unhealthy = info.galera ? info.unhealthy : "";
  impl->facts.cluster_size = info.cluster_size;
  impl->facts.read_timeout_s = impl->opts.read_timeout_s;
  impl->facts.node = impl->conn->where();
  out->reset(new Admin(std::move(impl)));
  return Status::OK();
}

// The node connected to (with a multi-host URL, the first healthy one).
std::string Admin::where() const { return impl_->conn ? impl_->conn->where() : impl_->opts.Where(); }
std::string Admin::user() const { return impl_->opts.user; }
const std::string& Admin::database() const { return impl_->opts.database; }
const std::string& Admin::lease_table() const { return impl_->opts.table; }
const std::string& Admin::row_table() const { return impl_->opts.row_table; }

const ServerFacts& Admin::facts() const { return impl_->facts; }

Status Admin::ListLeases(const std::string& prefix, std::vector<LeaseInfo>* out,
                         bool* table_exists) {
  out->clear();
  *table_exists = true;
  // Held leases, and revoked ones until they free (their expiry stands).
  ExecResult r;
  Status s = impl_->conn->Exec(impl_->sql.admin.list, {Param::Bytes(PrefixPattern(prefix))}, &r);
  if (s.server_errno() == ER_NO_SUCH_TABLE) {
    *table_exists = false;
    return Status::OK();
  }
  if (!s.ok()) return s;
  for (const Row& row : r.rows) out->push_back(ReadLease(row));
  return Status::OK();
}

Status Admin::GetLease(const std::string& key, LeaseInfo* out, bool* held) {
  *held = false;
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  ExecResult r;
  s = impl_->conn->Exec(impl_->sql.admin.get, {Param::Bytes(key)}, &r);
  if (!s.ok()) return s;
  if (r.rows.empty()) return Status::OK();
  *out = ReadLease(r.rows[0]);
  *held = !out->revoked;
  return Status::OK();
}

Status Admin::Revoke(const std::string& key, LeaseInfo* out, bool* was_held) {
  *was_held = false;
  Status s = ValidateKey(key);
  if (!s.ok()) return s;
  Conn& c = *impl_->conn;
  ExecResult r;
  // Read and revoke in one transaction, so that what is reported is exactly
  // what was revoked.
  s = c.Query("START TRANSACTION");
  if (s.ok())
    s = c.Exec(impl_->sql.admin.lock, {Param::Bytes(key)}, &r);
  if (!s.ok()) return impl_->Abandon(s);
  if (r.rows.empty()) return impl_->Abandon(Status::OK());
  *out = ReadLease(r.rows[0]);
  if (out->revoked || out->expires_in_us < 0) return impl_->Abandon(Status::OK());
  // The owner goes (the holder's next renewal fails), the expiry stays: the
  // lock-delay that lets the holder stop before another owner can start.
  s = c.Exec(impl_->sql.admin.revoke, {Param::Bytes(key), Param::Bytes(out->owner)}, &r);
  if (s.ok()) s = c.Query("COMMIT");
  if (!s.ok()) return impl_->Abandon(s);
  *was_held = true;
  return Status::OK();
}

Status Admin::CreateSchema() { return EnsureTables(*impl_->conn, impl_->sql.schema, impl_->opts); }

Status Admin::CheckSchema(std::vector<TableCheck>* out) {
  out->clear();
  for (const SchemaTable& t : impl_->sql.schema.tables) {
    if (t.galera_only && !impl_->conn->server().galera) continue;
    TableCheck tc;
    tc.name = t.name;
    Status s = CheckTableColumns(*impl_->conn, impl_->sql.schema, t.name, t.cols);
    tc.exists = s.code() != Code::kState;
    if (s.code() == Code::kDb && s.server_errno() == 0) {
      tc.problem = s.message();  // a column dlock needs is missing or of another type
    } else if (!s.ok() && s.code() != Code::kState) {
      return s;  // the check itself failed
    }
    out->push_back(std::move(tc));
  }
  return Status::OK();
}

Status Admin::CheckGrants(bool need_create, GrantCheck* out) {
  *out = GrantCheck();
  ExecResult r;
  Status s = impl_->conn->Exec(impl_->sql.admin.grants, {}, &r, false);
  if (!s.ok()) return s;
  std::vector<std::string> grants;
  for (const Row& row : r.rows) {
    if (!row[0]) continue;
    grants.push_back(*row[0]);
    if (row[0]->find(" ON ") == std::string::npos) out->via_roles = true;  // GRANT role TO user
  }
  const ClientOptions& o = impl_->opts;
  // What the client's open checks (schema.cc), so doctor and open agree.
  for (const SchemaTable& tb : impl_->sql.schema.tables) {
    if (tb.galera_only && !impl_->conn->server().galera) continue;
    const auto have = PrivilegesOn(grants, o.database, tb.name);
    for (const char* p : tb.privileges)
      if (!HasPrivilege(have, p)) out->missing.push_back(std::string(p) + " on " + tb.name);
    if (need_create && !HasPrivilege(have, "CREATE")) out->missing.push_back("CREATE on " + tb.name);
  }
  return Status::OK();
}

Status Admin::CheckClock(ClockCheck* out) {
  struct timeval before, after;
  ExecResult r;
  gettimeofday(&before, nullptr);
  Status s = impl_->conn->Exec(impl_->sql.admin.clock, {}, &r);
  gettimeofday(&after, nullptr);
  if (!s.ok()) return s;
  if (r.rows.empty() || !r.rows[0][0]) return Status(Code::kDb, "the server returned no time");
  const double server = std::strtod(r.rows[0][0]->c_str(), nullptr);
  const double b = before.tv_sec + before.tv_usec / 1e6, a = after.tv_sec + after.tv_usec / 1e6;
  out->offset_s = (a + b) / 2 - server;
  out->round_trip_s = a - b;
  return Status::OK();
}

Status Admin::CountLeases(LeaseCounts* out) {
  ExecResult r;
  Status s = impl_->conn->Exec(impl_->sql.admin.counts, {}, &r);
  if (!s.ok()) return s;
  if (r.rows.empty()) return Status(Code::kDb, "the server returned no count");
  out->rows = ToInt(r.rows[0][0]);
  out->held = ToInt(r.rows[0][1]);
  out->expired_over_1h = ToInt(r.rows[0][2]);
  return Status::OK();
}

}  // namespace dlock
