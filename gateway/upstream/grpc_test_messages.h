#pragma once

// Requests and answers of the builtin demo models, as the gRPC tests (the clients':
// grpc_client_test, grpc_client_native_test; the frontend's: grpc_frontend_test_fixture.h)
// build and check them: ModelInferRequests for "simple", "sleep" and "repeat_int32",
// raw-content helpers, the parsed answer and the simple model's expected sums.
// Test-only, header-only.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "codecs/grpc_byte_buffer.h"
#include "config/config.h"
#include "grpc_service.grpc.pb.h"

namespace infergate::gateway::upstream::testing::messages {

template <typename T>
T parsed(const grpc::ByteBuffer& bytes) {
  T out;
  auto flat = codecs::fromByteBuffer(bytes);
  EXPECT_TRUE(flat.ok()) << flat.status();
  if (flat.ok()) {
    EXPECT_TRUE(out.ParseFromArray(flat->data(), static_cast<int>(flat->size())));
  }
  return out;
}

template <typename T>
std::string bytesOf(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
std::vector<T> valuesOf(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

inline void addInput(inference::ModelInferRequest& r, const std::string& name, const std::string& datatype,
              std::vector<int64_t> shape, std::string bytes) {
  auto* in = r.add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  r.add_raw_input_contents(std::move(bytes));
}

// simple: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, with INPUT0 = 0..15 + base.
inline inference::ModelInferRequest simpleRequest(const std::string& id = "", int32_t base = 0) {
  inference::ModelInferRequest r;
  r.set_model_name("simple");
  r.set_id(id);
  std::vector<int32_t> a(16), b(16, 1);
  std::iota(a.begin(), a.end(), base);
  addInput(r, "INPUT0", "INT32", {1, 16}, bytesOf(a));
  addInput(r, "INPUT1", "INT32", {1, 16}, bytesOf(b));
  return r;
}

inline inference::ModelInferRequest sleepRequest(int32_t ms, const std::string& id = "") {
  inference::ModelInferRequest r;
  r.set_model_name("sleep");
  r.set_id(id);
  addInput(r, "INPUT0", "INT32", {1}, bytesOf(std::vector<int32_t>{ms}));
  return r;
}

// identity_fp32 over `values`, shape [1, N]: answered with the same bytes.
inline inference::ModelInferRequest identityRequest(const std::vector<float>& values, const std::string& id = "") {
  inference::ModelInferRequest r;
  r.set_model_name("identity_fp32");
  r.set_id(id);
  addInput(r, "INPUT0", "FP32", {1, static_cast<int64_t>(values.size())}, bytesOf(values));
  return r;
}

// repeat_int32 (decoupled): one response per element of IN, then, with `empty_final`, an
// empty final one.
inline inference::ModelInferRequest repeatRequest(std::vector<int32_t> values, bool empty_final = true) {
  inference::ModelInferRequest r;
  r.set_model_name("repeat_int32");
  r.set_id("rep");
  const int64_t n = static_cast<int64_t>(values.size());
  addInput(r, "IN", "INT32", {n}, bytesOf(values));
  addInput(r, "DELAY", "UINT32", {n}, bytesOf(std::vector<uint32_t>(values.size(), 0)));
  addInput(r, "WAIT", "UINT32", {1}, bytesOf(std::vector<uint32_t>{0}));
  if (empty_final) (*r.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  return r;
}

inline const std::string* outputBytes(const inference::ModelInferResponse& r, const std::string& name) {
  for (int i = 0; i < r.outputs_size(); ++i) {
    if (r.outputs(i).name() == name && i < r.raw_output_contents_size()) {
      return &r.raw_output_contents(i);
    }
  }
  return nullptr;
}

inline void expectSimpleAnswer(const inference::ModelInferResponse& r, int32_t base = 0) {
  ASSERT_NE(outputBytes(r, "OUTPUT0"), nullptr);
  ASSERT_NE(outputBytes(r, "OUTPUT1"), nullptr);
  auto sum = valuesOf<int32_t>(*outputBytes(r, "OUTPUT0"));
  auto difference = valuesOf<int32_t>(*outputBytes(r, "OUTPUT1"));
  ASSERT_EQ(sum.size(), 16u);
  ASSERT_EQ(difference.size(), 16u);
  for (int32_t i = 0; i < 16; ++i) {
    EXPECT_EQ(sum[i], base + i + 1);
    EXPECT_EQ(difference[i], base + i - 1);
  }
}

inline config::ListenAddress tcp(int port) {
  config::ListenAddress a;
  a.kind = config::ListenAddress::Kind::kTcp;
  a.host = "127.0.0.1";
  a.port = static_cast<uint16_t>(port);
  return a;
}

}  // namespace infergate::gateway::upstream::testing::messages
