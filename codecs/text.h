#pragma once

// Small text helpers on std::string_view (Debian's abseil string functions take its own
// absl::string_view, which std::string_view does not convert to).

#include <array>
#include <bit>
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

// RFC 9110 5.6.2 tchar and 5.5 field-vchar, one table lookup per byte. Header names and
// values are checked on every request, eight bytes at a time (isHttpToken and
// isHttpFieldValue below): the table judges the bytes a word's arithmetic leaves open.
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

// A byte a field value may hold: not a control byte (HTAB allowed).
inline bool isHttpFieldByte(char c) {
  return text_detail::kHttpByteClass[static_cast<unsigned char>(c)] != text_detail::kControl;
}

inline char asciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// ---- eight bytes at a time: words read with memcpy (SWAR) ----

inline constexpr uint64_t kEveryByte = 0x0101010101010101ULL;  // 0x01 in each byte

// Whether a byte of `word` is below `n` (n <= 0x80; a byte >= 0x80 never is): exact as a
// yes or no, though not as to which byte.
constexpr bool anyByteBelow(uint64_t word, uint64_t n) {
  return ((word - n * kEveryByte) & ~word & (0x80 * kEveryByte)) != 0;
}

// Whether a byte of `word` is `c`.
constexpr bool anyByteIs(uint64_t word, uint8_t c) { return anyByteBelow(word ^ (c * kEveryByte), 1); }

// Whether no byte of `s` is one that `byte_is` names: eight bytes at a time by `word_has`
// (true exactly when one of a word's bytes is such a byte), the rest one by one.
template <typename WordHas, typename ByteIs>
bool noByteWhere(std::string_view s, WordHas word_has, ByteIs byte_is) {
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    if (word_has(word)) return false;
  }
  for (; i < s.size(); ++i) {
    if (byte_is(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// A word's eight bytes as 64 bits, the first byte lowest, whatever the machine's order.
inline uint64_t byteOrderedWord(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  return w;
}

namespace text_detail {
inline constexpr uint64_t kHighs = 0x80 * kEveryByte;

// The high bit of each byte of `w` (7-bit bytes only) that lies in [lo, hi].
constexpr uint64_t inRange(uint64_t w, uint8_t lo, uint8_t hi) {
  return (w + (0x80 - lo) * kEveryByte) & ~(w + (0x7f - hi) * kEveryByte) & kHighs;
}

// The index of the lowest byte flagged in `flags` (high bits; not 0). Each flag the
// arithmetic above or below sets is exact up to the first true one (borrows and carries
// only go upward), so the lowest is always a true one.
inline size_t firstFlagged(uint64_t flags) { return static_cast<size_t>(std::countr_zero(flags)) / 8; }
}  // namespace text_detail

// From `p` (before `limit`), past the bytes of a token (RFC 9110 5.6.2: a field name).
// Whole words of letters, digits and '-' (nearly every name) are passed at once; a word's
// first other byte, and the last bytes before the limit, are judged one by one.
inline const char* skipHttpTokenBytes(const char* p, const char* limit) {
  using namespace text_detail;
  while (limit - p >= 8) {
    const uint64_t w = byteOrderedWord(p);
    const uint64_t folded = w | (0x20 * kEveryByte);  // 'A'..'Z' to 'a'..'z' (7-bit bytes)
    const uint64_t common = inRange(folded, 'a', 'z') | inRange(w, '0', '9') | inRange(w, '-', '-');
    const uint64_t other = (~common & kHighs) | (w & kHighs);
    if (other == 0) {
      p += 8;
      continue;
    }
    p += firstFlagged(other);
    if (!isHttpTokenChar(*p)) return p;
    ++p;  // a token byte outside the common ones ('_', '.', ...)
  }
  while (p < limit && isHttpTokenChar(*p)) ++p;
  return p;
}

// From `p` (before `limit`), past the bytes a field value may hold (RFC 9110 5.5: no
// control byte but HTAB). Whole words without a control byte or HTAB are passed at once.
inline const char* skipHttpFieldBytes(const char* p, const char* limit) {
  using namespace text_detail;
  while (limit - p >= 8) {
    const uint64_t w = byteOrderedWord(p);
    const uint64_t below_space = (w - 0x20 * kEveryByte) & ~w & kHighs;  // bytes 0x00..0x1f
    const uint64_t del = ((w ^ (0x7f * kEveryByte)) - kEveryByte) & ~(w ^ (0x7f * kEveryByte)) & kHighs;
    const uint64_t flags = below_space | del;
    if (flags == 0) {
      p += 8;
      continue;
    }
    p += firstFlagged(flags);
    if (*p != '\t') return p;
    ++p;
  }
  while (p < limit && isHttpFieldByte(*p)) ++p;
  return p;
}

// A field name: a token (non-empty, tchar only).
inline bool isHttpToken(std::string_view s) {
  const char* end = s.data() + s.size();
  return !s.empty() && skipHttpTokenBytes(s.data(), end) == end;
}

// A field value without control bytes (HTAB allowed): no CR, LF or NUL can hide in it.
inline bool isHttpFieldValue(std::string_view s) {
  const char* end = s.data() + s.size();
  return skipHttpFieldBytes(s.data(), end) == end;
}

// Eight bytes with their ASCII capitals lowercased, every other byte (>= 0x80 too) kept.
// A byte's low seven bits plus 0x3F carry into its top bit from 'A' up, plus 0x25 from
// past 'Z' up; neither sum carries into the next byte.
inline uint64_t asciiLowerWord(uint64_t x) {
  const uint64_t low7 = x & (0x7F * kEveryByte);
  const uint64_t from_a = low7 + (0x80 - 'A') * kEveryByte;
  const uint64_t past_z = low7 + (0x80 - 'Z' - 1) * kEveryByte;
  const uint64_t capital = from_a & ~past_z & ~x & (0x80 * kEveryByte);
  return x | (capital >> 2);
}

// Header names are compared on every request: eight bytes at a time, case folded a word at
// a time where they differ (the last word overlaps the one before: no byte loop past 8).
inline bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n < 8) {
    for (size_t i = 0; i < n; ++i) {
      if (asciiLower(a[i]) != asciiLower(b[i])) return false;
    }
    return true;
  }
  auto sameWord = [&a, &b](size_t at) {
    uint64_t x, y;
    std::memcpy(&x, a.data() + at, 8);
    std::memcpy(&y, b.data() + at, 8);
    return x == y || asciiLowerWord(x) == asciiLowerWord(y);
  };
  for (size_t i = 0; i + 8 <= n; i += 8) {
    if (!sameWord(i)) return false;
  }
  return n % 8 == 0 || sameWord(n - 8);
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
