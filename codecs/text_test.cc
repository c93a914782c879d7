#include "codecs/text.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace infergate::codecs
