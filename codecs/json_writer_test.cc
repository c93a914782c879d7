#include "codecs/json_writer.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace infergate::codecs {
namespace {

std::string dbl(double v) {
  std::string out;
  appendJsonDouble(out, v);
  return out;
}

TEST(JsonWriter, WritesDoublesInRapidjsonLayout) {
  EXPECT_EQ(dbl(1.0), "1.0");
  EXPECT_EQ(dbl(-2.0), "-2.0");
  EXPECT_EQ(dbl(0.0), "0.0");
  EXPECT_EQ(dbl(-0.0), "-0.0");
  EXPECT_EQ(dbl(0.5), "0.5");
  EXPECT_EQ(dbl(12.34), "12.34");
  EXPECT_EQ(dbl(0.001234), "0.001234");
  EXPECT_EQ(dbl(1e-7), "1e-7");
  EXPECT_EQ(dbl(1.5e-7), "1.5e-7");
  EXPECT_EQ(dbl(1e20), "100000000000000000000.0");
  EXPECT_EQ(dbl(1e21), "1e21");
  EXPECT_EQ(dbl(1.234e30), "1.234e30");
  EXPECT_EQ(dbl(1e300), "1e300");
  EXPECT_EQ(dbl(static_cast<double>(0.1f)), "0.10000000149011612");
}

// writeJsonDouble copies digits in whole words and may overwrite past the end it returns,
// never past kMaxJsonNumberChars: each layout at its longest, negative, into a heap block
// of exactly that size (AddressSanitizer reports a byte more), with the same text as
// appendJsonDouble gives.
TEST(JsonWriter, EveryLayoutAtItsLongestStaysInsideItsRoom) {
  const struct {
    double value;
    std::string_view text;
  } cases[] = {
      {-123456789012345678e3, "-123456789012345680000.0"},  // digits then zeros, kk = 21
      {-1.2345678901234567, "-1.2345678901234567"},          // 17 digits, point after one
      {-1234567890123456.7, "-1234567890123456.8"},          // point after 16
      {-1.2345678901234567e-6, "-0.0000012345678901234567"},  // five zeros, 17 digits
      {-1.2345678901234568e-300, "-1.2345678901234568e-300"},
      {-1e-300, "-1e-300"},
      {-5e-324, "-5e-324"},
  };
  for (const auto& c : cases) {
    auto room = std::make_unique<char[]>(kMaxJsonNumberChars);
    const char* end = writeJsonDouble(room.get(), c.value);
    EXPECT_EQ(std::string_view(room.get(), static_cast<size_t>(end - room.get())), c.text);
    EXPECT_EQ(dbl(c.value), c.text);
    EXPECT_EQ(std::strtod(std::string(c.text).c_str(), nullptr), c.value) << c.text;
  }
}

TEST(JsonWriter, WritesNonFiniteAsTritonLiterals) {
  EXPECT_EQ(dbl(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(dbl(std::numeric_limits<double>::infinity()), "Infinity");
  EXPECT_EQ(dbl(-std::numeric_limits<double>::infinity()), "-Infinity");
}

TEST(JsonWriter, DoublesRoundTripExactly) {
  const double samples[] = {0.1, 1.0 / 3, 123456789.125, 5e-324, 1.7976931348623157e308,
                            2.2250738585072014e-308, 9007199254740993.0, 1e-6, 1e-5};
  for (double v : samples) {
    std::string s = dbl(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
  }
}

// The significant digits of a number as written (sign, point, exponent and the zeros that
// only place the point left out).
std::string significantDigits(std::string_view text) {
  std::string digits;
  for (char c : text.substr(0, text.find_first_of("eE"))) {
    if (c >= '0' && c <= '9') digits.push_back(c);
  }
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return "";
  digits.erase(0, first);
  digits.erase(digits.find_last_not_of('0') + 1);
  return digits;
}

TEST(JsonWriter, ExactShortDecimalsGetTheShortestRoundTripDigits) {
  // Integers, halves, quarters, ... (what the quick path takes) and their neighbours that
  // it must leave to the general search: each written value reads back as itself, with
  // exactly the digits of the shortest round-trip form.
  std::vector<double> values;
  for (int i = -5000; i <= 5000; ++i) values.push_back(i * 0.25 - 512.0);
  for (double v : {1.0, 7.0, 1e15 - 1, 1e15, 1e15 + 2, 999999999999999.5, 1125899906842624.0,
                   0.5, 0.03125, 1.0 / 1024, 3.0 / (1 << 22), 5.0 / (1ULL << 23), 511.75,
                   123456789.125, 0.1, 0.2, 0.3, 1e-7, 1e22, 1e23, 4503599627370497.0,
                   static_cast<double>(0.1f), static_cast<double>(123.456f),
                   static_cast<double>(16777215.0f)}) {
    values.push_back(v);
    values.push_back(-v);
    values.push_back(std::nextafter(v, 0.0));
    values.push_back(std::nextafter(v, 1e300));
  }
  for (double v : values) {
    if (v == 0) continue;
    const std::string written = dbl(v);
    EXPECT_EQ(std::strtod(written.c_str(), nullptr), v) << written;
    char reference[32];
    auto r = std::to_chars(reference, reference + sizeof(reference), v, std::chars_format::scientific);
    EXPECT_EQ(significantDigits(written), significantDigits(std::string_view(reference, r.ptr - reference)))
        << written;
  }
}

TEST(JsonWriter, EscapesLikeTriton) {
  std::string out;
  appendJsonString(out, std::string_view("a\"b\\c\n\t\x01" "\x7f" "\xff/", 11));
  EXPECT_EQ(out, std::string("\"a\\\"b\\\\c\\n\\t\\u0001") + "\x7f" "\xff/\"");
}

TEST(JsonWriter, WritesExactIntegers) {
  std::string out;
  appendJsonInt(out, std::numeric_limits<int64_t>::min());
  out.push_back(' ');
  appendJsonUint(out, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(out, "-9223372036854775808 18446744073709551615");
}

TEST(JsonWriter, InsertsCommasBetweenElements) {
  std::string out;
  JsonWriter w(out);
  w.beginObject().key("a").int64(1).key("b").beginArray().string("x").boolean(true).null()
      .endArray().key("c").beginObject().endObject().key("d").dbl(2).endObject();
  EXPECT_EQ(out, R"({"a":1,"b":["x",true,null],"c":{},"d":2.0})");
}

}  // namespace
}  // namespace infergate::codecs
