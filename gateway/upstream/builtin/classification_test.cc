#include "gateway/upstream/builtin/classification.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gateway/upstream/builtin/builtin_test_util.h"

namespace infergate::gateway::builtin {
namespace {

using codecs::DataType;
using testing::stringsOf;

template <typename T>
codecs::InferOutput output(DataType type, codecs::Shape shape, std::vector<T> values) {
  return makeOutput("OUTPUT0", type, std::move(shape), bufferOf(values));
}

TEST(Classification, FormatsFloatsWithSixDecimalsSortedDescending) {
  auto result = classify(output<float>(DataType::kFp32, {4}, {1.5f, 3.3f, 0.25f, 2.0f}), 3, false);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->name, "OUTPUT0");
  EXPECT_EQ(result->datatype, DataType::kBytes);
  EXPECT_EQ(result->shape, (codecs::Shape{3}));
  EXPECT_EQ(stringsOf(*result),
            (std::vector<std::string>{"3.300000:1", "2.000000:3", "1.500000:0"}));
}

TEST(Classification, FormatsIntegersWithoutDecimals) {
  auto result = classify(output<int32_t>(DataType::kInt32, {4}, {4, -1, 10, 7}), 2, false);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(stringsOf(*result), (std::vector<std::string>{"10:2", "7:3"}));
  auto bytes = classify(output<int8_t>(DataType::kInt8, {3}, {-3, 5, 0}), 3, false);
  EXPECT_EQ(stringsOf(*bytes), (std::vector<std::string>{"5:1", "0:2", "-3:0"}));
  auto big = classify(output<uint64_t>(DataType::kUint64, {2}, {1, UINT64_MAX}), 1, false);
  EXPECT_EQ(stringsOf(*big), (std::vector<std::string>{"18446744073709551615:1"}));
  auto dbl = classify(output<double>(DataType::kFp64, {2}, {0.5, -2.25}), 5, false);
  EXPECT_EQ(dbl->shape, (codecs::Shape{2}));
  EXPECT_EQ(stringsOf(*dbl), (std::vector<std::string>{"0.500000:0", "-2.250000:1"}));
}

TEST(Classification, ClassifiesEachBatchItem) {
  auto result = classify(output<int32_t>(DataType::kInt32, {2, 3}, {1, 9, 5, 8, 2, 4}), 2, true);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->shape, (codecs::Shape{2, 2}));
  EXPECT_EQ(stringsOf(*result), (std::vector<std::string>{"9:1", "5:2", "8:0", "4:2"}));
  auto k_capped = classify(output<int32_t>(DataType::kInt32, {2, 3}, {1, 9, 5, 8, 2, 4}), 10, true);
  EXPECT_EQ(k_capped->shape, (codecs::Shape{2, 3}));
}

TEST(Classification, TiesKeepIndexOrderAndNaNSortsLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto result = classify(output<float>(DataType::kFp32, {4}, {nan, 1.f, 1.f, 2.f}), 4, false);
  ASSERT_TRUE(result.ok());
  std::vector<std::string> s = stringsOf(*result);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0], "2.000000:3");
  EXPECT_EQ(s[1], "1.000000:1");
  EXPECT_EQ(s[2], "1.000000:2");
  EXPECT_EQ(s[3].substr(s[3].size() - 2), ":0");
}

TEST(Classification, RefusesUnsupportedTypes) {
  for (DataType type : {DataType::kBool, DataType::kFp16, DataType::kBf16, DataType::kBytes}) {
    codecs::InferOutput out = makeOutput("OUTPUT0", type, {0}, codecs::Buffer());
    auto result = classify(out, 1, false);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(codecs::messageOf(result.status()),
              codecs::strCat("class result not available for output due to unsupported type '",
                             codecs::dataTypeName(type), "'"));
  }
}

TEST(Classification, HandlesEmptyBatches) {
  auto result = classify(output<float>(DataType::kFp32, {0, 5}, {}), 3, true);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->shape, (codecs::Shape{0, 3}));
  EXPECT_TRUE(result->data.empty());
}

}  // namespace
}  // namespace infergate::gateway::builtin
