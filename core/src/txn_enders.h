// Statements a caller may not run on a lock's transaction (dlock_exec):
// the ones that end it, explicitly or by an implicit commit.
#ifndef DLOCK_CORE_TXN_ENDERS_H_
#define DLOCK_CORE_TXN_ENDERS_H_

#include <string>

namespace dlock {

// The first keyword of sql, after blanks and comments, if it names a
// statement that ends a transaction (explicitly or by an implicit commit),
// or "SET autocommit" when any assignment of a SET (or of a SET STATEMENT ..
// FOR) is to autocommit; nullptr otherwise. A clear early error only: the
// server's in-transaction flag, checked after every statement, catches an
// ending this misses, and the session is reset before its connection
// serves another lock (pool.cc), which undoes what it let through.
const char* TxnEndingStatement(const std::string& sql);

}  // namespace dlock

#endif  // DLOCK_CORE_TXN_ENDERS_H_
