#pragma once

// Helpers shared by the ModelInferRequest and ModelInferResponse codec tests: sample
// tensor bytes, little-endian packing, and parameter checks against generated messages.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codecs/bytes_tensor.h"
#include "codecs/data_type.h"
#include "codecs/parameters.h"
#include "grpc_service.pb.h"

namespace infergate::codecs {
namespace {

// `count` elements of `type` in binary form, every byte position distinct.
std::string sampleBytes(DataType type, size_t count) {
  if (type == DataType::kBytes) {
    std::vector<std::string> elements;
    for (size_t i = 0; i < count; ++i) elements.emplace_back(i % 4, static_cast<char>('a' + i));
    return serializeBytesElements(elements);
  }
  std::string out(count * elementSize(type), '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = type == DataType::kBool ? static_cast<char>(i % 2) : static_cast<char>(i * 7 + 1);
  }
  return out;
}

template <typename T>
std::string le(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

ParamValue fromPb(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      return p.bool_param();
    case inference::InferParameter::kInt64Param:
      return p.int64_param();
    case inference::InferParameter::kStringParam:
      return p.string_param();
    case inference::InferParameter::kDoubleParam:
      return p.double_param();
    case inference::InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      ADD_FAILURE() << "parameter without a value";
      return false;
  }
}

void expectParams(const google::protobuf::Map<std::string, inference::InferParameter>& pb,
                  const Parameters& expected) {
  EXPECT_EQ(pb.size(), expected.size());
  for (const auto& [key, value] : expected) {
    auto it = pb.find(key);
    ASSERT_NE(it, pb.end()) << key;
    EXPECT_EQ(fromPb(it->second), value) << key;
  }
}

}  // namespace
}  // namespace infergate::codecs
