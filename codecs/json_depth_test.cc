#include "codecs/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace infergate::codecs {
namespace {

std::string nested(int levels, std::string_view inner = "1") {
  return R"({"inputs":)" + std::string(levels - 1, '[') + std::string(inner) +
         std::string(levels - 1, ']') + "}";
}

TEST(JsonDepth, CountsArraysAndObjectsFromTheRoot) {
  EXPECT_TRUE(checkJsonDepth("{}", 1).ok());
  EXPECT_TRUE(checkJsonDepth(nested(10), 10).ok());
  Status deep = checkJsonDepth(nested(11), 10);
  EXPECT_EQ(deep.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(messageOf(deep), "JSON nested deeper than 10 levels");
}

TEST(JsonDepth, SiblingsDoNotAddUp) {
  std::string wide = "{";
  for (int i = 0; i < 1000; ++i) wide += std::string(i ? "," : "") + "\"k\":[[1],[2]]";
  wide += "}";
  EXPECT_TRUE(checkJsonDepth(wide, 3).ok());
  EXPECT_FALSE(checkJsonDepth(wide, 2).ok());
}

TEST(JsonDepth, BracketsInStringsDoNotCount) {
  EXPECT_TRUE(checkJsonDepth(R"({"id":"[[[[{{{{"})", 1).ok());
  // An escaped quote does not end the string; an escaped backslash before the quote does.
  EXPECT_TRUE(checkJsonDepth(R"({"id":"\"[[[[\"","x":1})", 1).ok());
  EXPECT_FALSE(checkJsonDepth(R"({"id":"\\",[[1]]})", 2).ok());
}

TEST(JsonDepth, AMillionLevelsIsRefusedWithoutRecursion) {
  std::string bomb(1000000, '[');
  EXPECT_EQ(messageOf(checkJsonDepth(bomb, 100)), "JSON nested deeper than 100 levels");
}

// Texts with few openings in all are passed on a count of '[' and '{' bytes; texts with
// more are followed byte by byte. Both must agree wherever the openings fall in a word.
TEST(JsonDepth, TheCountOfOpeningsAgreesWithTheNesting) {
  for (size_t pad = 0; pad < 9; ++pad) {
    const std::string lead(pad, ' ');
    EXPECT_TRUE(checkJsonDepth(lead + "[[{\"a\":[1]}]]", 4).ok()) << pad;
    EXPECT_FALSE(checkJsonDepth(lead + "[[{\"a\":[1]}]]", 3).ok()) << pad;
    EXPECT_FALSE(checkJsonDepth(lead + "[[[[", 3).ok()) << pad;
    // Bytes that differ from '[' or '{' in one bit do not count: ';' '_' 'K' '{'^0x40.
    EXPECT_TRUE(checkJsonDepth(lead + ";_K;{" + std::string(20, '\x7b' ^ 0x40) + "}", 1).ok()) << pad;
    // More openings than the limit, not nested: the byte-by-byte walk passes it.
    EXPECT_TRUE(checkJsonDepth(lead + "[[],[],[],[],[]]", 2).ok()) << pad;
  }
}

TEST(JsonDepth, UnbalancedOrTruncatedTextIsLeftToTheParser) {
  EXPECT_TRUE(checkJsonDepth("]]]]{", 1).ok());
  EXPECT_TRUE(checkJsonDepth(R"({"a":"unterminated)", 1).ok());
  EXPECT_TRUE(checkJsonDepth(R"({"a":"ends in a backslash\)", 1).ok());
}

}  // namespace
}  // namespace infergate::codecs
