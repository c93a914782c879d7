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

TEST(JsonDepth, UnbalancedOrTruncatedTextIsLeftToTheParser) {
  EXPECT_TRUE(checkJsonDepth("]]]]{", 1).ok());
  EXPECT_TRUE(checkJsonDepth(R"({"a":"unterminated)", 1).ok());
  EXPECT_TRUE(checkJsonDepth(R"({"a":"ends in a backslash\)", 1).ok());
}

}  // namespace
}  // namespace infergate::codecs
