// Statements a caller may not run on a lock's transaction (dlock_exec):
// the ones that end it, explicitly or by an implicit commit.
#ifndef DLOCK_CORE_TXN_ENDERS_H_
#define DLOCK_CORE_TXN_ENDERS_H_

#include <string>

namespace dlock {

// The first keyword of sql, after blanks and comments, if it names a
// statement that ends a transaction (explicitly or by an implicit commit);
// nullptr otherwise. The server's in-transaction flag, checked after every
// statement, catches what this misses.
const char* TxnEndingStatement(const std::string& sql);

}  // namespace dlock

#endif  // DLOCK_CORE_TXN_ENDERS_H_
