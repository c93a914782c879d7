#pragma once

// Request builders and output readers shared by this folder's tests.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codecs/bytes_tensor.h"
#include "codecs/infer.h"
#include "gateway/upstream/builtin/tensor_access.h"

namespace infergate::gateway::builtin::testing {

template <typename T>
codecs::InferInput tensorInput(std::string name, codecs::DataType type, codecs::Shape shape,
                               const std::vector<T>& values) {
  codecs::InferInput in;
  in.name = std::move(name);
  in.datatype = type;
  in.shape = std::move(shape);
  in.data = bufferOf(values);
  return in;
}

inline codecs::InferInput bytesInput(std::string name, codecs::Shape shape,
                                     const std::vector<std::string>& elements) {
  codecs::InferInput in;
  in.name = std::move(name);
  in.datatype = codecs::DataType::kBytes;
  in.shape = std::move(shape);
  in.data = codecs::Buffer::fromString(codecs::serializeBytesElements(elements));
  return in;
}

inline std::vector<int32_t> iota32(int32_t first, size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + static_cast<int32_t>(i);
  return v;
}

// `simple` with INPUT0 = 0..15 and INPUT1 = 1 (the Triton example's data), batch 1.
inline codecs::InferRequest simpleRequest() {
  codecs::InferRequest r;
  r.model_name = "simple";
  r.inputs.push_back(tensorInput("INPUT0", codecs::DataType::kInt32, {1, 16}, iota32(0, 16)));
  r.inputs.push_back(
      tensorInput("INPUT1", codecs::DataType::kInt32, {1, 16}, std::vector<int32_t>(16, 1)));
  return r;
}

inline codecs::InferRequest singleInputRequest(std::string model, codecs::InferInput input) {
  codecs::InferRequest r;
  r.model_name = std::move(model);
  r.inputs.push_back(std::move(input));
  return r;
}

template <typename T>
std::vector<T> valuesOf(const codecs::InferOutput& out) {
  return loadElements<T>(out.data);
}

inline std::vector<std::string> stringsOf(const codecs::InferOutput& out) {
  auto parsed = codecs::parseBytesElements(out.data.span(), out.name);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : std::vector<std::string>{};
}

}  // namespace infergate::gateway::builtin::testing
