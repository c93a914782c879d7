#include "codecs/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace infergate::codecs {
namespace {

TEST(Base64, EncodesWithPadding) {
  EXPECT_EQ(base64Encode(""), "");
  EXPECT_EQ(base64Encode("f"), "Zg==");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
  EXPECT_EQ(base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64, RoundTripsEveryByteValueAtEveryLengthModThree) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  for (size_t n : {size_t{64}, size_t{65}, size_t{66}, size_t{256}}) {
    std::string in = bytes.substr(0, n);
    std::optional<std::string> out = base64Decode(base64Encode(in));
    ASSERT_TRUE(out.has_value()) << n;
    EXPECT_EQ(*out, in) << n;
  }
}

TEST(Base64, DecodesWithoutPaddingAndSkipsWhitespace) {
  EXPECT_EQ(base64Decode("Zm8"), std::optional<std::string>("fo"));
  EXPECT_EQ(base64Decode(" Zm9v\nYmFy\t"), std::optional<std::string>("foobar"));
}

TEST(Base64, RefusesMangledText) {
  EXPECT_FALSE(base64Decode("Zm9v*").has_value());     // outside the alphabet
  EXPECT_FALSE(base64Decode("Zg==Zg").has_value());    // digits after padding
  EXPECT_FALSE(base64Decode("Zm9vY").has_value());     // 6 dangling bits
  EXPECT_FALSE(base64Decode("Zg===").has_value());     // too much padding
  EXPECT_FALSE(base64Decode("Zm9v-_").has_value());    // the URL-safe alphabet is not this one
}

}  // namespace
}  // namespace infergate::codecs
