#include "codecs/json_depth.h"

#include <array>
#include <cstring>

namespace infergate::codecs {
namespace {

enum ByteClass : uint8_t { kOther, kOpen, kClose, kQuote };

constexpr std::array<uint8_t, 256> kClasses = [] {
  std::array<uint8_t, 256> classes{};
  classes['['] = kOpen;
  classes['{'] = kOpen;
  classes[']'] = kClose;
  classes['}'] = kClose;
  classes['"'] = kQuote;
  return classes;
}();

// How many '[' and '{' bytes the text holds, strings included: a bound on its depth.
// Eight bytes at a time: '[' (0x5b) and '{' (0x7b) differ only in bit 0x20, and no other
// byte ORed with 0x20 gives 0x7b.
size_t countOpenings(std::string_view text) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7fULL;
  size_t count = 0;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + i, 8);
    const uint64_t x = (word | (0x20 * kOnes)) ^ (0x7b * kOnes);  // zero bytes: openings
    // A byte's high bit ends up set exactly when the byte of x is zero.
    const uint64_t zero = ~(((x & kLow7) + kLow7) | x | kLow7);
    count += static_cast<size_t>(((zero >> 7) * kOnes) >> 56);  // the flags summed in the top byte
  }
  for (; i < text.size(); ++i) count += kClasses[static_cast<uint8_t>(text[i])] == kOpen;
  return count;
}

}  // namespace

Status checkJsonDepth(std::string_view text, uint32_t max_depth) {
  // Most texts (the binary extension's small JSON headers) open fewer arrays and objects
  // than the limit in all: no need to follow their strings.
  if (countOpenings(text) <= max_depth) return absl::OkStatus();
  const char* p = text.data();
  const char* const end = p + text.size();
  uint32_t depth = 0;
  while (p < end) {
    switch (kClasses[static_cast<uint8_t>(*p++)]) {
      case kOther:
        break;
      case kOpen:
        if (++depth > max_depth) {
          return invalidArgument("JSON nested deeper than ", max_depth, " levels");
        }
        break;
      case kClose:
        if (depth > 0) --depth;
        break;
      case kQuote:
        // To the closing quote: a backslash escapes the byte after it.
        while (p < end && *p != '"') p += (*p == '\\') ? 2 : 1;
        ++p;
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace infergate::codecs
