#include "codecs/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace infergate::codecs {
namespace {

TEST(Half, Fp16KnownValues) {
  EXPECT_EQ(floatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(floatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(floatToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(floatToFp16(1e6f), 0x7c00);  // overflow to infinity
  EXPECT_EQ(floatToFp16(5.960464477539063e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp16ToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(fp16ToFloat(floatToFp16(std::nanf("")))));
}

TEST(Half, Fp16RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = fp16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(floatToFp16(f), h) << h;
  }
}

TEST(Half, Bf16TruncatesAndRounds) {
  EXPECT_EQ(floatToBf16Truncate(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  float just_above = std::bit_cast<float>(0x3f80c000u);
  EXPECT_EQ(floatToBf16Truncate(just_above), 0x3f80);
  EXPECT_EQ(floatToBf16Round(just_above), 0x3f81);
}

}  // namespace
}  // namespace infergate::codecs
