#include "codecs/model_ref.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace infergate::codecs {
namespace {

TEST(ParseModelVersion, FollowsStol) {
  EXPECT_EQ(*parseModelVersion(""), -1);
  EXPECT_EQ(*parseModelVersion("7"), 7);
  EXPECT_EQ(*parseModelVersion(" 3x"), 3);
  EXPECT_EQ(*parseModelVersion("\t\n01"), 1);
  EXPECT_EQ(*parseModelVersion("+2"), 2);
  EXPECT_EQ(*parseModelVersion("-0"), 0);
  EXPECT_EQ(*parseModelVersion("9223372036854775807"), INT64_MAX);
  EXPECT_FALSE(parseModelVersion("9223372036854775808").ok());
  EXPECT_FALSE(parseModelVersion("+").ok());
  EXPECT_FALSE(parseModelVersion("x1").ok());
}

TEST(ParseModelVersion, ErrorsAreTritonsTexts) {
  auto text = parseModelVersion("abc");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(text.status().message()),
            "failed to get model version from specified version string 'abc' (details: stol), "
            "version should be an integral value > 0");
  auto negative = parseModelVersion("-1");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(negative.status().message()),
            "invalid model version specified '-1' , version should be an integral value > 0");
  // The smallest int64 is negative too, not an overflow.
  auto smallest = parseModelVersion("-9223372036854775808");
  ASSERT_FALSE(smallest.ok());
  EXPECT_NE(std::string(smallest.status().message()).find("invalid model version"), std::string::npos);
}

TEST(IsVerbatimPathSegment, TakesWhatTritonMatchesRaw) {
  for (const char* name : {"simple", "%73imple", "a.b", "...", "m:1@x", "a+b,c;d=e", "mod\xc3\xa8le",
                           "a\xff", "~tilde", "(x)"}) {
    EXPECT_TRUE(isVerbatimPathSegment(name)) << name;
  }
}

TEST(IsVerbatimPathSegment, RefusesWhatCannotTravelAsOneSegment) {
  for (std::string name : {"", ".", "..", "a/b", "/", "a?b", "a#b", "a b", "a\tb", "a\r\nX: 1",
                           "a\x7f"}) {
    EXPECT_FALSE(isVerbatimPathSegment(name)) << name;
  }
  EXPECT_FALSE(isVerbatimPathSegment(std::string("a\0b", 3)));
}

}  // namespace
}  // namespace infergate::codecs
