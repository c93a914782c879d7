#include "codecs/shape.h"

#include <gtest/gtest.h>

namespace infergate::codecs {
namespace {

TEST(Shape, CountsElements) {
  EXPECT_EQ(*Shape({1, 16}).elementCount(), 16);
  EXPECT_EQ(*Shape({}).elementCount(), 1);
  EXPECT_EQ(*Shape({3, 0, 5}).elementCount(), 0);
  EXPECT_EQ(*Shape({2, 3}).byteSize(4), 24u);
}

TEST(Shape, RejectsOverflowAndNegativeDims) {
  auto overflow = Shape({1LL << 32, 1LL << 32}).elementCount("t");
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(messageOf(overflow.status()).find("tensor 't'"), std::string_view::npos);
  EXPECT_FALSE(Shape({-1, 4}).elementCount().ok());
  EXPECT_FALSE(Shape({1LL << 62}).byteSize(8).ok());
  EXPECT_TRUE(Shape({1LL << 60}).byteSize(8).ok());
}

TEST(Shape, PrintsDims) { EXPECT_EQ(Shape({1, -1, 3}).toString(), "[1,-1,3]"); }

}  // namespace
}  // namespace infergate::codecs
