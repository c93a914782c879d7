#include "codecs/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace infergate::codecs {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";

// 0: write as is; otherwise the escape letter ('u' for \u00XX).
constexpr char escapeFor(unsigned char c) {
  switch (c) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case '\b':
      return 'b';
    case '\f':
      return 'f';
    case '\n':
      return 'n';
    case '\r':
      return 'r';
    case '\t':
      return 't';
    default:
      return c < 0x20 ? 'u' : 0;
  }
}

struct EscapeTable {
  char e[256];
  constexpr EscapeTable() : e() {
    for (int i = 0; i < 256; ++i) e[i] = escapeFor(static_cast<unsigned char>(i));
  }
};
constexpr EscapeTable kEscapes;

// The digit buffer: up to 17 digits, then '0's (below), padded so that copyDigits may read
// whole 8-byte words from any of the layouts' starting points (digits + kk, kk <= 21).
constexpr int kDigitsBytes = 48;

// `n` (at most 24) digits to `p`, in whole 8-byte words: up to 7 bytes past p + n are
// overwritten (writeJsonDouble's callers leave kMaxJsonNumberChars of room; the layouts
// below stay inside it). Fixed-size copies compile to plain moves; a memcpy of a length
// known only at run time, or a byte loop the compiler turns into one, is a call into libc
// for a few bytes, once per number of a tensor written as JSON.
char* copyDigits(char* p, const char* digits, int n) {
  std::memcpy(p, digits, 8);
  if (n > 8) std::memcpy(p + 8, digits + 8, 8);
  if (n > 16) std::memcpy(p + 16, digits + 16, 8);
  return p + n;
}

char* writeExponent(char* p, int k) {
  if (k < 0) {
    *p++ = '-';
    k = -k;
  }
  if (k >= 100) {
    *p++ = static_cast<char>('0' + k / 100);
    k %= 100;
    *p++ = static_cast<char>('0' + k / 10);
    *p++ = static_cast<char>('0' + k % 10);
  } else if (k >= 10) {
    *p++ = static_cast<char>('0' + k / 10);
    *p++ = static_cast<char>('0' + k % 10);
  } else {
    *p++ = static_cast<char>('0' + k);
  }
  return p;
}

// 5^k for k <= 22 (the last power below 2^53).
constexpr uint64_t kPow5[] = {1ULL,
                              5ULL,
                              25ULL,
                              125ULL,
                              625ULL,
                              3125ULL,
                              15625ULL,
                              78125ULL,
                              390625ULL,
                              1953125ULL,
                              9765625ULL,
                              48828125ULL,
                              244140625ULL,
                              1220703125ULL,
                              6103515625ULL,
                              30517578125ULL,
                              152587890625ULL,
                              762939453125ULL,
                              3814697265625ULL,
                              19073486328125ULL,
                              95367431640625ULL,
                              476837158203125ULL,
                              2384185791015625ULL};
constexpr uint64_t kMaxShortDecimal = 999'999'999'999'999ULL;  // 15 digits

// The digits of `value` (finite, > 0) when it is exactly a decimal of at most 15
// significant digits (an integer, 511.75, 0.03125): those digits are then its shortest
// round-trip form, since no two decimals of at most 15 digits (DBL_DIG) read as the same
// double. Integers, halves, quarters and the like in a tensor take this path instead of
// the general shortest-digits search, which costs several hundred instructions a number.
// False (nothing written) for every other value.
bool exactShortDecimal(double value, char* digits, int& length, int& exp10) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const int biased = static_cast<int>(bits >> 52) & 0x7ff;
  if (biased == 0) return false;  // subnormal: far past 15 digits
  uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
  int e = biased - 1075;  // value = m * 2^e
  const int zeros = __builtin_ctzll(m);
  m >>= zeros;
  e += zeros;
  uint64_t n;  // value = n * 10^-k
  int k = 0;
  if (e >= 0) {
    if (e > 50 || (m >> (50 - e)) != 0) return false;  // past 2^50 > 10^15
    n = m << e;
  } else {
    k = -e;
    if (k > 22 || __builtin_mul_overflow(m, kPow5[k], &n)) return false;  // m / 2^k = m*5^k / 10^k
  }
  if (n > kMaxShortDecimal) return false;
  while (n % 10 == 0) {  // only an integer can end in zeros (m*5^k is odd)
    n /= 10;
    --k;
  }
  char reversed[16];
  int count = 0;
  for (; n != 0; n /= 10) reversed[count++] = static_cast<char>('0' + n % 10);
  for (int i = 0; i < count; ++i) digits[i] = reversed[count - 1 - i];
  length = count;
  exp10 = count - 1 - k;
  return true;
}

}  // namespace

void appendJsonString(std::string& out, std::string_view value) {
  out.push_back('"');
  size_t start = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    char esc = kEscapes.e[static_cast<unsigned char>(value[i])];
    if (esc == 0) continue;
    out.append(value.data() + start, i - start);
    out.push_back('\\');
    out.push_back(esc);
    if (esc == 'u') {
      unsigned char c = static_cast<unsigned char>(value[i]);
      out.append("00");
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
    start = i + 1;
  }
  out.append(value.data() + start, value.size() - start);
  out.push_back('"');
}

void appendJsonInt(std::string& out, int64_t value) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, r.ptr);
}

void appendJsonUint(std::string& out, uint64_t value) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, r.ptr);
}

char* writeJsonDouble(char* p, double value) {
  if (std::isnan(value)) {
    std::memcpy(p, "NaN", 3);
    return p + 3;
  }
  if (std::isinf(value)) {
    if (value < 0) {
      std::memcpy(p, "-Infinity", 9);
      return p + 9;
    }
    std::memcpy(p, "Infinity", 8);
    return p + 8;
  }
  if (value == 0) {
    if (std::signbit(value)) {
      std::memcpy(p, "-0.0", 4);
      return p + 4;
    }
    std::memcpy(p, "0.0", 3);
    return p + 3;
  }
  if (value < 0) {
    *p++ = '-';
    value = -value;
  }
  // Shortest round-trip digits and the decimal exponent of the first one, re-laid out
  // below as rapidjson's Prettify.
  char digits[kDigitsBytes];
  std::memset(digits, '0', sizeof(digits));  // past the digits: the zeros of 1234e7
  int length = 0;
  int exp10 = 0;
  if (!exactShortDecimal(value, digits, length, exp10)) {
    char sci[32];  // d.ddddde[+-]XX
    auto r = std::to_chars(sci, sci + sizeof(sci), value, std::chars_format::scientific);
    const char* s = sci;
    for (; s < r.ptr && *s != 'e'; ++s) {
      if (*s != '.') digits[length++] = *s;
    }
    std::from_chars(s + 1 + (s[1] == '+' ? 1 : 0), r.ptr, exp10);
  }
  // value = 0.digits * 10^kk, i.e. digits * 10^k with k = kk - length.
  const int kk = exp10 + 1;
  const int k = kk - length;
  // Where each layout writes, at most (p already past a '-'): 1 + 24; 1 + 16, 2 + kk + 8 *
  // ceil((length - kk) / 8) <= 26; 8 + 24 = 32 (kMaxJsonNumberChars); 3 + 16 + 5.
  if (k >= 0 && kk <= 21) {  // 1234e7 -> 12340000000.0
    p = copyDigits(p, digits, kk);  // the digits, then '0's up to kk
    *p++ = '.';
    *p++ = '0';
    return p;
  }
  if (kk > 0 && kk <= 21) {  // 1234e-2 -> 12.34
    p = copyDigits(p, digits, kk);
    *p++ = '.';
    return copyDigits(p, digits + kk, length - kk);
  }
  if (kk > -6 && kk <= 0) {  // 1234e-6 -> 0.001234
    std::memcpy(p, "0.00000", 8);  // "0." and up to five '0's (the NUL is overwritten)
    p += 2 - kk;
    return copyDigits(p, digits, length);
  }
  if (length == 1) {  // 1e30
    *p++ = digits[0];
    *p++ = 'e';
    return writeExponent(p, kk - 1);
  }
  *p++ = digits[0];  // 1234e30 -> 1.234e33
  *p++ = '.';
  p = copyDigits(p, digits + 1, length - 1);
  *p++ = 'e';
  return writeExponent(p, kk - 1);
}

void appendJsonDouble(std::string& out, double value) {
  char buf[kMaxJsonNumberChars];
  char* end = writeJsonDouble(buf, value);
  out.append(buf, end);
}

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_.push_back(',');
    has_element_.back() = true;
  }
}

JsonWriter& JsonWriter::beginObject() {
  separate();
  out_.push_back('{');
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  out_.push_back('}');
  has_element_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  separate();
  out_.push_back('[');
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  out_.push_back(']');
  has_element_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  separate();
  appendJsonString(out_, name);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::string(std::string_view value) {
  separate();
  appendJsonString(out_, value);
  return *this;
}

JsonWriter& JsonWriter::boolean(bool value) {
  separate();
  out_.append(value ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::int64(int64_t value) {
  separate();
  appendJsonInt(out_, value);
  return *this;
}

JsonWriter& JsonWriter::uint64(uint64_t value) {
  separate();
  appendJsonUint(out_, value);
  return *this;
}

JsonWriter& JsonWriter::dbl(double value) {
  separate();
  appendJsonDouble(out_, value);
  return *this;
}

JsonWriter& JsonWriter::null() {
  separate();
  out_.append("null");
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  separate();
  out_.append(json);
  return *this;
}

}  // namespace infergate::codecs
