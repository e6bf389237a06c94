// core_unit: what the operator's face (dlock/admin.hpp) computes without a
// server: SHOW GRANTS reading, a URL without its password, the schema's DDL.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "dlock/admin.hpp"
#include "grants.h"

using dlock::HasPrivilege;
using dlock::PrivilegesOn;

TEST_CASE("SHOW GRANTS: global, database patterns, tables, roles and columns") {
  const std::vector<std::string> grants = {
      "GRANT USAGE ON *.* TO `app`@`%`",
      "GRANT SELECT, INSERT ON `app\\_db`.* TO `app`@`%`",
      "GRANT UPDATE, DELETE ON `app_db`.`distributed_lock` TO `app`@`%`",
      "GRANT SELECT (owner), UPDATE (owner) ON `other`.`t` TO `app`@`%`",
      "GRANT EXECUTE ON PROCEDURE `app_db`.`p` TO `app`@`%`",
      "GRANT `reader` TO `app`@`%`",
  };
  auto lease = PrivilegesOn(grants, "app_db", "distributed_lock");
  CHECK(HasPrivilege(lease, "SELECT"));
  CHECK(HasPrivilege(lease, "INSERT"));
  CHECK(HasPrivilege(lease, "UPDATE"));
  CHECK(HasPrivilege(lease, "DELETE"));
  CHECK_FALSE(HasPrivilege(lease, "CREATE"));
  auto fence = PrivilegesOn(grants, "app_db", "distributed_lock_fence");
  CHECK(HasPrivilege(fence, "SELECT"));
  CHECK_FALSE(HasPrivilege(fence, "UPDATE"));
  // `app\_db` is a pattern whose _ is literal: appxdb does not match.
  CHECK_FALSE(HasPrivilege(PrivilegesOn(grants, "appxdb", "distributed_lock"), "SELECT"));
  // A column grant is not a table privilege (USAGE, from *.*, is no privilege).
  const std::set<std::string> usage = {"USAGE"};
  CHECK(PrivilegesOn(grants, "other", "t") == usage);
  // ALL covers everything; a % pattern matches any database.
  auto all = PrivilegesOn({"GRANT ALL PRIVILEGES ON `a%`.* TO `x`@`%`"}, "abc", "t");
  CHECK(HasPrivilege(all, "CREATE"));
  CHECK(PrivilegesOn({"GRANT ALL PRIVILEGES ON `a%`.* TO `x`@`%`"}, "bc", "t").empty());
  CHECK(HasPrivilege(PrivilegesOn({"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"}, "d", "t"),
                     "DELETE"));
}

TEST_CASE("UrlWithoutPassword keeps everything but the password") {
  std::string out;
  REQUIRE(dlock::UrlWithoutPassword("mysql://app:s3cret@db1:3306/app?table=jobs", &out).ok());
  CHECK(out == "mysql://app@db1:3306/app?table=jobs");
  REQUIRE(dlock::UrlWithoutPassword("mariadb://app:p%40ss@[::1]:3307/db", &out).ok());
  CHECK(out == "mariadb://app@[::1]:3307/db");
  REQUIRE(dlock::UrlWithoutPassword("mysql://app@db1/app", &out).ok());
  CHECK(out == "mysql://app@db1/app");
  REQUIRE(dlock::UrlWithoutPassword("mysql://db1/app", &out).ok());
  CHECK(out == "mysql://db1/app");
  // An '@' in the password (unencoded) splits at the last '@', as the parser does.
  REQUIRE(dlock::UrlWithoutPassword("mysql://app:a@b@db1/app", &out).ok());
  CHECK(out == "mysql://app@db1/app");
  // What does not parse gives nothing back.
  CHECK(dlock::UrlWithoutPassword("http://app:s3cret@db1/app", &out).code() == dlock::Code::kInvalid);
  CHECK(out.empty());
}

TEST_CASE("DescribeSchema: table names from the URL, DDL without a server") {
  dlock::SchemaSql sql;
  REQUIRE(dlock::DescribeSchema("", &sql).ok());
  CHECK(sql.lease_table == "distributed_lock");
  CHECK(sql.fence_table == "distributed_lock_fence");
  CHECK(sql.row_table == "fixed_lock");
  CHECK(sql.claim_table == "distributed_lock_claim");
  REQUIRE(sql.statements.size() == 5);
  CHECK(sql.statements[0].find("CREATE TABLE IF NOT EXISTS `distributed_lock`") == 0);
  CHECK(sql.statements[3].find("CREATE TABLE IF NOT EXISTS `distributed_lock_claim`") == 0);
  CHECK(sql.statements[4].find("INSERT IGNORE INTO `distributed_lock_fence`") == 0);
  REQUIRE(dlock::DescribeSchema("mysql://u@h/db?table=jobs&row_table=rows", &sql).ok());
  CHECK(sql.fence_table == "jobs_fence");
  CHECK(sql.statements[2].find("`rows`") != std::string::npos);
  CHECK(dlock::DescribeSchema("mysql://u@h/db?table=1bad", &sql).code() == dlock::Code::kInvalid);
}
