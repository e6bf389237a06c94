#include "conn.h"

#include "thread_annotations.h"

#include <errmsg.h>
#include <mysqld_error.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <strings.h>

namespace dlock {

namespace {

std::once_flag g_library_once;

void LibraryInit() {
  // mysql_init() would do this lazily, but that is not thread-safe.
  std::call_once(g_library_once, [] { mysql_library_init(0, nullptr, nullptr); });
}

// A fetched column is read into this buffer first; longer values are fetched
// again at their full length, so nothing is truncated.
constexpr size_t kColumnBuffer = 1024;

// Per-statement scratch (binds, lengths, column buffers) for up to N items
// lives on the stack: every statement of the library's has at most 4
// parameters or columns, and these were a dozen heap allocations per
// statement. More than N take the heap. Left uninitialised: every use
// sets what it reads.
template <typename T, size_t N>
class Scratch {
 public:
  explicit Scratch(size_t n) : n_(n) {
    if (n > N) heap_.resize(n);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() { return n_ > N ? heap_.data() : inline_; }
  T& operator[](size_t i) { return data()[i]; }

 private:
  size_t n_;
  T inline_[N];
  std::vector<T> heap_;
};
constexpr size_t kInlineItems = 4;

// What every lock session starts with, run when it connects and again after
// a reset (Conn::ResetSession):
//  - UTC: DATETIME + UTC_TIMESTAMP() is zone-independent, this is a second
//    guard; strict mode turns truncation into an error; autocommit on, also
//    when the server's default is off (the lease statements commit alone).
//  - A row lock is a transaction on an idle connection: a server
//    wait_timeout of 60 s would end it (and free the row) while its holder
//    works. Lock sessions keep the server's value when it is at least 8
//    hours (MariaDB's default) and raise it to that otherwise.
//  - READ COMMITTED: row locks and the caller's statements on a lock's
//    transaction take no gap locks (MARIADB.md); cleanup asks for REPEATABLE
//    READ itself. A statement of its own: the isolation variable has another
//    name on MySQL.
// NAMES repeats the handshake's character set (a reset keeps it on MariaDB;
// this does not depend on it).
const char* const kSessionInit[] = {
    "SET NAMES utf8mb4, time_zone = '+00:00', "
    "sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO', "
    "wait_timeout = GREATEST(@@session.wait_timeout, 28800), autocommit = 1",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
};

// Nodes of multi-host URLs that could not be used lately (unreachable,
// unhealthy, or failed a statement with a node error), process-wide: a new
// connection tries them after the others for kNodeDownFor, so that a dead
// node does not cost every new connection a connect timeout. Longer than
// the default connect timeout (5 s), so that a dead first node is not tried
// first again by every connection opened just after its record ran out.
constexpr auto kNodeDownFor = std::chrono::seconds(30);

struct DownNodes {
  Mutex mu;
  std::map<std::string, std::chrono::steady_clock::time_point> since GUARDED_BY(mu);  // host:port
};

// Never destroyed: the watchdog and pool threads of a client nobody closed
// (a binding at interpreter or JVM exit) may still reach it after static
// destructors ran.
DownNodes& Down() {
  static DownNodes* d = new DownNodes;
  return *d;
}

std::string NodeId(const std::string& host, unsigned port) {
  return host + ":" + std::to_string(port);
}

void NoteNodeDown(const std::string& id) {
  DownNodes& d = Down();
  MutexLock g(d.mu);
  if (d.since.size() > 1024) d.since.clear();  // bounded, whatever URLs come and go
  d.since[id] = std::chrono::steady_clock::now();
}

bool NodeRecentlyDown(const std::string& id) {
  DownNodes& d = Down();
  MutexLock g(d.mu);
  auto it = d.since.find(id);
  if (it == d.since.end()) return false;
  if (std::chrono::steady_clock::now() - it->second < kNodeDownFor) return true;
  d.since.erase(it);
  return false;
}

void NoteNodeUp(const std::string& id) {
  DownNodes& d = Down();
  MutexLock g(d.mu);
  d.since.erase(id);
}

}  // namespace

bool IsNodeError(unsigned err) { return err == ER_UNKNOWN_COM_ERROR || err == ER_ERROR_DURING_COMMIT; }

const char kNotPrimary[] = "not in the cluster's primary component (quorum lost)";
const char kQuorumAdvice[] =
    "another node may still serve (a URL naming several nodes, mysql://u@h1:p1,h2:p2,h3:p3/db, "
    "goes to it), else wait until the cluster has its quorum again";

bool IsConnectionError(unsigned err) {
  switch (err) {
    case CR_SERVER_GONE_ERROR:   // 2006
    case CR_SERVER_LOST:         // 2013
    case CR_CONNECTION_ERROR:    // 2002
    case CR_CONN_HOST_ERROR:     // 2003
    case CR_UNKNOWN_HOST:        // 2005
    case CR_COMMANDS_OUT_OF_SYNC:  // 2014: protocol state is unknown
    case 2026:                   // TLS
    case 2055:                   // CR_SERVER_LOST_EXTENDED
    case 5013:                   // CR_ERR_NET_READ
    case 5014:                   // CR_ERR_NET_WRITE
    case ER_CONNECTION_KILLED:   // 1927
    case ER_SERVER_SHUTDOWN:     // 1053
    case 4031:                   // MySQL 8 ER_CLIENT_INTERACTION_TIMEOUT (harmless on MariaDB)
      return true;
    default:
      return false;
  }
}

bool IsOutcomeUnknown(unsigned err) {
  // Lost while a statement was in flight: the server may have run it.
  // 1180 (Galera: "Not connected to Primary Component" during commit): the
  // write set's fate is not known to this node.
  return err == CR_SERVER_LOST || err == 2055 || err == 5013 || err == ER_CONNECTION_KILLED ||
         err == ER_SERVER_SHUTDOWN || err == ER_ERROR_DURING_COMMIT;
}

Code ClassifyError(unsigned err) {
  switch (err) {
    case ER_OPTION_PREVENTS_STATEMENT:  // 1290 --read-only
    case 1792:                          // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
    case 1836:                          // ER_READ_ONLY_MODE
      return Code::kReadOnly;
    case ER_ACCESS_DENIED_ERROR:  // 1045
    case ER_DBACCESS_DENIED_ERROR:
    case ER_BAD_DB_ERROR:
    case ER_HOST_NOT_PRIVILEGED:
    case ER_CON_COUNT_ERROR:
    case ER_TOO_MANY_USER_CONNECTIONS:
      return Code::kConnect;
    default:
      return IsConnectionError(err) ? Code::kConnect : Code::kDb;
  }
}

namespace {

// connect_timeout for a connect that must end by deadline: the time left,
// rounded up to the option's whole seconds (never 0, which is no timeout),
// at most the configured one.
int ConnectTimeoutWithin(int connect_timeout_s, std::chrono::steady_clock::time_point deadline) {
  if (deadline == std::chrono::steady_clock::time_point::max()) return connect_timeout_s;
  using std::chrono::milliseconds;
  const auto left_ms =
      std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  const int64_t left_s = std::max<int64_t>((left_ms + 999) / 1000, 1);
  return static_cast<int>(std::min<int64_t>(connect_timeout_s, left_s));
}

}  // namespace

Status Conn::Connect(const ClientOptions& o, std::unique_ptr<Conn>* out,
                     std::chrono::steady_clock::time_point deadline) {
  if (o.nodes.size() < 2 || !o.socket.empty()) {
    ClientOptions one = o;
    one.connect_timeout_s = ConnectTimeoutWithin(o.connect_timeout_s, deadline);
    Status s = ConnectNode(one, out);
    // A healthy node answered: whatever failure was recorded for it (by a
    // statement on any URL naming it) is over, for the multi-host URLs too.
    if (s.ok() && o.socket.empty() && (*out)->server().unhealthy.empty())
      NoteNodeUp(NodeId(o.host, o.port));
    return s;
  }
  // The URL's order, except that nodes that failed lately go last.
  std::vector<size_t> order;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < o.nodes.size(); ++i)
      if (NodeRecentlyDown(NodeId(o.nodes[i].host, o.nodes[i].port)) == (pass == 1))
        order.push_back(i);
  std::string why;
  Status first_error;
  bool all_read_only = true;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    if (k > 0 && std::chrono::steady_clock::now() >= deadline) {
      // The caller's wait is over: the nodes left are not tried.
      std::string left;
      for (size_t j = k; j < order.size(); ++j)
        left += (j > k ? ", " : "") + NodeId(o.nodes[order[j]].host, o.nodes[order[j]].port);
      return Status(Code::kConnect,
                    "no healthy node among the URL's " + std::to_string(o.nodes.size()) +
                        " hosts within the wait: " + why + "; the wait ran out before " + left +
                        (order.size() - k > 1 ? " were" : " was") + " tried",
                    first_error.ok() ? 0 : first_error.server_errno());
    }
    ClientOptions one = o;
    one.nodes.clear();
    one.host = o.nodes[i].host;
    one.port = o.nodes[i].port;
    one.connect_timeout_s = ConnectTimeoutWithin(o.connect_timeout_s, deadline);
    const std::string id = NodeId(one.host, one.port);
    std::unique_ptr<Conn> c;
    Status s = ConnectNode(one, &c);
    if (s.ok() && c->server().unhealthy.empty()) {
      NoteNodeUp(id);
      *out = std::move(c);
      return Status::OK();
    }
    NoteNodeDown(id);
    if (!why.empty()) why += "; ";
    if (!s.ok()) {
      all_read_only = false;
      if (first_error.ok()) first_error = s;
      why += s.message();
    } else {
      if (c->server().unhealthy != "read_only=ON") all_read_only = false;
      why += one.Where() + " is not usable: " + c->server().unhealthy;
    }
  }
  Code code = all_read_only ? Code::kReadOnly : Code::kConnect;
  if (why.find(kNotPrimary) != std::string::npos)
    why += "; wait until the cluster has its quorum again";
  return Status(code, "no healthy node among the URL's " + std::to_string(o.nodes.size()) +
                          " hosts: " + why,
                first_error.ok() ? 0 : first_error.server_errno());
}

Status Conn::ConnectNode(const ClientOptions& o, std::unique_ptr<Conn>* out) {
  LibraryInit();
  MYSQL* m = mysql_init(nullptr);
  if (m == nullptr) return Status::Internal("mysql_init failed (out of memory)");
  unsigned ct = static_cast<unsigned>(o.connect_timeout_s);
  unsigned rt = static_cast<unsigned>(o.read_timeout_s);
  my_bool off = 0;
  mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &ct);
  mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &rt);
  mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &rt);
  // A silent reconnect would drop row locks and session state unnoticed.
  mysql_optionsv(m, MYSQL_OPT_RECONNECT, &off);
  mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  for (const char* sql : kSessionInit) mysql_optionsv(m, MYSQL_INIT_COMMAND, sql);
  if (o.ssl_mode != SslMode::kDisable) {
    my_bool on = 1;
    mysql_optionsv(m, MYSQL_OPT_SSL_ENFORCE, &on);
    if (o.ssl_mode == SslMode::kVerify) mysql_optionsv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
    if (!o.ssl_ca.empty()) mysql_optionsv(m, MYSQL_OPT_SSL_CA, o.ssl_ca.c_str());
  }
  const char* host = o.socket.empty() ? o.host.c_str() : "localhost";
  const char* sock = o.socket.empty() ? nullptr : o.socket.c_str();
  if (mysql_real_connect(m, host, o.user.empty() ? nullptr : o.user.c_str(),
                         o.password.c_str(), o.database.c_str(), o.socket.empty() ? o.port : 0,
                         sock, 0) == nullptr) {
    unsigned err = mysql_errno(m);
    std::string msg = "cannot connect to " + o.Where() + ": " + PrintableText(mysql_error(m)) + " (" +
                      std::to_string(err) + ")";
    mysql_close(m);
    Code code = ClassifyError(err);
    if (code == Code::kDb) code = Code::kConnect;
    return Status(code, msg, static_cast<int>(err));
  }
  if (o.ssl_mode != SslMode::kDisable) {
    // MYSQL_OPT_SSL_ENFORCE alone does not stop this Connector/C from going
    // on in plaintext when the server offers no TLS: check what we got.
    const char* cipher = mysql_get_ssl_cipher(m);
    if (cipher == nullptr || *cipher == '\0') {
      mysql_close(m);
      return Status(Code::kConnect,
                    "cannot connect to " + o.Where() + ": ssl_mode=" +
                        (o.ssl_mode == SslMode::kVerify ? "verify" : "require") +
                        " but the connection is not encrypted (the server offers no TLS); "
                        "refusing to continue in plaintext");
    }
  }
  std::unique_ptr<Conn> c(new Conn(m));
  c->fd_ = static_cast<int>(mysql_get_socket(m));
  // Close-on-exec: a process the caller starts (a job under `dlock run`, any
  // fork+exec of the host program) must not inherit a lock's session, which
  // would keep a row lock alive after its holder died. Connector/C opens the
  // socket without the flag and has no option for it, so it is set here,
  // before the connection is handed out; a fork+exec in another thread
  // during the handshake itself could still inherit this one socket.
  if (c->fd_ >= 0) {
    int flags = fcntl(c->fd_, F_GETFD);
    if (flags < 0 || fcntl(c->fd_, F_SETFD, flags | FD_CLOEXEC) != 0)
      return Status::Internal("cannot set close-on-exec on the connection's socket");
  }
  c->where_ = o.Where();
  c->node_ = NodeId(o.host, o.port);
  Status s = c->ReadServerInfo(o.dialect);
  if (!s.ok()) return s;
  *out = std::move(c);
  return Status::OK();
}

Conn::Conn(MYSQL* m) : m_(m), pid_(getpid()) {}

Conn::~Conn() {
  // In a forked child the socket is the parent's: closing it politely would
  // send COM_QUIT and end the parent's session (and its row locks). Leak.
  if (getpid() != pid_) return;
  for (auto& kv : stmts_) mysql_stmt_close(kv.second);
  mysql_close(m_);
}

Status Conn::Ping() {
  if (broken_) return Status(Code::kConnect, "connection to " + where_ + " is broken", CR_SERVER_GONE_ERROR);
  Count();
  if (mysql_ping(m_) != 0) {
    broken_ = true;  // ping fails only when the session is gone
    return Fail("ping", mysql_errno(m_), mysql_error(m_));
  }
  return Status::OK();
}

bool Conn::LooksClosed() const {
  if (broken_) return true;
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  int n = poll(&p, 1, 0);
  return n > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

bool Conn::InTransaction() const { return (m_->server_status & SERVER_STATUS_IN_TRANS) != 0; }

Status Conn::ResetSession() {
  if (broken_) return Status(Code::kConnect, "connection to " + where_ + " is broken", CR_SERVER_GONE_ERROR);
  // The server closes the session's prepared statements; ours go first (a
  // COM_STMT_CLOSE each, no reply) and are prepared again when next used.
  for (auto& kv : stmts_) mysql_stmt_close(kv.second);
  stmts_.clear();
  Count();
  // COM_RESET_CONNECTION: rolls back, frees user locks (GET_LOCK), table
  // and backup locks, HANDLERs and temporary tables, clears user variables,
  // and sets every session variable back to the server's global value.
  if (mysql_reset_connection(m_) != 0) {
    broken_ = true;  // whatever state the session is in, it is not known
    return Fail("session reset", mysql_errno(m_), mysql_error(m_));
  }
  for (const char* sql : kSessionInit) {
    Status s = Query(sql);
    if (!s.ok()) {
      broken_ = true;
      return s;
    }
  }
  tainted_ = false;
  return Status::OK();
}

void Conn::Abort() {
  aborted_.store(true);
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

void Conn::NoteUnresponsive() const { NoteNodeDown(node_); }

Status Conn::Fail(const char* what, unsigned err, const char* msg) {
  if (IsConnectionError(err)) {
    broken_ = true;
    if (!aborted_.load()) NoteNodeDown(node_);  // for multi-host URLs: try the others first
  }
  Code code = ClassifyError(err);
  std::string why;
  if (server_.galera && IsNodeError(err)) {
    broken_ = true;  // this node cannot serve locks now: the retry goes elsewhere
    NoteNodeDown(node_);
    // The server's words ("WSREP has not yet prepared node for application
    // use") do not say what happened or what to do.
    if (err == ER_UNKNOWN_COM_ERROR) {
      code = Code::kConnect;  // never ran; as a node the pool refuses to use
      why = std::string(": this Galera node is ") + kNotPrimary + "; " + kQuorumAdvice;
    } else {
      why = std::string(": this Galera node lost the cluster's primary component (quorum lost) "
                        "with the statement in flight; ") + kQuorumAdvice;
    }
  }
  return Status(code,
                std::string(what) + " on " + where_ + ": " + PrintableText(msg) + " (" +
                    std::to_string(err) + ")" + why,
                static_cast<int>(err));
}

Status Conn::ReadServerInfo(SqlDialect forced) {
  // The handshake's version says which dialect the server speaks (no round
  // trip); the dialect's facts query is one.
  const char* hello = mysql_get_server_info(m_);
  server_.dialect = &ChooseDialect(forced, hello ? hello : "");
  server_.mariadb = IsMariaDbVersion(hello ? hello : "");
  // The facts are the server's, whatever dialect the lock statements are
  // forced to: with dialect=mysql on a MariaDB Galera node, the MySQL
  // dialect's facts would not see Galera, and row locks (which do not
  // exclude across nodes) would be let through.
  const Dialect& family = ChooseDialect(SqlDialect::kAuto, hello ? hello : "");
  const char* sql = family.server_facts;
  if (mysql_real_query(m_, sql, std::strlen(sql)) != 0)
    return Fail("reading server state", mysql_errno(m_), mysql_error(m_));
  MYSQL_RES* res = mysql_store_result(m_);
  if (res == nullptr) return Fail("reading server state", mysql_errno(m_), mysql_error(m_));
  MYSQL_ROW row = mysql_fetch_row(res);
  if (row != nullptr) {
    server_.read_only = (row[0] && std::strcmp(row[0], "0") != 0) ||
                        (row[1] && std::strcmp(row[1], "0") != 0);
    server_.version = row[2] ? row[2] : "";
    server_.galera = row[3] && (strcasecmp(row[3], "ON") == 0 || std::strcmp(row[3], "1") == 0);
    server_.statement_binlog = mysql_num_fields(res) > 4 && row[4] && strcasecmp(row[4], "STATEMENT") == 0;
  }
  mysql_free_result(res);
  if (server_.read_only) server_.unhealthy = "read_only=ON";
  if (server_.galera && server_.unhealthy.empty()) return ReadGaleraHealth(family);
  return Status::OK();
}

Status Conn::ReadGaleraHealth(const Dialect& family) {
  const char* sql = family.galera_health;
  if (mysql_real_query(m_, sql, std::strlen(sql)) != 0)
    return Fail("reading the Galera node's state", mysql_errno(m_), mysql_error(m_));
  MYSQL_RES* res = mysql_store_result(m_);
  if (res == nullptr) return Fail("reading the Galera node's state", mysql_errno(m_), mysql_error(m_));
  std::string ready, status, state, session_on;
  while (MYSQL_ROW row = mysql_fetch_row(res)) {
    if (row[0]) session_on = row[0];
    std::string name = row[1] ? row[1] : "", value = row[2] ? row[2] : "";
    if (strcasecmp(name.c_str(), "WSREP_READY") == 0) ready = value;
    else if (strcasecmp(name.c_str(), "WSREP_CLUSTER_STATUS") == 0) status = value;
    else if (strcasecmp(name.c_str(), "WSREP_CLUSTER_SIZE") == 0) server_.cluster_size = std::atoi(value.c_str());
    else state = value;
  }
  mysql_free_result(res);
  // The component first: a node that lost quorum also says wsrep_ready=OFF,
  // which alone would not tell the user why.
  if (status != "Primary")
    server_.unhealthy = "wsrep_cluster_status=" + PrintableText(status) + ": " + kNotPrimary;
  else if (strcasecmp(ready.c_str(), "ON") != 0)
    server_.unhealthy = "wsrep_ready=" + PrintableText(ready);
  else if (state != "Synced")
    server_.unhealthy = "wsrep_local_state_comment=" + PrintableText(state) + " (not Synced)";
  else if (session_on == "0")
    server_.unhealthy = "wsrep_on is off for this session (its writes would not replicate)";
  return Status::OK();
}

Status Conn::Query(const std::string& sql) {
  if (broken_) return Status(Code::kConnect, "connection to " + where_ + " is broken", CR_SERVER_GONE_ERROR);
  Count();
  if (mysql_real_query(m_, sql.data(), sql.size()) != 0)
    return Fail("query", mysql_errno(m_), mysql_error(m_));
  // Drain any result so the connection stays in sync.
  MYSQL_RES* res = mysql_store_result(m_);
  if (res != nullptr) mysql_free_result(res);
  return Status::OK();
}

Status Conn::Exec(const std::string& sql, const std::vector<Param>& params, ExecResult* out,
                  bool cache) {
  if (broken_) return Status(Code::kConnect, "connection to " + where_ + " is broken", CR_SERVER_GONE_ERROR);
  out->affected = 0;
  out->insert_id = 0;
  out->rows.clear();

  if (cache) {
    auto it = stmts_.find(sql);
    if (it != stmts_.end()) return Run(it->second, params, out);
  }
  MYSQL_STMT* st = mysql_stmt_init(m_);
  if (st == nullptr) return Status::Internal("mysql_stmt_init failed (out of memory)");
  Count();
  if (mysql_stmt_prepare(st, sql.data(), sql.size()) != 0) {
    Status s = Fail("prepare", mysql_stmt_errno(st), mysql_stmt_error(st));
    mysql_stmt_close(st);
    return s;
  }
  if (!cache) {
    Status s = Run(st, params, out);
    mysql_stmt_close(st);
    return s;
  }
  stmts_.emplace(sql, st);
  return Run(st, params, out);
}

Status Conn::Prepare(const std::string& sql) {
  if (broken_) return Status(Code::kConnect, "connection to " + where_ + " is broken", CR_SERVER_GONE_ERROR);
  MYSQL_STMT* st = mysql_stmt_init(m_);
  if (st == nullptr) return Status::Internal("mysql_stmt_init failed (out of memory)");
  Count();
  Status s;
  if (mysql_stmt_prepare(st, sql.data(), sql.size()) != 0)
    s = Fail("prepare", mysql_stmt_errno(st), mysql_stmt_error(st));
  mysql_stmt_close(st);
  return s;
}

namespace {

// The MYSQL_BINDs of a statement's parameters, with the storage they point
// into (alive until the statement ran).
class ParamBinds {
 public:
  explicit ParamBinds(const std::vector<Param>& params)
      : binds_(params.size()), lengths_(params.size()), ints_(params.size()), nulls_(params.size()) {
    for (size_t i = 0; i < params.size(); ++i) {
      MYSQL_BIND& b = binds_[i];
      std::memset(&b, 0, sizeof b);
      const Param& p = params[i];
      if (p.kind == Param::kInt) {
        ints_[i] = p.i;
        b.buffer_type = MYSQL_TYPE_LONGLONG;
        b.buffer = &ints_[i];
      } else if ((p.kind == Param::kBytes || p.kind == Param::kText) && p.s != nullptr) {
        // BLOB = binary: the bytes reach VARBINARY columns unchanged. Text
        // goes in the connection's character set (utf8mb4).
        lengths_[i] = static_cast<unsigned long>(p.s->size());
        b.buffer_type = p.kind == Param::kBytes ? MYSQL_TYPE_BLOB : MYSQL_TYPE_STRING;
        b.buffer = const_cast<char*>(p.s->data());
        b.buffer_length = lengths_[i];
        b.length = &lengths_[i];
      } else {
        nulls_[i] = 1;
        b.buffer_type = MYSQL_TYPE_NULL;
        b.is_null = &nulls_[i];
      }
    }
  }
  MYSQL_BIND* data() { return binds_.data(); }

 private:
  Scratch<MYSQL_BIND, kInlineItems> binds_;
  Scratch<unsigned long, kInlineItems> lengths_;
  Scratch<long long, kInlineItems> ints_;
  Scratch<my_bool, kInlineItems> nulls_;
};

}  // namespace

Status Conn::Run(MYSQL_STMT* st, const std::vector<Param>& params, ExecResult* out) {
  if (mysql_stmt_param_count(st) != params.size())
    return Status::Invalid("statement expects " + std::to_string(mysql_stmt_param_count(st)) +
                           " parameters, got " + std::to_string(params.size()));
  ParamBinds binds(params);
  if (!params.empty() && mysql_stmt_bind_param(st, binds.data()) != 0)
    return Fail("bind", mysql_stmt_errno(st), mysql_stmt_error(st));
  Count();
  if (mysql_stmt_execute(st) != 0) {
    unsigned err = mysql_stmt_errno(st);
    return Fail("execute", err, mysql_stmt_error(st));
  }
  out->affected = mysql_stmt_affected_rows(st);
  out->insert_id = mysql_stmt_insert_id(st);
  if (mysql_stmt_field_count(st) == 0) return Status::OK();
  if (mysql_stmt_store_result(st) != 0) {
    Status s = Fail("store result", mysql_stmt_errno(st), mysql_stmt_error(st));
    mysql_stmt_free_result(st);
    return s;
  }
  Status s = FetchRows(st, out);
  mysql_stmt_free_result(st);
  return s;
}

Status Conn::FetchRows(MYSQL_STMT* st, ExecResult* out) {
  const unsigned nfields = mysql_stmt_field_count(st);
  Scratch<MYSQL_BIND, kInlineItems> rb(nfields);
  Scratch<std::array<char, kColumnBuffer>, kInlineItems> bufs(nfields);
  Scratch<unsigned long, kInlineItems> rlen(nfields);
  Scratch<my_bool, kInlineItems> rnull(nfields), rerr(nfields);
  for (unsigned i = 0; i < nfields; ++i) {
    std::memset(&rb[i], 0, sizeof rb[i]);
    rlen[i] = 0;
    rnull[i] = 0;
    rerr[i] = 0;
    rb[i].buffer_type = MYSQL_TYPE_STRING;
    rb[i].buffer = bufs[i].data();
    rb[i].buffer_length = kColumnBuffer;
    rb[i].length = &rlen[i];
    rb[i].is_null = &rnull[i];
    rb[i].error = &rerr[i];
  }
  if (mysql_stmt_bind_result(st, rb.data()) != 0)
    return Fail("bind result", mysql_stmt_errno(st), mysql_stmt_error(st));
  for (;;) {
    int rc = mysql_stmt_fetch(st);
    if (rc == MYSQL_NO_DATA) return Status::OK();
    if (rc == 1) return Fail("fetch", mysql_stmt_errno(st), mysql_stmt_error(st));
    Row row(nfields);
    for (unsigned i = 0; i < nfields; ++i) {
      if (rnull[i]) continue;
      if (rlen[i] <= kColumnBuffer) {
        row[i] = std::string(bufs[i].data(), rlen[i]);
        continue;
      }
      // Longer than the buffer (MYSQL_DATA_TRUNCATED): fetch it whole.
      std::string big(rlen[i], '\0');
      MYSQL_BIND one;
      std::memset(&one, 0, sizeof one);
      unsigned long got = 0;
      one.buffer_type = MYSQL_TYPE_STRING;
      one.buffer = &big[0];
      one.buffer_length = rlen[i];
      one.length = &got;
      mysql_stmt_fetch_column(st, &one, i, 0);
      row[i] = std::move(big);
    }
    out->rows.push_back(std::move(row));
  }
}

}  // namespace dlock
