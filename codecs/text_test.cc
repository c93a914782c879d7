#include "codecs/text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace infergate::codecs {
namespace {

// Compared eight bytes at a time where they match as written, byte by byte (letters
// folded) where they do not: every position of a difference must be seen.
TEST(Text, EqualsIgnoreCaseFoldsLettersOnlyAtEveryPosition) {
  const std::string name = "Inference-Header-Content-Length";
  EXPECT_TRUE(equalsIgnoreCase(name, name));
  EXPECT_FALSE(equalsIgnoreCase(name, name.substr(1)));
  for (size_t i = 0; i < name.size(); ++i) {
    std::string other = name;
    other[i] = static_cast<char>(other[i] ^ 0x20);  // the other case of a letter; '-' becomes '\r'
    EXPECT_EQ(equalsIgnoreCase(name, other), name[i] != '-') << i;
    other = name;
    other[i] = '~';
    EXPECT_FALSE(equalsIgnoreCase(name, other)) << i;
  }
  // '^' and '~' differ in bit 0x20 too, and are not letters.
  EXPECT_FALSE(equalsIgnoreCase("abcdefgh^", "abcdefgh~"));
  EXPECT_FALSE(equalsIgnoreCase("abcdefg^", "abcdefg~"));
  EXPECT_TRUE(equalsIgnoreCase("", ""));
}

// Every pair of bytes at every position of names shorter than, as long as and longer than
// a word (the last word overlapping the one before): the word-at-a-time fold must agree
// with folding letters one byte at a time, bytes >= 0x80 and controls included.
TEST(Text, EqualsIgnoreCaseAgreesWithTheByteFoldForEveryByte) {
  for (size_t size : {1u, 7u, 8u, 9u, 12u, 16u, 17u}) {
    for (size_t at = 0; at < size; ++at) {
      std::string a(size, 'k'), b(size, 'K');
      for (int x = 0; x < 256; ++x) {
        for (int y = 0; y < 256; ++y) {
          a[at] = static_cast<char>(x);
          b[at] = static_cast<char>(y);
          const bool expected = asciiLower(static_cast<char>(x)) == asciiLower(static_cast<char>(y));
          if (equalsIgnoreCase(a, b) != expected) {
            ADD_FAILURE() << "size " << size << " at " << at << ": " << x << " vs " << y;
            return;
          }
        }
      }
    }
  }
}

TEST(Text, AsciiLowerWordLowersCapitalsOnly) {
  for (int c = 0; c < 256; ++c) {
    uint64_t word = 0;
    for (int i = 0; i < 8; ++i) word |= static_cast<uint64_t>((c + i * 37) & 0xFF) << (8 * i);
    const uint64_t lowered = asciiLowerWord(word);
    for (int i = 0; i < 8; ++i) {
      const char in = static_cast<char>((word >> (8 * i)) & 0xFF);
      const char out = static_cast<char>((lowered >> (8 * i)) & 0xFF);
      ASSERT_EQ(out, asciiLower(in)) << "byte " << (static_cast<int>(in) & 0xFF) << " lane " << i;
    }
  }
}

// The word tests against their byte rules: every byte value in every lane, the other lanes
// holding bytes that are not sought.
TEST(Text, WordByteTestsAgreeWithTheByteRules) {
  for (int lane = 0; lane < 8; ++lane) {
    for (int c = 0; c < 256; ++c) {
      uint64_t word = 0x7a * kEveryByte;  // 'z' everywhere else
      word = (word & ~(0xFFULL << (8 * lane))) | (static_cast<uint64_t>(c) << (8 * lane));
      ASSERT_EQ(anyByteBelow(word, 0x21), c < 0x21) << lane << " " << c;
      ASSERT_EQ(anyByteBelow(word, 1), c == 0) << lane << " " << c;
      ASSERT_EQ(anyByteIs(word, '\r'), c == '\r') << lane << " " << c;
      ASSERT_EQ(anyByteIs(word, 0x7f), c == 0x7f) << lane << " " << c;
    }
  }
}

// Whether every byte of `s` passes `rule`: the byte-at-a-time reference for the word tests.
bool byByte(std::string_view s, bool (*rule)(char)) {
  for (char c : s) {
    if (!rule(c)) return false;
  }
  return true;
}

// isHttpToken and isHttpFieldValue (eight bytes at a time) against their byte rules, for
// every byte value at every place of strings of 1 to 17 bytes: whole words, and the bytes
// after them.
TEST(Text, TokenAndFieldValueChecksAgreeWithTheByteRules) {
  size_t refused = 0;
  for (size_t size = 1; size <= 17; ++size) {
    for (size_t at = 0; at < size; ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        std::string s(size, 'a');
        s[at] = static_cast<char>(byte);
        const bool token = byByte(s, isHttpTokenChar);
        ASSERT_EQ(isHttpToken(s), token) << "byte " << byte << " at " << at << " of " << size;
        ASSERT_EQ(isHttpFieldValue(s), byByte(s, isHttpFieldByte))
            << "byte " << byte << " at " << at << " of " << size;
        refused += token ? 0 : 1;
      }
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_FALSE(isHttpToken(""));
  EXPECT_TRUE(isHttpFieldValue(""));
  EXPECT_TRUE(isHttpToken("Inference-Header-Content-Length"));
  EXPECT_TRUE(isHttpToken("x_custom.v1~!#$%&'*+^`|"));
  EXPECT_FALSE(isHttpToken("Content Type"));
  EXPECT_TRUE(isHttpFieldValue("application/json;\tq=0.9 \x80\xff"));
  EXPECT_FALSE(isHttpFieldValue("value\r\nInjected: 1"));
  EXPECT_FALSE(isHttpFieldValue(std::string("nul\0inside", 10)));
  EXPECT_FALSE(isHttpFieldValue("del\x7f"));
}

// The same on random strings with several uncommon bytes each, drawn mostly from the bytes
// at the edges of the word tests' ranges ('@' and '[' around the capitals, '/' and ':'
// around the digits, ',' and '.' around '-', HTAB, DEL, 0x80 and 0xFF...): two or more
// flagged bytes in one word, borrows and carries between neighbours.
TEST(Text, TokenAndFieldValueChecksAgreeWithTheByteRulesOnRandomStrings) {
  static constexpr unsigned char kEdges[] = {0x00, 0x09, 0x0a, 0x0d, 0x1f, 0x20, 0x21, ',', '-',  '.',
                                             '/',  '0',  '9',  ':',  '@',  'A',  'Z',  '[', '`',  'a',
                                             'z',  '{',  '|',  '~',  0x7f, 0x80, 0x81, 0xbf, 0xc0, 0xff};
  std::mt19937 random(20261202);
  size_t tokens = 0, values = 0;
  for (int round = 0; round < 200000; ++round) {
    std::string s(1 + random() % 40, 'a');
    for (char& c : s) {
      const uint32_t pick = random() % 8;
      if (pick < 5) c = static_cast<char>(kEdges[random() % sizeof(kEdges)]);
      if (pick == 5) c = static_cast<char>(random() % 256);
    }
    const bool token = byByte(s, isHttpTokenChar);
    const bool value = byByte(s, isHttpFieldByte);
    ASSERT_EQ(isHttpToken(s), token) << testing::PrintToString(s);
    ASSERT_EQ(isHttpFieldValue(s), value) << testing::PrintToString(s);
    tokens += token ? 1 : 0;
    values += value ? 1 : 0;
  }
  // Both answers were seen for both checks.
  EXPECT_GT(tokens, 100u);
  EXPECT_LT(tokens, 200000u);
  EXPECT_GT(values, 100u);
  EXPECT_LT(values, 200000u);
}

}  // namespace
}  // namespace infergate::codecs
