#pragma once

// Shared by the fuzz drivers: property checks that abort (so libFuzzer and the replay
// runner both report them) instead of gtest assertions.

#include <cstdio>
#include <cstdlib>

#include "codecs/status.h"

#define FUZZ_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, \
                   #cond);                                                      \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

// Every error a decoder returns is a Status with a code and a message naming the problem.
inline void checkIsCleanError(const infergate::codecs::Status& status) {
  FUZZ_CHECK(!status.ok());
  FUZZ_CHECK(status.code() != absl::StatusCode::kUnknown);
  FUZZ_CHECK(status.code() != absl::StatusCode::kInternal);
  FUZZ_CHECK(!status.message().empty());
}
