#pragma once

// Small text helpers on std::string_view (Debian's abseil string functions take its own
// absl::string_view, which std::string_view does not convert to).

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

namespace infergate::codecs {

inline bool isAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

inline std::string_view trimAscii(std::string_view s) {
  while (!s.empty() && isAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}

// RFC 9110 5.6.2 tchar and 5.5 field-vchar, one table lookup per byte: header names and
// values are checked on every request.
namespace text_detail {
enum : uint8_t { kControl = 0, kFieldByte = 1, kTokenByte = 2 };  // a token byte is a field byte
inline constexpr auto kHttpByteClass = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0x20; c < 0x100; ++c) t[c] = kFieldByte;  // VCHAR, SP, obs-text
  t[0x7f] = kControl;
  t['\t'] = kFieldByte;
  for (int c = '0'; c <= '9'; ++c) t[c] = kTokenByte;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = kTokenByte;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = kTokenByte;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = kTokenByte;
  return t;
}();
}  // namespace text_detail

inline bool isHttpTokenChar(char c) {
  return text_detail::kHttpByteClass[static_cast<unsigned char>(c)] == text_detail::kTokenByte;
}

// A field name: a token (non-empty, tchar only).
inline bool isHttpToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!isHttpTokenChar(c)) return false;
  }
  return true;
}

// A byte a field value may hold: not a control byte (HTAB allowed).
inline bool isHttpFieldByte(char c) {
  return text_detail::kHttpByteClass[static_cast<unsigned char>(c)] != text_detail::kControl;
}

// A field value without control bytes (HTAB allowed): no CR, LF or NUL can hide in it.
inline bool isHttpFieldValue(std::string_view s) {
  for (char c : s) {
    if (!isHttpFieldByte(c)) return false;
  }
  return true;
}

inline char asciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// Header names are compared on every request, and most match as written: eight bytes at
// a time compared as they are, and case folded only where they differ.
inline bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  size_t i = 0;
  for (; i + 8 <= a.size(); i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x == y) continue;
    for (size_t j = i; j < i + 8; ++j) {
      if (asciiLower(a[j]) != asciiLower(b[j])) return false;
    }
  }
  for (; i < a.size(); ++i) {
    if (asciiLower(a[i]) != asciiLower(b[i])) return false;
  }
  return true;
}

inline std::vector<std::string_view> splitOn(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

// A whole-string decimal unsigned integer, or nullopt.
inline std::optional<uint64_t> parseUint64(std::string_view s) {
  uint64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace infergate::codecs
