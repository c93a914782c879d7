#include "codecs/bytes_tensor.h"

#include <gtest/gtest.h>

#include "codecs/infer.h"

namespace infergate::codecs {
namespace {

std::span<const uint8_t> span(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(BytesTensor, SerializesWithLittleEndianPrefixes) {
  std::string s = serializeBytesElements({"ab", ""});
  EXPECT_EQ(s, std::string("\x02\x00\x00\x00" "ab" "\x00\x00\x00\x00", 10));
  auto parsed = parseBytesElements(span(s), "t");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, (std::vector<std::string>{"ab", ""}));
}

TEST(BytesTensor, RejectsElementPastTheEnd) {
  std::string s("\x05\x00\x00\x00" "abc", 7);
  auto r = countBytesElements(span(s), "t");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(messageOf(r.status()).find("runs past the end"), std::string_view::npos);
  auto truncated = countBytesElements(span(std::string_view("\x01\x00", 2)), "t");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(messageOf(truncated.status()).find("truncated"), std::string_view::npos);
  EXPECT_EQ(*countBytesElements(span(""), "t"), 0u);
}

TEST(BytesTensor, ValidatesElementCountAgainstShape) {
  Buffer data = Buffer::fromString(serializeBytesElements({"a", "b", "c"}));
  EXPECT_TRUE(validateTensorData("t", DataType::kBytes, Shape{3}, data).ok());
  EXPECT_FALSE(validateTensorData("t", DataType::kBytes, Shape{2}, data).ok());
  EXPECT_FALSE(validateTensorData("t", DataType::kBytes, Shape{4}, data).ok());
  EXPECT_TRUE(validateTensorData("t", DataType::kInt32, Shape{3}, Buffer::copyOf("123456789012")).ok());
  EXPECT_FALSE(validateTensorData("t", DataType::kInt32, Shape{3}, Buffer::copyOf("12345678901")).ok());
}

// A rank-0 shape holds one element, or none as Triton's JSON path counts it (pitfall 26).
TEST(BytesTensor, ARankZeroShapeHoldsOneElementOrNone) {
  EXPECT_TRUE(validateTensorData("t", DataType::kFp32, Shape{}, Buffer::copyOf("1234")).ok());
  EXPECT_TRUE(validateTensorData("t", DataType::kFp32, Shape{}, Buffer()).ok());
  EXPECT_FALSE(validateTensorData("t", DataType::kFp32, Shape{}, Buffer::copyOf("12")).ok());
  EXPECT_TRUE(validateTensorData("t", DataType::kBytes, Shape{}, Buffer()).ok());
  EXPECT_TRUE(validateTensorData("t", DataType::kBytes, Shape{},
                                 Buffer::fromString(serializeBytesElements({"a"}))).ok());
  EXPECT_FALSE(validateTensorData("t", DataType::kInvalid, Shape{}, Buffer()).ok());
}

}  // namespace
}  // namespace infergate::codecs
