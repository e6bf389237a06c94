// The SQL dialects, one row each:
//   X(id, word, version_marker, object)
//   id              the SqlDialect enumerator (options.h)
//   word            its value for the `dialect` option
//   version_marker  a server whose handshake version contains this is of
//                   the dialect ("" = any server of the family no earlier
//                   row claimed); rows are tried in order
//   object          the Dialect its file defines (dialect_<word>.cc)
// The option's words, the enum and the choice at connect (dialect.cc) are
// all expanded from here. Included by options.h and dialect.cc only.
#ifndef DLOCK_CORE_DIALECT_TABLE_H_
#define DLOCK_CORE_DIALECT_TABLE_H_

#define DLOCK_DIALECTS(X)                          \
  X(kMariaDb, mariadb, "MariaDB", kMariaDbDialect) \
  X(kMySql, mysql, "", kMySqlDialect)

#endif  // DLOCK_CORE_DIALECT_TABLE_H_
