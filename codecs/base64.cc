#include "codecs/base64.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "codecs/text.h"

namespace infergate::codecs {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The value of each byte in the alphabet, -1 for the others.
constexpr std::array<int8_t, 256> kValues = [] {
  std::array<int8_t, 256> values{};
  values.fill(-1);
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    values[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
  return values;
}();

}  // namespace

std::string base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  auto byte = [&](size_t i) { return i < in.size() ? static_cast<uint8_t>(in[i]) : 0u; };
  for (size_t i = 0; i < in.size(); i += 3) {
    const uint32_t group = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    const size_t present = std::min<size_t>(3, in.size() - i);  // bytes of this group
    for (size_t k = 0; k < 4; ++k) {
      out.push_back(k <= present ? kAlphabet[(group >> (18 - 6 * k)) & 63] : '=');
    }
  }
  return out;
}

std::optional<std::string> base64Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3 + 2);
  uint32_t bits = 0;
  int pending = 0;  // bits in `bits` not yet written out
  size_t digits = 0;
  size_t padding = 0;
  for (char c : text) {
    if (isAsciiSpace(c)) continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int8_t value = kValues[static_cast<uint8_t>(c)];
    if (value < 0 || padding > 0) return std::nullopt;
    bits = bits << 6 | static_cast<uint32_t>(value);
    pending += 6;
    ++digits;
    if (pending >= 8) {
      pending -= 8;
      out.push_back(static_cast<char>((bits >> pending) & 0xff));
    }
  }
  // One digit past a whole group carries 6 bits: less than a byte.
  if (digits % 4 == 1 || padding > 2) return std::nullopt;
  return out;
}

}  // namespace infergate::codecs
