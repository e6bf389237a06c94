// Reading SHOW GRANTS: which privileges the current user has on one table.
#ifndef DLOCK_CORE_GRANTS_H_
#define DLOCK_CORE_GRANTS_H_

#include <set>
#include <string>
#include <vector>

namespace dlock {

// The privileges (upper case: "SELECT", "ALL PRIVILEGES", ...) that the
// lines of SHOW GRANTS give on db.table: global grants, database grants
// (with their % and _ patterns) and table grants. Role grants and routine
// grants give none; column grants are not table privileges.
std::set<std::string> PrivilegesOn(const std::vector<std::string>& grants, const std::string& db,
                                   const std::string& table);

// Whether privileges include priv (directly or through ALL).
bool HasPrivilege(const std::set<std::string>& privileges, const std::string& priv);

}  // namespace dlock

#endif  // DLOCK_CORE_GRANTS_H_
