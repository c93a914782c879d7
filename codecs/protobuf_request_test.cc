// ProtobufRequestDecoder and ProtobufRequestEncoder, cross-checked against the classes
// protoc generates from codecs/proto/grpc_service.proto: datatypes, typed contents,
// data sources, shared memory, outputs and parameter kinds.

#include "codecs/protobuf_request_test_util.h"

namespace infergate::codecs {
namespace {

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
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "must be > 0, got -1");
  (*out->mutable_parameters())["classification"].set_int64_param(0);
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "must be > 0, got 0");
  (*out->mutable_parameters())["classification"].set_uint64_param(1);
  expectError(decode(pb), absl::StatusCode::kInvalidArgument, "int64_param");
}

// ---- parameter kinds ----------------------------------------------------------------

// PROTOCOL 9.2-9.4 and pitfall 11: the kinds gRPC takes for the keys Triton reads.
TEST(ProtobufRequestDecoder, RefusesParameterKindsTritonDoesNotTake) {
  const auto invalid = absl::StatusCode::kInvalidArgument;
  auto with = [](const char* key, auto set) {
    PbRequest pb;
    set((*pb.mutable_parameters())[key]);
    return decode(pb);
  };
  expectError(with("sequence_id", [](auto& p) { p.set_uint64_param(5); }), invalid,
              "parameter 'sequence_id' must be an int64_param or a string_param");
  expectError(with("sequence_start", [](auto& p) { p.set_int64_param(1); }), invalid,
              "parameter 'sequence_start' must be a bool_param");
  expectError(with("sequence_end", [](auto& p) { p.set_string_param("true"); }), invalid,
              "parameter 'sequence_end' must be a bool_param");
  expectError(with("priority", [](auto& p) { p.set_int64_param(-1); }), invalid,
              "parameter 'priority' must be a non-negative int64_param or a uint64_param");
  expectError(with("priority", [](auto& p) { p.set_double_param(1); }), invalid, "'priority'");
  expectError(with("timeout", [](auto& p) { p.set_uint64_param(5); }), invalid,
              "parameter 'timeout' must be a non-negative int64_param");
  expectError(with("triton_foo", [](auto& p) { p.set_bool_param(true); }), invalid,
              "reserved for Triton usage");
  expectError(with("triton_enable_empty_final_response", [](auto& p) { p.set_int64_param(1); }),
              invalid, "must be a bool_param");
  expectError(with("my_param", [](auto& p) { p.set_uint64_param(5); }), invalid,
              "(not uint64_param)");
  EXPECT_TRUE(with("priority", [](auto& p) { p.set_uint64_param(3); }).ok());
  EXPECT_TRUE(with("timeout", [](auto& p) { p.set_int64_param(100); }).ok());
  EXPECT_TRUE(with("sequence_id", [](auto& p) { p.set_string_param("s"); }).ok());
}

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

}  // namespace
}  // namespace infergate::codecs
