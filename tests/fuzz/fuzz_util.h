#pragma once

// Shared by the fuzz drivers: property checks that abort (so libFuzzer and the replay
// runner both report them) instead of gtest assertions.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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

// Takes structured choices from the fuzzer's bytes, front to back; once they run out
// every choice is 0 (so every input, however short, describes one case).
class FuzzReader {
 public:
  FuzzReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t byte() { return offset_ < size_ ? data_[offset_++] : 0; }
  // A value in [0, bound); bound > 0.
  size_t below(size_t bound) { return byte() % bound; }
  bool flag() { return (byte() & 1) != 0; }
  uint64_t u64() {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value = (value << 8) | byte();
    return value;
  }
  // Up to `max` bytes as they are.
  std::string bytes(size_t max) {
    size_t n = below(max + 1);
    std::string out;
    while (n-- > 0 && offset_ < size_) out.push_back(static_cast<char>(data_[offset_++]));
    return out;
  }
  size_t remaining() const { return size_ - offset_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

// The sizes a stream is cut into, from one plan byte (the HTTP drivers): 0 and a stream of
// at most 4 KiB, one byte at a time; otherwise 16 sizes drawn from the byte, cycled.
inline std::vector<size_t> splitPlan(uint8_t plan, size_t stream_size) {
  if (plan == 0 && stream_size <= 4096) return {1};
  std::vector<size_t> pieces;
  uint32_t state = plan * 2654435761u + 1;
  for (int i = 0; i < 16; ++i) {
    state = state * 1103515245u + 12345u;
    pieces.push_back(1 + (state >> 16) % (plan + 1u) * 7);
  }
  return pieces;
}
