// One MariaDB connection with its prepared statements. Used by one thread at
// a time (the protocol is strictly request/response).
#ifndef DLOCK_CORE_CONN_H_
#define DLOCK_CORE_CONN_H_

#include <mysql.h>

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dialect.h"
#include "dlock/core.hpp"
#include "options.h"

namespace dlock {

// A statement parameter: an integer, bytes, or NULL.
struct Param {
  enum Kind { kInt, kBytes, kText, kNull } kind;
  int64_t i = 0;
  const std::string* s = nullptr;
  static Param Int(int64_t v) { return Param{kInt, v, nullptr}; }
  static Param Bytes(const std::string& v) { return Param{kBytes, 0, &v}; }
  static Param Text(const std::string& v) { return Param{kText, 0, &v}; }
  static Param Null() { return Param{kNull, 0, nullptr}; }
};

using Row = std::vector<std::optional<std::string>>;

struct ExecResult {
  uint64_t affected = 0;
  uint64_t insert_id = 0;
  std::vector<Row> rows;
};

// Server facts read once per connection.
struct ServerInfo {
  bool read_only = false;
  bool galera = false;
  std::string version;
  bool mariadb = false;  // the version names MariaDB
  // The statements to send it (the `dialect` option, or the version's word).
  const Dialect* dialect = nullptr;
  // Empty when the server can take locks; else why not, e.g.
  // "read_only=ON" or, on Galera, "wsrep_cluster_status=non-Primary"
  // (a node that lost quorum still answers SELECT 1).
  std::string unhealthy;
  int cluster_size = 0;  // Galera: wsrep_cluster_size
  // binlog_format=STATEMENT: a statement whose effect depends on GET_LOCK
  // and IS_USED_LOCK would be replayed on replicas with their own answers,
  // so the lease's hand-over (dialect.h) is not sent there.
  bool statement_binlog = false;
};

// Errors after which the connection is unusable.
bool IsConnectionError(unsigned err);
// Errors after which a statement's outcome is unknown (it may have committed).
bool IsOutcomeUnknown(unsigned err);
// Galera: errors after which the node cannot serve lock statements (1047:
// not in the primary component; 1180: lost it during commit). On a Galera
// server Conn gives the session up (broken) so that the retry goes to another
// node (1180's outcome is unknown: re-checked there); elsewhere they are
// plain server errors.
bool IsNodeError(unsigned err);
// For messages: what a Galera node outside the primary component is, and
// what the user can do about it.
extern const char kNotPrimary[];
extern const char kQuorumAdvice[];

// What a retried statement runs on: the part of a connection that
// RunIdempotent (retry.h) and the attempts it runs need. Conn is the real
// one; tests put a fake with scripted faults in its place.
class SqlConn {
 public:
  virtual ~SqlConn() = default;
  // A (cached) prepared statement. On error the Status carries the errno,
  // and after a connection error broken() is true from then on.
  virtual Status Exec(const std::string& sql, const std::vector<Param>& params,
                      ExecResult* out) = 0;
  // Text protocol, for statements that cannot be prepared (BEGIN/COMMIT...).
  virtual Status Query(const std::string& sql) = 0;
  virtual bool broken() const = 0;
};

class Conn : public SqlConn {
 public:
  // With several nodes in opts (a multi-host URL): the first healthy one
  // (ServerInfo::unhealthy empty), nodes that failed in the last seconds
  // tried last; when none is, the error names each node's reason.
  // deadline bounds the whole connect, every node tried included: each node
  // gets connect_timeout or the time left, whichever is less, rounded up to
  // whole seconds (the option's unit), so at least 1 s; the first node is
  // always tried, the next ones only while time is left. Connector/C's
  // connect_timeout bounds each wait of the handshake, not their sum: a
  // node that stalls is left at that step, but one that answers every step
  // just in time may take a few times the budget. What Conn reads after
  // the connect (the server's facts) is under read_timeout, not this.
  // The default is no deadline: connect_timeout per node.
  static Status Connect(const ClientOptions& opts, std::unique_ptr<Conn>* out,
                        std::chrono::steady_clock::time_point deadline =
                            std::chrono::steady_clock::time_point::max());
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Runs sql as a (cached) prepared statement. Result columns come back as
  // bytes. On error the Status carries the server errno; the connection is
  // marked broken after connection errors.
  Status Exec(const std::string& sql, const std::vector<Param>& params,
              ExecResult* out) override {
    return Exec(sql, params, out, /*cache=*/true);
  }
  // cache=false prepares, runs and closes (for caller-supplied SQL).
  Status Exec(const std::string& sql, const std::vector<Param>& params, ExecResult* out,
              bool cache);
  // Text protocol, for statements that cannot be prepared (BEGIN/COMMIT...).
  Status Query(const std::string& sql) override;
  // Prepares sql and drops it unrun: would the server take it (its tables,
  // the user's privileges on them)? One round trip; nothing is executed.
  Status Prepare(const std::string& sql);

  // Cheap liveness check (COM_PING); marks the connection broken on failure.
  Status Ping();
  bool broken() const override { return broken_; }
  void MarkBroken() { broken_ = true; }
  // Without a round trip: has the server closed this idle connection (its
  // wait_timeout, KILL, a restart)? An idle session never has bytes to read,
  // so a readable or hung-up socket means it is gone. Only for a connection
  // no statement is running on.
  bool LooksClosed() const;
  // The server's word, from the last reply: is a transaction open?
  bool InTransaction() const;
  // A caller's statement ran on this session (dlock_exec): whatever it set
  // (session variables, a timestamp, user locks, HANDLERs, a read-only
  // transaction mode) must not reach the next lock that borrows it.
  void MarkTainted() { tainted_ = true; }
  // Whether the pool must reset the session before lending it again: a
  // caller's statement ran on it, or a transaction is still open.
  bool NeedsReset() const { return tainted_ || InTransaction(); }
  // Back to a fresh session without reconnecting (COM_RESET_CONNECTION,
  // then the session settings of Connect again). On failure the connection
  // is marked broken: the pool closes it.
  Status ResetSession();
  // Ends a statement blocked on this connection at once, from any thread:
  // shuts the socket down (the blocked read fails, the connection is broken
  // and discarded). Works when the server is frozen too, where KILL QUERY
  // could not even connect.
  void Abort();
  // Abort() was called: the connection broke because we cut it, which says
  // nothing about the server or the other connections to it.
  bool aborted() const { return aborted_.load(); }
  // This connection's node did not answer in time (its statement was cut
  // with Abort()): for multi-host URLs, new connections try the other
  // nodes first for a while, as after a connection error.
  void NoteUnresponsive() const;
  // Counts every statement sent (for the client's counters).
  void set_counter(std::atomic<uint64_t>* c) { sent_ = c; }
  const ServerInfo& server() const { return server_; }
  // "host:port/db" of the node this connection went to.
  const std::string& where() const { return where_; }

 private:
  explicit Conn(MYSQL* m);
  Status Run(MYSQL_STMT* st, const std::vector<Param>& params, ExecResult* out);
  // The rows of a stored result, every column as bytes.
  Status FetchRows(MYSQL_STMT* st, ExecResult* out);
  void Count() {
    if (sent_ != nullptr) sent_->fetch_add(1, std::memory_order_relaxed);
  }
  Status Fail(const char* what, unsigned err, const char* msg);
  Status ReadServerInfo(SqlDialect forced);
  // Galera only: wsrep_ready, wsrep_cluster_status, Synced (-> unhealthy).
  Status ReadGaleraHealth(const Dialect& family);  // family: the server's, not a forced one
  // One address: opts.host/opts.port (or opts.socket).
  static Status ConnectNode(const ClientOptions& opts, std::unique_ptr<Conn>* out);

  MYSQL* m_;
  int fd_ = -1;  // the socket, read once: Abort() runs on other threads
  pid_t pid_;  // after fork() a child must not talk on its parent's socket
  bool broken_ = false;
  bool tainted_ = false;
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t>* sent_ = nullptr;
  ServerInfo server_;
  std::string where_;
  std::string node_;  // host:port, for the multi-host memo of failed nodes
  std::unordered_map<std::string, MYSQL_STMT*> stmts_;
};

// Maps a server/client errno to a dlock status code.
Code ClassifyError(unsigned err);

}  // namespace dlock

#endif  // DLOCK_CORE_CONN_H_
