#pragma once

// Shared by the ModelInferRequest codec tests: sample tensors, generated-class
// cross-checks and message builders.


#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codecs/bytes_tensor.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_request_encoder.h"
#include "codecs/protobuf_test_util.h"
#include "codecs/protobuf_wire.h"
#include "grpc_service.pb.h"

namespace infergate::codecs {
namespace {

using PbRequest = inference::ModelInferRequest;
using PbParams = google::protobuf::Map<std::string, inference::InferParameter>;
using google::protobuf::util::MessageDifferencer;

// ---- helpers -----------------------------------------------------------------------

Buffer serialize(const google::protobuf::Message& message) {
  return Buffer::fromString(message.SerializeAsString());
}

// `params` plus the shm keys as the encoder writes them (int64_param, offset when != 0).
Parameters withShm(Parameters params, const std::optional<SharedMemoryRef>& shm) {
  if (!shm) return params;
  params.set(std::string(param::kShmRegion), shm->region);
  params.set(std::string(param::kShmByteSize), static_cast<int64_t>(shm->byte_size));
  if (shm->offset) params.set(std::string(param::kShmOffset), static_cast<int64_t>(shm->offset));
  return params;
}

std::vector<int64_t> dimsOf(const google::protobuf::RepeatedField<int64_t>& shape) {
  return {shape.begin(), shape.end()};
}

// Every field of `pb` against `request`, for requests whose parameters need no conversion.
void expectSameRequest(const PbRequest& pb, const InferRequest& request) {
  EXPECT_EQ(pb.model_name(), request.model_name);
  EXPECT_EQ(pb.model_version(), request.model_version);
  EXPECT_EQ(pb.id(), request.id);
  expectParams(pb.parameters(), request.parameters);
  ASSERT_EQ(static_cast<size_t>(pb.inputs_size()), request.inputs.size());
  int raw = 0;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const InferInput& in = request.inputs[i];
    const auto& pin = pb.inputs(static_cast<int>(i));
    EXPECT_EQ(pin.name(), in.name);
    EXPECT_EQ(pin.datatype(), dataTypeName(in.datatype));
    EXPECT_EQ(dimsOf(pin.shape()), in.shape.dims());
    EXPECT_FALSE(pin.has_contents());
    expectParams(pin.parameters(), withShm(in.parameters, in.shared_memory));
    if (in.shared_memory) continue;
    ASSERT_LT(raw, pb.raw_input_contents_size());
    EXPECT_EQ(pb.raw_input_contents(raw++), in.data.view()) << in.name;
  }
  EXPECT_EQ(raw, pb.raw_input_contents_size());
  ASSERT_EQ(static_cast<size_t>(pb.outputs_size()), request.outputs.size());
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const RequestedOutput& out = request.outputs[i];
    Parameters expected = withShm(out.parameters, out.shared_memory);
    if (out.classification) {
      expected.set(std::string(param::kClassification), static_cast<int64_t>(out.classification));
    }
    EXPECT_EQ(pb.outputs(static_cast<int>(i)).name(), out.name);
    expectParams(pb.outputs(static_cast<int>(i)).parameters(), expected);
  }
}

InferInput rawInput(std::string name, DataType type, Shape shape) {
  InferInput in;
  in.name = std::move(name);
  in.datatype = type;
  StatusOr<int64_t> count = shape.elementCount();
  in.shape = std::move(shape);
  in.data = Buffer::fromString(sampleBytes(type, static_cast<size_t>(*count)));
  return in;
}

// Every datatype, a shm input, an empty tensor, and outputs of every kind.
InferRequest richRequest() {
  InferRequest r;
  r.model_name = "model";
  r.model_version = "2";
  r.id = "request-id";
  r.parameters.set("custom_s", std::string("value"));
  r.parameters.set("custom_b", false);
  r.parameters.set("custom_i", int64_t{-3});
  r.parameters.set("custom_d", 0.25);
  for (DataType type : kAllDataTypes) {
    r.inputs.push_back(rawInput("in_" + std::string(dataTypeName(type)), type, Shape{2, 3}));
  }
  InferInput shm;
  shm.name = "shm_in";
  shm.datatype = DataType::kFp32;
  shm.shape = Shape{2, 3};
  shm.shared_memory = SharedMemoryRef{"input_region", 64, 24};
  shm.parameters.set("tensor_param", int64_t{9});
  r.inputs.insert(r.inputs.begin() + 3, shm);
  r.inputs.push_back(rawInput("empty", DataType::kInt32, Shape{0, 4}));
  r.outputs.push_back(RequestedOutput{.name = "out_plain"});
  r.outputs.push_back(RequestedOutput{.name = "out_class", .classification = 3});
  r.outputs.push_back(
      RequestedOutput{.name = "out_shm", .shared_memory = SharedMemoryRef{"output_region", 0, 16}});
  RequestedOutput custom{.name = "out_custom"};
  custom.parameters.set("k", uint64_t{5});
  r.outputs.push_back(custom);
  return r;
}

Buffer encodeFlat(const InferRequest& request) {
  StatusOr<BufferChain> chain = ProtobufRequestEncoder().encode(request);
  EXPECT_TRUE(chain.ok()) << chain.status();
  return chain.ok() ? chain->flatten() : Buffer();
}

StatusOr<InferRequest> decode(const google::protobuf::Message& message,
                              const DecodeLimits& limits = {}) {
  return ProtobufRequestDecoder(limits).decode(serialize(message));
}

void expectError(const StatusOr<InferRequest>& result, absl::StatusCode code,
                 std::string_view fragment = {}) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_NE(messageOf(result.status()).find(fragment), std::string_view::npos) << result.status();
}

PbRequest::InferInputTensor* addInput(PbRequest& pb, std::string name, std::string datatype,
                                      std::initializer_list<int64_t> shape) {
  auto* in = pb.add_inputs();
  in->set_name(std::move(name));
  in->set_datatype(std::move(datatype));
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

// The contents message re-written with one field per value (generated code always packs).
std::string unpacked(const inference::InferTensorContents& c) {
  std::string out;
  WireWriter w(out);
  for (bool v : c.bool_contents()) w.varintField(1, v);
  for (int32_t v : c.int_contents()) w.varintField(2, static_cast<uint64_t>(int64_t{v}));
  for (int64_t v : c.int64_contents()) w.varintField(3, static_cast<uint64_t>(v));
  for (uint32_t v : c.uint_contents()) w.varintField(4, v);
  for (uint64_t v : c.uint64_contents()) w.varintField(5, v);
  for (float v : c.fp32_contents()) {
    w.tag(6, WireType::kI32);
    appendU32Le(out, std::bit_cast<uint32_t>(v));
  }
  for (double v : c.fp64_contents()) {
    w.tag(7, WireType::kI64);
    w.fixed64(std::bit_cast<uint64_t>(v));
  }
  for (const std::string& v : c.bytes_contents()) w.bytesField(8, v);
  return out;
}

// A ModelInferRequest with one input whose contents fields are the given encodings.
std::string requestWithContents(std::string_view datatype, const Shape& shape,
                                std::initializer_list<std::string> contents) {
  std::string out;
  WireWriter w(out);
  w.bytesField(1, "model");
  size_t input = w.beginMessage(5);
  w.bytesField(1, "x");
  w.bytesField(2, datatype);
  writeShape(w, 3, shape);
  for (const std::string& c : contents) w.bytesField(5, c);
  w.endMessage(input);
  return out;
}

struct TypedCase {
  DataType type;
  void (*fill)(inference::InferTensorContents&);
  std::string expected;  // binary form
};

std::vector<TypedCase> typedCases() {
  using C = inference::InferTensorContents;
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();
  return {
      {DataType::kBool,
       [](C& c) {
         c.add_bool_contents(true), c.add_bool_contents(false), c.add_bool_contents(true);
       },
       std::string("\x01\x00\x01", 3)},
      {DataType::kInt8,
       [](C& c) { c.add_int_contents(-1), c.add_int_contents(127), c.add_int_contents(-128); },
       le<int8_t>({-1, 127, -128})},
      {DataType::kInt16,
       [](C& c) { c.add_int_contents(-2), c.add_int_contents(300), c.add_int_contents(0); },
       le<int16_t>({-2, 300, 0})},
      {DataType::kInt32,
       [](C& c) { c.add_int_contents(-1), c.add_int_contents(1), c.add_int_contents(0x12345678); },
       le<int32_t>({-1, 1, 0x12345678})},
      {DataType::kInt64,
       [](C& c) {
         c.add_int64_contents(-1), c.add_int64_contents(1), c.add_int64_contents(kMin64);
       },
       le<int64_t>({-1, 1, kMin64})},
      {DataType::kUint8,
       [](C& c) { c.add_uint_contents(255), c.add_uint_contents(1), c.add_uint_contents(0); },
       le<uint8_t>({255, 1, 0})},
      {DataType::kUint16,
       [](C& c) { c.add_uint_contents(65535), c.add_uint_contents(2), c.add_uint_contents(0); },
       le<uint16_t>({65535, 2, 0})},
      {DataType::kUint32,
       [](C& c) {
         c.add_uint_contents(0xffffffffu), c.add_uint_contents(3), c.add_uint_contents(0);
       },
       le<uint32_t>({0xffffffffu, 3, 0})},
      {DataType::kUint64,
       [](C& c) {
         c.add_uint64_contents(kMaxU64), c.add_uint64_contents(4), c.add_uint64_contents(0);
       },
       le<uint64_t>({kMaxU64, 4, 0})},
      {DataType::kFp32,
       [](C& c) {
         c.add_fp32_contents(1.5f), c.add_fp32_contents(-2.0f), c.add_fp32_contents(0.0f);
       },
       le<float>({1.5f, -2.0f, 0.0f})},
      {DataType::kFp64,
       [](C& c) {
         c.add_fp64_contents(1.5), c.add_fp64_contents(-2.0), c.add_fp64_contents(1e300);
       },
       le<double>({1.5, -2.0, 1e300})},
      {DataType::kBytes,
       [](C& c) {
         c.add_bytes_contents("ab"), c.add_bytes_contents(""), c.add_bytes_contents("xyz");
       },
       serializeBytesElements({"ab", "", "xyz"})},
  };
}


}  // namespace
}  // namespace infergate::codecs
