// ProtobufRequestDecoder and ProtobufRequestEncoder, cross-checked against the classes
// protoc generates from codecs/proto/grpc_service.proto.

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

void expectParams(const PbParams& pb, const Parameters& expected) {
  EXPECT_EQ(pb.size(), expected.size());
  for (const auto& [key, value] : expected) {
    auto it = pb.find(key);
    ASSERT_NE(it, pb.end()) << key;
    EXPECT_EQ(fromPb(it->second), value) << key;
  }
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

// ---- every datatype, both directions -----------------------------------------------

TEST(ProtobufRequestDecoder, DecodesEveryDatatypeFromRaw) {
  for (DataType type : kAllDataTypes) {
    PbRequest pb;
    pb.set_model_name("m");
    addInput(pb, "x", std::string(dataTypeName(type)), {2, 3});
    std::string bytes = sampleBytes(type, 6);
    pb.add_raw_input_contents(bytes);
    StatusOr<InferRequest> request = decode(pb);
    ASSERT_TRUE(request.ok()) << dataTypeName(type) << ": " << request.status();
    ASSERT_EQ(request->inputs.size(), 1u);
    EXPECT_EQ(request->inputs[0].datatype, type);
    EXPECT_EQ(request->inputs[0].shape, (Shape{2, 3}));
    EXPECT_EQ(request->inputs[0].data.view(), bytes);
  }
}

TEST(ProtobufRequestEncoder, GeneratedParserReadsEveryField) {
  InferRequest request = richRequest();
  Buffer message = encodeFlat(request);
  PbRequest pb;
  ASSERT_TRUE(pb.ParseFromArray(message.data(), static_cast<int>(message.size())));
  expectSameRequest(pb, request);
}

TEST(ProtobufRequestEncoder, MatchesGeneratedSerialization) {
  // Same field order as protoc's serializer, so the bytes are identical when the maps hold
  // at most one entry (map order is unspecified).
  InferRequest request;
  request.model_name = "m";
  request.id = "7";
  request.parameters.set("custom", int64_t{1});
  request.inputs.push_back(rawInput("a", DataType::kFp32, Shape{1, 300}));
  request.outputs.push_back(RequestedOutput{.name = "o"});
  PbRequest pb;
  pb.set_model_name("m");
  pb.set_id("7");
  (*pb.mutable_parameters())["custom"].set_int64_param(1);
  addInput(pb, "a", "FP32", {1, 300});
  pb.add_outputs()->set_name("o");
  pb.add_raw_input_contents(std::string(request.inputs[0].data.view()));
  EXPECT_EQ(encodeFlat(request).view(), pb.SerializeAsString());
}

TEST(ProtobufRequestCodec, RoundTripsEveryDatatype) {
  InferRequest request = richRequest();
  StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(encodeFlat(request));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, request);
}

TEST(ProtobufRequestEncoder, EmptyRequestIsAnEmptyMessage) {
  StatusOr<BufferChain> chain = ProtobufRequestEncoder().encode(InferRequest{});
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->empty());
}

// ---- typed contents ----------------------------------------------------------------

TEST(ProtobufRequestDecoder, ConvertsPackedTypedContentsOfEveryType) {
  for (const TypedCase& c : typedCases()) {
    PbRequest pb;
    c.fill(*addInput(pb, "x", std::string(dataTypeName(c.type)), {3})->mutable_contents());
    StatusOr<InferRequest> request = decode(pb);
    ASSERT_TRUE(request.ok()) << dataTypeName(c.type) << ": " << request.status();
    EXPECT_EQ(request->inputs[0].data.view(), c.expected) << dataTypeName(c.type);
  }
}

TEST(ProtobufRequestDecoder, ConvertsUnpackedTypedContentsOfEveryType) {
  for (const TypedCase& c : typedCases()) {
    inference::InferTensorContents contents;
    c.fill(contents);
    std::string bytes = requestWithContents(dataTypeName(c.type), Shape{3}, {unpacked(contents)});
    PbRequest pb;  // the hand-written encoding is valid protobuf with the same values
    ASSERT_TRUE(pb.ParseFromString(bytes));
    EXPECT_TRUE(MessageDifferencer::Equals(pb.inputs(0).contents(), contents));
    StatusOr<InferRequest> request = ProtobufRequestDecoder().decode(Buffer::fromString(bytes));
    ASSERT_TRUE(request.ok()) << dataTypeName(c.type) << ": " << request.status();
    EXPECT_EQ(request->inputs[0].data.view(), c.expected) << dataTypeName(c.type);
  }
}

TEST(ProtobufRequestDecoder, MergesPackedUnpackedAndRepeatedContents) {
  for (const TypedCase& c : typedCases()) {
    inference::InferTensorContents contents;
    c.fill(contents);
    std::string packed = contents.SerializeAsString();
    // One contents field holding packed then unpacked values, then a second contents
    // field: protobuf concatenates all of it.
    std::string bytes =
        requestWithContents(dataTypeName(c.type), Shape{9}, {packed + unpacked(contents), packed});
    PbRequest pb;
    ASSERT_TRUE(pb.ParseFromString(bytes));
    StatusOr<InferRequest> request = ProtobufRequestDecoder().decode(Buffer::fromString(bytes));
    ASSERT_TRUE(request.ok()) << dataTypeName(c.type) << ": " << request.status();
    EXPECT_EQ(request->inputs[0].data.view(), c.expected + c.expected + c.expected);
  }
}

TEST(ProtobufRequestDecoder, RejectsTypedHalfPrecision) {
  for (const char* type : {"FP16", "BF16"}) {
    PbRequest pb;
    addInput(pb, "x", type, {1})->mutable_contents()->add_fp32_contents(1.0f);
    expectError(decode(pb), absl::StatusCode::kInvalidArgument, "x");
  }
}

TEST(ProtobufRequestDecoder, RejectsTypedCountMismatch) {
  PbRequest pb;
  auto* contents = addInput(pb, "x", "INT32", {2, 2})->mutable_contents();
  for (int i = 0; i < 3; ++i) contents->add_int_contents(i);
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "calls for 4");
}

TEST(ProtobufRequestDecoder, RejectsTypedContentsOfAnotherDatatype) {
  PbRequest pb;
  addInput(pb, "x", "FP32", {1})->mutable_contents()->add_int_contents(1);
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "int_contents");
}

TEST(ProtobufRequestDecoder, RejectsContentsMixedWithRaw) {
  PbRequest pb;
  pb.set_model_name("m");
  addInput(pb, "typed", "INT32", {1})->mutable_contents()->add_int_contents(1);
  addInput(pb, "raw", "INT32", {1});
  pb.add_raw_input_contents(le<int32_t>({2}));
  expectError(decode(pb), absl::StatusCode::kInvalidArgument,
              "contents field must not be specified when using raw_input_contents");
}

TEST(ProtobufRequestDecoder, RejectsOversizedTypedTensor) {
  PbRequest pb;
  auto* contents = addInput(pb, "x", "INT64", {100})->mutable_contents();
  for (int i = 0; i < 100; ++i) contents->add_int64_contents(i);
  DecodeLimits limits;
  limits.max_tensor_bytes = 799;
  expectError(decode(pb, limits), absl::StatusCode::kResourceExhausted, "x");
}

// ---- data sources: shm, raw order, missing and surplus data ---------------------------

// PROTOCOL.md 6.2: A (INT32 [1,4]) raw, S (FP32) in shm, T (BYTES [2]) raw.
const std::string kTBytes(
    "\x02\x00\x00\x00"
    "ab"
    "\x00\x00\x00\x00",
    10);

TEST(ProtobufRequestDecoder, ShmInputsConsumeNoRawEntry) {
  PbRequest pb;
  pb.set_model_name("m");
  addInput(pb, "A", "INT32", {1, 4});
  auto* s = addInput(pb, "S", "FP32", {1, 4});
  (*s->mutable_parameters())["shared_memory_region"].set_string_param("region");
  (*s->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  (*s->mutable_parameters())["shared_memory_offset"].set_int64_param(32);
  addInput(pb, "T", "BYTES", {2});
  pb.add_raw_input_contents(le<int32_t>({1, 2, 3, 4}));
  pb.add_raw_input_contents(kTBytes);
  StatusOr<InferRequest> request = decode(pb);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->inputs.size(), 3u);
  EXPECT_EQ(request->inputs[0].data.view(), le<int32_t>({1, 2, 3, 4}));
  EXPECT_EQ(request->inputs[1].shared_memory, (SharedMemoryRef{"region", 32, 16}));
  EXPECT_TRUE(request->inputs[1].data.empty());
  EXPECT_TRUE(request->inputs[1].parameters.empty());  // lifted into the field
  EXPECT_EQ(request->inputs[2].data.view(), kTBytes);
}

TEST(ProtobufRequestEncoder, WritesRawEntriesOnlyForNonShmInputs) {
  InferRequest request;
  request.model_name = "m";
  InferInput a{.name = "A", .datatype = DataType::kInt32, .shape = Shape{1, 4}};
  a.data = Buffer::fromString(le<int32_t>({1, 2, 3, 4}));
  InferInput s{.name = "S", .datatype = DataType::kFp32, .shape = Shape{1, 4}};
  s.shared_memory = SharedMemoryRef{"region", 0, 16};
  InferInput t{.name = "T", .datatype = DataType::kBytes, .shape = Shape{2}};
  t.data = Buffer::fromString(kTBytes);
  request.inputs = {a, s, t};
  Buffer message = encodeFlat(request);
  PbRequest pb;
  ASSERT_TRUE(pb.ParseFromArray(message.data(), static_cast<int>(message.size())));
  ASSERT_EQ(pb.raw_input_contents_size(), 2);
  EXPECT_EQ(pb.raw_input_contents(0), le<int32_t>({1, 2, 3, 4}));
  EXPECT_EQ(pb.raw_input_contents(1), kTBytes);
  const auto& params = pb.inputs(1).parameters();
  EXPECT_EQ(params.at("shared_memory_region").string_param(), "region");
  EXPECT_EQ(params.at("shared_memory_byte_size").parameter_choice_case(),
            inference::InferParameter::kInt64Param);
  EXPECT_EQ(params.at("shared_memory_byte_size").int64_param(), 16);
  EXPECT_EQ(params.count("shared_memory_offset"), 0u);  // 0: omitted, like the Python client
}

TEST(ProtobufRequestDecoder, RejectsMissingData) {
  PbRequest pb;
  pb.set_model_name("m");
  addInput(pb, "first", "UINT8", {1});
  addInput(pb, "second", "UINT8", {1});
  pb.add_raw_input_contents("x");
  expectError(decode(pb), absl::StatusCode::kInvalidArgument,
              "unable to find data for input tensor 'second'");
}

TEST(ProtobufRequestDecoder, RejectsSurplusRawEntries) {
  PbRequest pb;
  addInput(pb, "only", "UINT8", {1});
  for (int i = 0; i < 3; ++i) pb.add_raw_input_contents("x");
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "3 raw_input_contents");
}

TEST(ProtobufRequestDecoder, RejectsRawDataOfTheWrongSize) {
  PbRequest pb;
  addInput(pb, "x", "FP32", {2});
  pb.add_raw_input_contents(std::string(7, '\0'));
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "x");
}

TEST(ProtobufRequestDecoder, RejectsMalformedBytesRaw) {
  PbRequest pb;
  addInput(pb, "x", "BYTES", {1});
  pb.add_raw_input_contents(
      std::string("\x09\x00\x00\x00"
                  "abc",
                  7));
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "x");
}

// ---- shared-memory parameters -------------------------------------------------------

PbRequest shmRequest(void (*edit)(PbParams&)) {
  PbRequest pb;
  auto* in = addInput(pb, "x", "FP32", {1});
  PbParams& p = *in->mutable_parameters();
  p["shared_memory_region"].set_string_param("r");
  p["shared_memory_byte_size"].set_int64_param(4);
  edit(p);
  return pb;
}

TEST(ProtobufRequestDecoder, RejectsShmSizesAsUint64) {
  expectError(
      decode(shmRequest([](PbParams& p) { p["shared_memory_byte_size"].set_uint64_param(4); })),
      absl::StatusCode::kInvalidArgument, "int64_param");
  expectError(
      decode(shmRequest([](PbParams& p) { p["shared_memory_offset"].set_uint64_param(0); })),
      absl::StatusCode::kInvalidArgument, "int64_param");
}

TEST(ProtobufRequestDecoder, RejectsIncompleteShmParameters) {
  expectError(decode(shmRequest([](PbParams& p) { p.erase("shared_memory_region"); })),
              absl::StatusCode::kInvalidArgument, "shared_memory_region");
  expectError(decode(shmRequest([](PbParams& p) { p.erase("shared_memory_byte_size"); })),
              absl::StatusCode::kInvalidArgument, "shared_memory_byte_size");
  expectError(decode(shmRequest([](PbParams& p) { p["shared_memory_region"].set_int64_param(1); })),
              absl::StatusCode::kInvalidArgument, "string_param");
  expectError(
      decode(shmRequest([](PbParams& p) { p["shared_memory_offset"].set_int64_param(-1); })),
      absl::StatusCode::kInvalidArgument, ">= 0");
}

TEST(ProtobufRequestDecoder, RejectsShmWithContents) {
  PbRequest pb = shmRequest([](PbParams&) {});
  pb.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "x");
}

// ---- requested outputs --------------------------------------------------------------

TEST(ProtobufRequestDecoder, LiftsOutputParameters) {
  PbRequest pb;
  auto* out = pb.add_outputs();
  out->set_name("o");
  (*out->mutable_parameters())["classification"].set_int64_param(5);
  (*out->mutable_parameters())["binary_data"].set_bool_param(true);
  (*out->mutable_parameters())["custom"].set_string_param("kept");
  auto* shm = pb.add_outputs();
  shm->set_name("s");
  (*shm->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*shm->mutable_parameters())["shared_memory_byte_size"].set_int64_param(64);
  StatusOr<InferRequest> request = decode(pb);
  ASSERT_TRUE(request.ok()) << request.status();
  const RequestedOutput& o = request->outputs[0];
  EXPECT_EQ(o.classification, 5u);
  EXPECT_EQ(o.binary_data, true);
  ASSERT_EQ(o.parameters.size(), 1u);
  EXPECT_EQ(*o.parameters.find("custom"), ParamValue(std::string("kept")));
  EXPECT_EQ(request->outputs[1].shared_memory, (SharedMemoryRef{"r", 0, 64}));
}

TEST(ProtobufRequestDecoder, RejectsNegativeClassification) {
  PbRequest pb;
  auto* out = pb.add_outputs();
  out->set_name("o");
  (*out->mutable_parameters())["classification"].set_int64_param(-1);
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, ">= 0");
  (*out->mutable_parameters())["classification"].set_uint64_param(1);
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "int64_param");
}

// ---- parameter kinds ----------------------------------------------------------------

TEST(ProtobufRequestDecoder, KeepsParameterKindsExactly) {
  PbRequest pb;
  auto& p = *pb.mutable_parameters();
  p["priority"].set_uint64_param(2);
  p["sequence_id"].set_int64_param(-7);
  p["corr"].set_string_param("abc");
  p["sequence_start"].set_bool_param(true);
  p["weight"].set_double_param(0.5);
  p["triton_enable_empty_final_response"].set_bool_param(false);
  StatusOr<InferRequest> request = decode(pb);
  ASSERT_TRUE(request.ok()) << request.status();
  const Parameters& got = request->parameters;
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(*got.find("priority"), ParamValue(uint64_t{2}));
  EXPECT_EQ(*got.find("sequence_id"), ParamValue(int64_t{-7}));
  EXPECT_EQ(*got.find("corr"), ParamValue(std::string("abc")));
  EXPECT_EQ(*got.find("sequence_start"), ParamValue(true));
  EXPECT_EQ(*got.find("weight"), ParamValue(0.5));
  EXPECT_EQ(*got.find("triton_enable_empty_final_response"), ParamValue(false));
}

TEST(ProtobufRequestDecoder, KeepsParametersInOrderOfAppearance) {
  std::string out;
  WireWriter w(out);
  for (const char* key : {"zeta", "alpha", "mid"}) writeParameterEntry(w, 4, key, int64_t{1});
  writeParameterEntry(w, 4, "alpha", int64_t{2});  // repeated key: last value, first place
  StatusOr<InferRequest> request = ProtobufRequestDecoder().decode(Buffer::fromString(out));
  ASSERT_TRUE(request.ok());
  std::vector<std::string> keys;
  for (const auto& [key, value] : request->parameters) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid"}));
  EXPECT_EQ(*request->parameters.find("alpha"), ParamValue(int64_t{2}));
}

PbParams encodedParams(const Parameters& params) {
  InferRequest request;
  request.parameters = params;
  Buffer message = encodeFlat(request);
  PbRequest pb;
  EXPECT_TRUE(pb.ParseFromArray(message.data(), static_cast<int>(message.size())));
  return pb.parameters();
}

TEST(ProtobufRequestEncoder, WritesParameterKindsTritonAccepts) {
  Parameters params;
  params.set("priority", int64_t{3});
  params.set("sequence_id", uint64_t{0x8000000000000001ull});
  params.set("timeout", uint64_t{1000});
  params.set("binary_data_output", true);
  params.set("triton_enable_empty_final_response", true);
  params.set("custom_u", uint64_t{5});
  PbParams pb = encodedParams(params);
  EXPECT_EQ(pb.at("priority").parameter_choice_case(), inference::InferParameter::kUint64Param);
  EXPECT_EQ(pb.at("priority").uint64_param(), 3u);
  EXPECT_EQ(pb.at("sequence_id").parameter_choice_case(), inference::InferParameter::kInt64Param);
  EXPECT_EQ(pb.at("sequence_id").int64_param(), std::bit_cast<int64_t>(0x8000000000000001ull));
  EXPECT_EQ(pb.at("timeout").parameter_choice_case(), inference::InferParameter::kInt64Param);
  EXPECT_EQ(pb.at("timeout").int64_param(), 1000);
  EXPECT_EQ(pb.count("binary_data_output"), 0u);
  EXPECT_TRUE(pb.at("triton_enable_empty_final_response").bool_param());
  EXPECT_EQ(pb.at("custom_u").uint64_param(), 5u);

  Parameters others;
  others.set("priority", uint64_t{4});
  others.set("sequence_id", std::string("corr-1"));
  PbParams kept = encodedParams(others);
  EXPECT_EQ(kept.at("priority").uint64_param(), 4u);
  EXPECT_EQ(kept.at("sequence_id").string_param(), "corr-1");
  others.set("sequence_id", int64_t{-2});
  EXPECT_EQ(encodedParams(others).at("sequence_id").int64_param(), -2);
}

TEST(ProtobufRequestEncoder, WritesOutputParametersTritonAccepts) {
  InferRequest request;
  RequestedOutput out{.name = "o", .binary_data = true, .classification = 2};
  out.shared_memory = SharedMemoryRef{"r", 8, 16};
  request.outputs.push_back(out);
  Buffer message = encodeFlat(request);
  PbRequest pb;
  ASSERT_TRUE(pb.ParseFromArray(message.data(), static_cast<int>(message.size())));
  const auto& p = pb.outputs(0).parameters();
  EXPECT_EQ(p.count("binary_data"), 0u);  // HTTP only
  EXPECT_EQ(p.at("classification").parameter_choice_case(), inference::InferParameter::kInt64Param);
  EXPECT_EQ(p.at("classification").int64_param(), 2);
  EXPECT_EQ(p.at("shared_memory_offset").int64_param(), 8);
  EXPECT_EQ(p.at("shared_memory_byte_size").int64_param(), 16);
}

TEST(ProtobufRequestEncoder, RejectsValuesTritonCannotTake) {
  InferRequest negative;
  negative.parameters.set("priority", int64_t{-1});
  EXPECT_EQ(ProtobufRequestEncoder().encode(negative).status().code(),
            absl::StatusCode::kInvalidArgument);
  InferRequest huge;
  huge.parameters.set("timeout", std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ProtobufRequestEncoder().encode(huge).status().code(),
            absl::StatusCode::kInvalidArgument);
  InferRequest invalid;
  invalid.inputs.push_back(InferInput{.name = "x"});
  EXPECT_EQ(ProtobufRequestEncoder().encode(invalid).status().code(),
            absl::StatusCode::kInvalidArgument);
  InferRequest short_data;
  short_data.inputs.push_back(rawInput("x", DataType::kFp32, Shape{2}));
  short_data.inputs[0].shape = Shape{3};
  EXPECT_EQ(ProtobufRequestEncoder().encode(short_data).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- invalid tensors ----------------------------------------------------------------

TEST(ProtobufRequestDecoder, RejectsUnknownDatatype) {
  for (const char* type : {"FLOAT32", "fp32", "STRING", ""}) {
    PbRequest pb;
    addInput(pb, "x", type, {1});
    pb.add_raw_input_contents("abcd");
    expectError(decode(pb), absl::StatusCode::kInvalidArgument, "datatype");
  }
}

TEST(ProtobufRequestDecoder, RejectsNegativeDim) {
  PbRequest pb;
  addInput(pb, "x", "UINT8", {2, -1});
  pb.add_raw_input_contents("ab");
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "negative");
}

TEST(ProtobufRequestDecoder, RejectsDuplicateInputNames) {
  PbRequest pb;
  addInput(pb, "x", "UINT8", {1});
  addInput(pb, "y", "UINT8", {1});
  addInput(pb, "x", "UINT8", {1});
  for (int i = 0; i < 3; ++i) pb.add_raw_input_contents("a");
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "'x'");
}

// ---- limits and many tensors --------------------------------------------------------

TEST(ProtobufRequestDecoder, RejectsMessageOverTheLimit) {
  PbRequest pb;
  addInput(pb, "x", "UINT8", {100});
  pb.add_raw_input_contents(std::string(100, 'a'));
  DecodeLimits limits;
  limits.max_binary_body_bytes = pb.ByteSizeLong() - 1;
  expectError(decode(pb, limits), absl::StatusCode::kResourceExhausted);
  limits.max_binary_body_bytes = pb.ByteSizeLong();
  EXPECT_TRUE(decode(pb, limits).ok());
}

TEST(ProtobufRequestDecoder, RejectsTooManyTensors) {
  DecodeLimits limits;
  limits.max_tensors = 2;
  PbRequest inputs;
  for (int i = 0; i < 3; ++i) addInput(inputs, "x" + std::to_string(i), "UINT8", {1});
  expectError(decode(inputs, limits), absl::StatusCode::kResourceExhausted, "inputs");
  PbRequest outputs;
  for (int i = 0; i < 3; ++i) outputs.add_outputs()->set_name("o");
  expectError(decode(outputs, limits), absl::StatusCode::kResourceExhausted, "outputs");
  PbRequest raw;
  for (int i = 0; i < 3; ++i) raw.add_raw_input_contents("a");
  expectError(decode(raw, limits), absl::StatusCode::kResourceExhausted, "raw_input_contents");
}

TEST(ProtobufRequestCodec, RoundTripsManyTensors) {
  InferRequest request;
  request.model_name = "many";
  for (int i = 0; i < 2000; ++i) {
    DataType type = kAllDataTypes[i % std::size(kAllDataTypes)];
    InferInput in = rawInput("in" + std::to_string(i), type, Shape{i % 3});
    if (i % 5 == 0) {
      in.shared_memory = SharedMemoryRef{"r", static_cast<uint64_t>(i), 8};
      in.data = Buffer();
    }
    request.inputs.push_back(std::move(in));
    request.outputs.push_back(RequestedOutput{.name = "out" + std::to_string(i)});
  }
  Buffer message = encodeFlat(request);
  PbRequest pb;
  ASSERT_TRUE(pb.ParseFromArray(message.data(), static_cast<int>(message.size())));
  expectSameRequest(pb, request);
  StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, request);
}

// ---- incomplete, malformed and padded input -----------------------------------------

TEST(ProtobufRequestDecoder, EmptyPayloadIsAnEmptyRequest) {
  StatusOr<InferRequest> request = ProtobufRequestDecoder().decode(Buffer());
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(*request, InferRequest{});
}

TEST(ProtobufRequestDecoder, TruncatedAtEveryByteNeverCrashes) {
  PbRequest typed;
  typed.set_model_name("typed");
  (*typed.mutable_parameters())["p"].set_double_param(1.0);
  for (const TypedCase& c : typedCases()) {
    c.fill(*addInput(typed, "t" + std::string(dataTypeName(c.type)),
                     std::string(dataTypeName(c.type)), {3})
                ->mutable_contents());
  }
  std::string typed_bytes = typed.SerializeAsString();
  std::string typed_unpacked =
      requestWithContents("FP64", Shape{3}, {unpacked(typed.inputs(10).contents())});
  Buffer rich = encodeFlat(richRequest());
  for (std::string_view bytes :
       {rich.view(), std::string_view(typed_bytes), std::string_view(typed_unpacked)}) {
    ASSERT_TRUE(ProtobufRequestDecoder().decode(Buffer::borrowed(bytes)).ok());
    for (size_t n = 0; n < bytes.size(); ++n) {
      // A copy of exactly n bytes, so that the sanitizer sees any read past the cut.
      Buffer prefix = Buffer::copyOf(bytes.substr(0, n));
      StatusOr<InferRequest> result = ProtobufRequestDecoder().decode(prefix);
      if (!result.ok()) {
        EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << n;
      }
    }
  }
}

TEST(ProtobufRequestDecoder, RejectsTrailingJunkThatIsNotAField) {
  Buffer valid = encodeFlat(richRequest());
  for (std::string junk : {std::string("\x00", 1), std::string("\xff"), std::string("\x07"),
                           std::string("\x3a\x05"
                                       "ab")}) {
    std::string bytes = std::string(valid.view()) + junk;
    expectError(ProtobufRequestDecoder().decode(Buffer::fromString(bytes)),
                absl::StatusCode::kInvalidArgument, "malformed");
  }
}

TEST(ProtobufRequestDecoder, RejectsGarbageVarints) {
  std::string eleven_byte_length = "\x0a" + std::string(10, '\x81') + "\x01";
  std::string eleven_byte_dim;
  WireWriter w(eleven_byte_dim);
  size_t input = w.beginMessage(5);
  w.tag(3, WireType::kVarint);
  eleven_byte_dim += std::string(10, '\xff') + "\x01";
  w.endMessage(input);
  for (const std::string& bytes : {eleven_byte_length, eleven_byte_dim}) {
    expectError(ProtobufRequestDecoder().decode(Buffer::fromString(bytes)),
                absl::StatusCode::kInvalidArgument, "varint");
  }
}

TEST(ProtobufRequestDecoder, RejectsLengthPastEnd) {
  PbRequest pb;
  pb.add_raw_input_contents(std::string(100, 'a'));
  std::string bytes = pb.SerializeAsString();
  bytes.resize(bytes.size() - 1);
  expectError(ProtobufRequestDecoder().decode(Buffer::fromString(bytes)),
              absl::StatusCode::kInvalidArgument, "past the end");
}

void addUnknownFields(google::protobuf::Message* message) {
  auto* u = message->GetReflection()->MutableUnknownFields(message);
  u->AddVarint(1000, 12345);
  u->AddFixed32(1001, 0xdeadbeef);
  u->AddFixed64(1002, 0x0123456789abcdefull);
  u->AddLengthDelimited(1003, "unknown bytes");
  auto* group = u->AddGroup(1004);
  group->AddVarint(1, 1);
  group->AddGroup(2)->AddLengthDelimited(3, "nested");
}

TEST(ProtobufRequestDecoder, SkipsUnknownFieldsOfEveryWireType) {
  PbRequest pb;
  pb.set_model_name("m");
  (*pb.mutable_parameters())["p"].set_int64_param(1);
  auto* typed = addInput(pb, "typed", "INT32", {2});
  typed->mutable_contents()->add_int_contents(1);
  typed->mutable_contents()->add_int_contents(2);
  pb.add_outputs()->set_name("o");
  StatusOr<InferRequest> plain = decode(pb);
  ASSERT_TRUE(plain.ok()) << plain.status();

  addUnknownFields(&pb);
  addUnknownFields(pb.mutable_inputs(0));
  addUnknownFields(pb.mutable_inputs(0)->mutable_contents());
  addUnknownFields(&(*pb.mutable_parameters())["p"]);
  addUnknownFields(pb.mutable_outputs(0));
  std::string bytes = pb.SerializeAsString();
  // A known field with an unexpected wire type is an unknown field too (protobuf's rule).
  WireWriter(bytes).varintField(1, 5);
  PbRequest reparsed;
  ASSERT_TRUE(reparsed.ParseFromString(bytes));
  EXPECT_EQ(reparsed.model_name(), "m");
  StatusOr<InferRequest> with_unknowns = ProtobufRequestDecoder().decode(Buffer::fromString(bytes));
  ASSERT_TRUE(with_unknowns.ok()) << with_unknowns.status();
  EXPECT_EQ(*with_unknowns, *plain);
}

TEST(ProtobufRequestDecoder, LastOccurrenceOfAStringWins) {
  PbRequest a;
  a.set_model_name("first");
  a.set_id("id-a");
  PbRequest b;
  b.set_model_name("second");
  std::string bytes = a.SerializeAsString() + b.SerializeAsString();
  PbRequest merged;
  ASSERT_TRUE(merged.ParseFromString(bytes));
  StatusOr<InferRequest> request = ProtobufRequestDecoder().decode(Buffer::fromString(bytes));
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->model_name, merged.model_name());
  EXPECT_EQ(request->id, merged.id());
}

// Random byte edits of `base`: overwrite, erase or insert, a few per message.
std::string mutate(std::string bytes, std::mt19937& rng) {
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !bytes.empty(); ++e) {
    size_t pos = rng() % bytes.size();
    switch (rng() % 3) {
      case 0:
        bytes[pos] = static_cast<char>(rng());
        break;
      case 1:
        bytes.erase(pos, 1 + rng() % 8);
        break;
      default:
        bytes.insert(pos, 1, static_cast<char>(rng()));
    }
  }
  return bytes;
}

TEST(ProtobufRequestDecoder, SurvivesRandomMutations) {
  // Property: never a crash; whatever decodes encodes again and decodes to an equal
  // request once the encoder's kind conversions have been applied.
  std::string base(encodeFlat(richRequest()).view());
  std::mt19937 rng(20240601);
  int decoded_ok = 0;
  for (int i = 0; i < 3000; ++i) {
    StatusOr<InferRequest> first =
        ProtobufRequestDecoder().decode(Buffer::copyOf(mutate(base, rng)));
    if (!first.ok()) continue;
    ++decoded_ok;
    StatusOr<BufferChain> encoded = ProtobufRequestEncoder().encode(*first);
    if (!encoded.ok()) continue;  // e.g. a mutated priority that is negative
    StatusOr<InferRequest> second = ProtobufRequestDecoder().decode(encoded->flatten());
    ASSERT_TRUE(second.ok()) << second.status();
    StatusOr<BufferChain> again = ProtobufRequestEncoder().encode(*second);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->toString(), encoded->toString());
  }
  EXPECT_GT(decoded_ok, 0);
}

// ---- zero copy -----------------------------------------------------------------------

TEST(ProtobufRequestDecoder, RawInputsAreSlicesOfTheMessage) {
  Buffer message = encodeFlat(richRequest());
  StatusOr<InferRequest> request = ProtobufRequestDecoder().decode(message);
  ASSERT_TRUE(request.ok());
  int checked = 0;
  for (const InferInput& in : request->inputs) {
    if (in.data.empty()) continue;
    EXPECT_GE(in.data.data(), message.data());
    EXPECT_LE(in.data.data() + in.data.size(), message.data() + message.size());
    EXPECT_EQ(in.data.owner(), message.owner());
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(std::size(kAllDataTypes)));
}

TEST(ProtobufRequestDecoder, InputsOutliveTheCallersMessage) {
  std::optional<InferRequest> request;
  {
    Buffer message = encodeFlat(richRequest());
    StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(message);
    ASSERT_TRUE(decoded.ok());
    request = std::move(*decoded);
  }
  EXPECT_EQ(*request, richRequest());  // the slices kept the message bytes alive
}

TEST(ProtobufRequestEncoder, ChainsTheInputBuffersThemselves) {
  InferRequest request = richRequest();
  StatusOr<BufferChain> chain = ProtobufRequestEncoder().encode(request);
  ASSERT_TRUE(chain.ok());
  for (const InferInput& in : request.inputs) {
    if (in.data.empty()) continue;
    bool found = false;
    for (const Buffer& segment : chain->segments()) found |= segment.data() == in.data.data();
    EXPECT_TRUE(found) << in.name;
  }
}

}  // namespace
}  // namespace infergate::codecs
