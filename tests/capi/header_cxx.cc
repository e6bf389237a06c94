// dlock.h compiles as C++11 (-std=c++11 -pedantic-errors -Werror), is
// self-contained, guarded, and declares C linkage (this links against the
// C library's unmangled symbols).
#include "dlock/dlock.h"
#include "dlock/dlock.h"

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(DLOCK_OK == 0 && DLOCK_BUSY == 1, "codes");
static_assert(DLOCK_E_INVALID == -1 && DLOCK_E_TIMEOUT == -12, "codes");
static_assert(DLOCK_STATE_IDLE == 0 && DLOCK_STATE_LOST == 2, "states");
static_assert(sizeof(dlock_error::message) == 512, "dlock_error layout");
static_assert(std::is_standard_layout<dlock_error>::value, "dlock_error layout");
static_assert(std::is_same<decltype(&dlock_exec),
                           int (*)(dlock_lock*, const char*, const char* const*, size_t, int64_t*,
                                   dlock_error*)>::value,
              "dlock_exec signature");
static_assert(std::is_same<decltype(&dlock_token), uint64_t (*)(const dlock_lock*)>::value,
              "dlock_token signature");
static_assert(std::is_same<decltype(&dlock_wait_lost), int (*)(dlock_lock*, int64_t, dlock_error*)>::value,
              "dlock_wait_lost signature");
static_assert(std::is_same<decltype(&dlock_client_counter),
                           int (*)(const dlock_client*, const char*, uint64_t*, dlock_error*)>::value,
              "dlock_client_counter signature");
static_assert(std::is_same<decltype(&dlock_counter_names), const char* const* (*)()>::value,
              "dlock_counter_names signature");
static_assert(std::is_standard_layout<dlock_event>::value, "dlock_event layout");
static_assert(DLOCK_E_CANCELLED == -13 && DLOCK_E_MAX_HOLD == -14, "codes");

int main() {
  dlock_error err = {};
  dlock_config* cfg = nullptr;
  if (dlock_config_new(&cfg, &err) != DLOCK_OK) {
    std::fprintf(stderr, "dlock_config_new: %s\n", err.message);
    return 1;
  }
  int rc = dlock_config_set(cfg, "mode", DLOCK_MODE_ROW, &err);
  dlock_config_free(cfg);
  if (rc != DLOCK_OK) {
    std::fprintf(stderr, "dlock_config_set: %s\n", err.message);
    return 1;
  }
  if (std::strcmp(dlock_code_name(DLOCK_BUSY), "DLOCK_BUSY") != 0) return 1;
  if (dlock_hold_count(nullptr) != 0 || dlock_cancel(nullptr) != DLOCK_E_INVALID) return 1;
  std::printf("C++ header check: dlock %s\n", dlock_version());
  return 0;
}
