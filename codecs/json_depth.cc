#include "codecs/json_depth.h"

#include <array>

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

}  // namespace

Status checkJsonDepth(std::string_view text, uint32_t max_depth) {
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
