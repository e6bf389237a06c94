// How dlock speaks: one-line messages on stderr ("dlock: ..."), with every
// password it knows of taken out first. The password may come from the URL
// (well-formed or not) or from DLOCK_PASSWORD; whatever prints a message
// (the core's, CLI11's or dlock's own) goes through Scrub.
#ifndef DLOCK_CLI_SAY_H_
#define DLOCK_CLI_SAY_H_

#include <string>

namespace dlock_cli {

// Remembers what in url (and in $DLOCK_PASSWORD) may be a password.
void NoteSecrets(const std::string& url);
// text with each remembered secret replaced by "***".
std::string Scrub(const std::string& text);
// Prints "dlock: msg" (scrubbed) on stderr.
void Say(const std::string& msg);
// Say(msg), then returns code.
int Fail(int code, const std::string& msg);

}  // namespace dlock_cli

#endif  // DLOCK_CLI_SAY_H_
