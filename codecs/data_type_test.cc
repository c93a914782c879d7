#include "codecs/data_type.h"

#include <gtest/gtest.h>

namespace infergate::codecs {
namespace {

TEST(DataType, NamesRoundTripForEveryType) {
  for (DataType t : kAllDataTypes) EXPECT_EQ(dataTypeFromName(dataTypeName(t)), t);
}

TEST(DataType, MatchesNamesExactlyAndCaseSensitively) {
  EXPECT_EQ(dataTypeFromName("FP32"), DataType::kFp32);
  EXPECT_EQ(dataTypeFromName("fp32"), DataType::kInvalid);
  EXPECT_EQ(dataTypeFromName("FLOAT32"), DataType::kInvalid);
  EXPECT_EQ(dataTypeFromName("STRING"), DataType::kInvalid);
  EXPECT_EQ(dataTypeFromName("INVALID"), DataType::kInvalid);
  EXPECT_EQ(dataTypeFromName(""), DataType::kInvalid);
}

TEST(DataType, ElementSizesAndConfigEnums) {
  EXPECT_EQ(elementSize(DataType::kBool), 1u);
  EXPECT_EQ(elementSize(DataType::kUint16), 2u);
  EXPECT_EQ(elementSize(DataType::kInt64), 8u);
  EXPECT_EQ(elementSize(DataType::kFp16), 2u);
  EXPECT_EQ(elementSize(DataType::kBf16), 2u);
  EXPECT_EQ(elementSize(DataType::kBytes), 0u);
  EXPECT_EQ(configEnumNumber(DataType::kBytes), 13);
  EXPECT_EQ(configEnumName(DataType::kBytes), "TYPE_STRING");
  EXPECT_EQ(configEnumNumber(DataType::kBf16), 14);
  EXPECT_EQ(dataTypeFromConfigEnum(11), DataType::kFp32);
  EXPECT_EQ(dataTypeFromConfigEnum(0), DataType::kInvalid);
  EXPECT_EQ(dataTypeFromConfigEnum(15), DataType::kInvalid);
  EXPECT_TRUE(isRawOnly(DataType::kFp16));
  EXPECT_FALSE(isRawOnly(DataType::kFp32));
}

}  // namespace
}  // namespace infergate::codecs
