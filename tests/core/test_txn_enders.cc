// core_unit: the keyword check that keeps dlock_exec from ending a lock's
// transaction (txn_enders.cc). No database: what it lets through is caught
// by the server's in-transaction flag and undone by the session reset
// (tests/capi/session_test.c shows both against a real server).
#include <doctest/doctest.h>

#include <string>

#include "txn_enders.h"

using dlock::TxnEndingStatement;

namespace {

std::string Verdict(const std::string& sql) {
  const char* k = TxnEndingStatement(sql);
  return k == nullptr ? "" : k;
}

}  // namespace

TEST_CASE("statements that end the transaction are named") {
  CHECK(Verdict("COMMIT") == "COMMIT");
  CHECK(Verdict("  rollback work") == "ROLLBACK");
  CHECK(Verdict("/* c */ COMMIT WORK") == "COMMIT");
  CHECK(Verdict("-- x\nBEGIN") == "BEGIN");
  CHECK(Verdict("# x\nstart transaction") == "START");
  CHECK(Verdict("(COMMIT)") == "COMMIT");
  CHECK(Verdict("create table t (i int)") == "CREATE");
  CHECK(Verdict("LOCK TABLES t WRITE") == "LOCK");
  CHECK(Verdict("xa start 'x'") == "XA");
  CHECK(Verdict("BACKUP LOCK t") == "BACKUP");
}

TEST_CASE("statements that keep the transaction pass") {
  CHECK(Verdict("INSERT INTO t VALUES (1)") == "");
  CHECK(Verdict("ROLLBACK TO SAVEPOINT s1") == "");
  CHECK(Verdict("rollback work to s1") == "");
  CHECK(Verdict("CREATE TEMPORARY TABLE x (i int)") == "");
  CHECK(Verdict("SET @x = 1") == "");
  CHECK(Verdict("SET @autocommit = 0") == "");  // a user variable
  CHECK(Verdict("SET @x = @@autocommit, @y = 'autocommit=0'") == "");
  CHECK(Verdict("SET sql_mode = CONCAT(@@sql_mode, ',autocommit'), @z = (SELECT 1)") == "");
  CHECK(Verdict("SET SESSION TRANSACTION READ ONLY") == "");  // undone by the reset
  CHECK(Verdict("") == "");
  CHECK(Verdict("/* unterminated") == "");
}

TEST_CASE("every assignment of a SET is checked, not only the first") {
  CHECK(Verdict("SET autocommit = 0") == "SET autocommit");
  CHECK(Verdict("set session AUTOCOMMIT=1") == "SET autocommit");
  CHECK(Verdict("SET/**/autocommit=0") == "SET autocommit");
  CHECK(Verdict("SET /* a */ @@session.autocommit := 0") == "SET autocommit");
  CHECK(Verdict("SET sql_mode=DEFAULT, autocommit=0") == "SET autocommit");
  CHECK(Verdict("SET @x=1, @@session.autocommit=0") == "SET autocommit");
  CHECK(Verdict("SET @x='a,b', @y=(1,2), LOCAL autocommit=0") == "SET autocommit");
  CHECK(Verdict("SET NAMES utf8mb4, `autocommit` = 0") == "SET autocommit");
  CHECK(Verdict("SET @@`autocommit` = 0") == "SET autocommit");
  CHECK(Verdict("SET @s = 'it''s, \\' autocommit=0', autocommit = 0") == "SET autocommit");
  CHECK(Verdict("SET GLOBAL autocommit = 0") == "SET autocommit");
}

TEST_CASE("SET STATEMENT .. FOR is judged by its statement") {
  CHECK(Verdict("SET STATEMENT max_statement_time=1 FOR SELECT 1") == "");
  CHECK(Verdict("SET STATEMENT max_statement_time=1, sql_mode='' FOR COMMIT") == "COMMIT");
  CHECK(Verdict("SET STATEMENT x=(SELECT a FROM t FOR UPDATE) FOR SET autocommit=0") ==
        "SET autocommit");
}

TEST_CASE("an executable comment stops the check (the server's flag judges it)") {
  CHECK(Verdict("/*!COMMIT*/") == "");
  CHECK(Verdict("SET @x = 1 /*!, autocommit = 0 */") == "");
}
