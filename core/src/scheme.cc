// What both schemes share.
#include "client_impl.h"
#include "scheme.h"

namespace dlock {

Status ExecInTransaction(Conn& conn, const SessionSql& probe, const std::string& sql,
                         const std::vector<const std::string*>& params, int64_t* affected,
                         bool* still_open) {
  std::vector<Param> ps;
  ps.reserve(params.size());
  for (const std::string* p : params) ps.push_back(p ? Param::Text(*p) : Param::Null());
  ExecResult r;
  conn.MarkTainted();  // its effects on the session end with the hold (pool.cc resets it)
  Status s = conn.Exec(sql, ps, &r, /*cache=*/false);
  if (conn.broken()) return s;
  // An OK reply says in its status flags whether a transaction is open; an
  // error reply does not, so ask.
  *still_open = conn.InTransaction();
  if (!s.ok()) {
    ExecResult q;
    Status t = conn.Exec(probe.in_txn_probe, {}, &q);
    if (!probe.in_txn_probe_row) *still_open = !t.ok() || conn.InTransaction();
    else *still_open = !t.ok() || q.rows.empty() || !q.rows[0][0] || *q.rows[0][0] != "0";
  }
  if (s.ok() && *still_open && affected != nullptr) *affected = static_cast<int64_t>(r.affected);
  return s;
}

}  // namespace dlock
