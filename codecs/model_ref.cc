#include "codecs/model_ref.h"

#include <limits>

namespace infergate::codecs {

StatusOr<int64_t> parseModelVersion(std::string_view version) {
  if (version.empty()) return -1;
  // std::stol: leading whitespace (isspace in the C locale), an optional sign, digits.
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  size_t pos = 0;
  while (pos < version.size() && is_space(version[pos])) ++pos;
  bool negative = false;
  if (pos < version.size() && (version[pos] == '+' || version[pos] == '-')) {
    negative = version[pos] == '-';
    ++pos;
  }
  const size_t digits_start = pos;
  uint64_t magnitude = 0;
  bool overflow = false;
  constexpr uint64_t kTwoTo63 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1;
  while (pos < version.size() && version[pos] >= '0' && version[pos] <= '9') {
    const uint64_t digit = static_cast<uint64_t>(version[pos] - '0');
    if (magnitude > (kTwoTo63 - digit) / 10) {
      overflow = true;
    } else if (!overflow) {
      magnitude = magnitude * 10 + digit;
    }
    ++pos;
  }
  const uint64_t limit =
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
  if (pos == digits_start || overflow || magnitude > limit) {
    return invalidArgument("failed to get model version from specified version string '", version,
                           "' (details: stol), version should be an integral value > 0");
  }
  if (negative && magnitude != 0) {
    return invalidArgument("invalid model version specified '", version,
                           "' , version should be an integral value > 0");
  }
  return static_cast<int64_t>(magnitude);
}

bool isVerbatimPathSegment(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name) {
    const auto b = static_cast<unsigned char>(c);
    if (b <= 0x20 || b == 0x7f || c == '/' || c == '?' || c == '#') return false;
  }
  return true;
}

}  // namespace infergate::codecs
