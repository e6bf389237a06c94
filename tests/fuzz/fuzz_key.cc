// Key validation (ValidateKey) and the rendering of keys in messages
// (QuoteKey, PrintableText): a key is accepted exactly when it has 1..512
// bytes and no NUL; what a message shows of any input is one printable,
// bounded line in which the quote cannot be closed early.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_check.h"
#include "options.h"

using dlock_fuzz::Show;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 2048) return 0;
  const std::string key(reinterpret_cast<const char*>(data), size);
  const dlock::Status s = dlock::ValidateKey(key);
  const bool want = !key.empty() && key.size() <= dlock::kMaxKeyBytes &&
                    std::memchr(key.data(), '\0', key.size()) == nullptr;
  FUZZ_CHECK(s.ok() == want, "ValidateKey says %d for %zu bytes %s", s.ok(), key.size(),
             Show(key.substr(0, 100)).c_str());
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == dlock::Code::kInvalid, "code %d", static_cast<int>(s.code()));
    FUZZ_CHECK(dlock_fuzz::OneLine(s.message()) && s.message().size() < 300,
               "message %s", Show(s.message()).c_str());
  }
  const std::string q = dlock::QuoteKey(key);
  FUZZ_CHECK(dlock_fuzz::OneLine(q) && q.size() <= 90, "QuoteKey gave %zu bytes %s", q.size(),
             Show(q).c_str());
  FUZZ_CHECK(q.find('\'') == std::string::npos, "QuoteKey left a quote: %s", Show(q).c_str());
  const std::string p = dlock::PrintableText(key);
  FUZZ_CHECK(dlock_fuzz::OneLine(p), "PrintableText gave %s", Show(p).c_str());
  return 0;
}
