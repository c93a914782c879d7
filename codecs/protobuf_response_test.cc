// ProtobufResponseEncoder and ProtobufResponseDecoder, cross-checked against the classes
// protoc generates from codecs/proto/grpc_service.proto.

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codecs/bytes_tensor.h"
#include "codecs/protobuf_test_util.h"
#include "codecs/protobuf_response_decoder.h"
#include "codecs/protobuf_response_encoder.h"
#include "grpc_service.pb.h"

namespace infergate::codecs {
namespace {

using PbResponse = inference::ModelInferResponse;
using PbStream = inference::ModelStreamInferResponse;

// ---- helpers -----------------------------------------------------------------------

InferOutput output(std::string name, DataType type, Shape shape) {
  InferOutput out;
  out.name = std::move(name);
  out.datatype = type;
  size_t count = static_cast<size_t>(*shape.elementCount());
  out.shape = std::move(shape);
  out.data = Buffer::fromString(sampleBytes(type, count));
  return out;
}

// Every datatype, an output in shm, a zero-size output, parameters everywhere.
InferResponse richResponse() {
  InferResponse r;
  r.model_name = "model";
  r.model_version = "1";
  r.id = "response-id";
  r.parameters.set("triton_final_response", true);
  r.parameters.set("count", int64_t{-4});
  for (DataType type : kAllDataTypes) {
    r.outputs.push_back(output("out_" + std::string(dataTypeName(type)), type, Shape{3, 2}));
  }
  InferOutput shm{.name = "shm_out", .datatype = DataType::kFp32, .shape = Shape{4}};
  shm.shared_memory = SharedMemoryRef{"region", 0, 16};
  r.outputs.insert(r.outputs.begin() + 2, shm);
  r.outputs.push_back(output("empty", DataType::kInt64, Shape{0}));
  r.outputs[0].parameters.set("label", std::string("x"));
  r.outputs[0].parameters.set("score", 0.5);
  return r;
}

void expectSameResponse(const PbResponse& pb, const InferResponse& response) {
  EXPECT_EQ(pb.model_name(), response.model_name);
  EXPECT_EQ(pb.model_version(), response.model_version);
  EXPECT_EQ(pb.id(), response.id);
  expectParams(pb.parameters(), response.parameters);
  ASSERT_EQ(static_cast<size_t>(pb.outputs_size()), response.outputs.size());
  ASSERT_EQ(pb.raw_output_contents_size(), pb.outputs_size());  // always, index-aligned
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const InferOutput& out = response.outputs[i];
    const auto& pout = pb.outputs(static_cast<int>(i));
    EXPECT_EQ(pout.name(), out.name);
    EXPECT_EQ(pout.datatype(), dataTypeName(out.datatype));
    EXPECT_EQ(std::vector<int64_t>(pout.shape().begin(), pout.shape().end()), out.shape.dims());
    EXPECT_FALSE(pout.has_contents());
    expectParams(pout.parameters(), out.parameters);
    std::string_view expected = out.shared_memory ? std::string_view() : out.data.view();
    EXPECT_EQ(pb.raw_output_contents(static_cast<int>(i)), expected) << out.name;
  }
}

Buffer encodeFlat(const InferResponse& response) {
  StatusOr<BufferChain> chain = ProtobufResponseEncoder().encode(response);
  EXPECT_TRUE(chain.ok()) << chain.status();
  return chain.ok() ? chain->flatten() : Buffer();
}

template <typename T>
T parse(const Buffer& message) {
  T pb;
  EXPECT_TRUE(pb.ParseFromArray(message.data(), static_cast<int>(message.size())));
  return pb;
}

StatusOr<InferResponse> decode(const google::protobuf::Message& message,
                               const DecodeLimits& limits = {}) {
  return ProtobufResponseDecoder(limits).decode(Buffer::fromString(message.SerializeAsString()));
}

void expectError(const StatusOr<InferResponse>& result, absl::StatusCode code,
                 std::string_view fragment = {}) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_NE(messageOf(result.status()).find(fragment), std::string_view::npos) << result.status();
}

PbResponse::InferOutputTensor* addOutput(PbResponse& pb, std::string name, std::string datatype,
                                         std::initializer_list<int64_t> shape) {
  auto* out = pb.add_outputs();
  out->set_name(std::move(name));
  out->set_datatype(std::move(datatype));
  for (int64_t d : shape) out->add_shape(d);
  return out;
}

// What a decoded response looks like: shm is not on the wire, so it decodes as no data.
InferResponse asDecoded(InferResponse response) {
  for (InferOutput& out : response.outputs) out.shared_memory.reset();
  return response;
}

// ---- encoder -----------------------------------------------------------------------

TEST(ProtobufResponseEncoder, WritesTritonStyleRawContentsForEveryDatatype) {
  InferResponse response = richResponse();
  expectSameResponse(parse<PbResponse>(encodeFlat(response)), response);
}

TEST(ProtobufResponseEncoder, MatchesGeneratedSerialization) {
  InferResponse response;
  response.model_name = "m";
  response.model_version = "3";
  response.parameters.set("triton_final_response", false);
  response.outputs.push_back(output("o", DataType::kInt32, Shape{2, 80}));
  response.outputs[0].parameters.set("p", uint64_t{9});
  response.outputs.push_back(output("z", DataType::kFp32, Shape{0}));
  PbResponse pb;
  pb.set_model_name("m");
  pb.set_model_version("3");
  (*pb.mutable_parameters())["triton_final_response"].set_bool_param(false);
  auto* o = addOutput(pb, "o", "INT32", {2, 80});
  (*o->mutable_parameters())["p"].set_uint64_param(9);
  addOutput(pb, "z", "FP32", {0});
  pb.add_raw_output_contents(std::string(response.outputs[0].data.view()));
  pb.add_raw_output_contents("");
  EXPECT_EQ(encodeFlat(response).view(), pb.SerializeAsString());
}

TEST(ProtobufResponseEncoder, ChainsTheOutputBuffersThemselves) {
  InferResponse response = richResponse();
  StatusOr<BufferChain> chain = ProtobufResponseEncoder().encode(response);
  ASSERT_TRUE(chain.ok());
  for (const InferOutput& out : response.outputs) {
    if (out.data.empty()) continue;
    bool found = false;
    for (const Buffer& segment : chain->segments()) found |= segment.data() == out.data.data();
    EXPECT_TRUE(found) << out.name;
  }
}

TEST(ProtobufResponseEncoder, RejectsOutputsItCannotDescribe) {
  InferResponse invalid;
  invalid.outputs.push_back(InferOutput{.name = "x"});
  EXPECT_EQ(ProtobufResponseEncoder().encode(invalid).status().code(),
            absl::StatusCode::kInvalidArgument);
  InferResponse mismatched;
  mismatched.outputs.push_back(output("x", DataType::kFp32, Shape{2}));
  mismatched.outputs[0].shape = Shape{3};
  EXPECT_EQ(ProtobufResponseEncoder().encode(mismatched).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProtobufResponseEncoder, EmptyResponseIsAnEmptyMessage) {
  StatusOr<BufferChain> chain = ProtobufResponseEncoder().encode(InferResponse{});
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->empty());
}

// ---- decoder -----------------------------------------------------------------------

TEST(ProtobufResponseDecoder, DecodesEveryDatatypeFromRaw) {
  PbResponse pb;
  for (DataType type : kAllDataTypes) {
    addOutput(pb, std::string(dataTypeName(type)), std::string(dataTypeName(type)), {2, 2});
    pb.add_raw_output_contents(sampleBytes(type, 4));
  }
  StatusOr<InferResponse> response = decode(pb);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->outputs.size(), std::size(kAllDataTypes));
  for (size_t i = 0; i < std::size(kAllDataTypes); ++i) {
    EXPECT_EQ(response->outputs[i].datatype, kAllDataTypes[i]);
    EXPECT_EQ(response->outputs[i].shape, (Shape{2, 2}));
    EXPECT_EQ(response->outputs[i].data.view(), sampleBytes(kAllDataTypes[i], 4));
  }
}

TEST(ProtobufResponseCodec, RoundTripsEveryDatatype) {
  InferResponse response = richResponse();
  StatusOr<InferResponse> decoded = ProtobufResponseDecoder().decode(encodeFlat(response));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, asDecoded(response));
}

TEST(ProtobufResponseDecoder, ConvertsTypedContentsWhenRawIsAbsent) {
  // KServe / MLServer style: typed contents, no raw_output_contents.
  PbResponse pb;
  auto* b = addOutput(pb, "b", "BOOL", {2})->mutable_contents();
  b->add_bool_contents(true);
  b->add_bool_contents(false);
  auto* i8 = addOutput(pb, "i8", "INT8", {2})->mutable_contents();
  i8->add_int_contents(-1);
  i8->add_int_contents(5);
  auto* u16 = addOutput(pb, "u16", "UINT16", {1})->mutable_contents();
  u16->add_uint_contents(0xfffe);
  auto* i64 = addOutput(pb, "i64", "INT64", {1})->mutable_contents();
  i64->add_int64_contents(std::numeric_limits<int64_t>::min());
  auto* u64 = addOutput(pb, "u64", "UINT64", {1})->mutable_contents();
  u64->add_uint64_contents(std::numeric_limits<uint64_t>::max());
  auto* f32 = addOutput(pb, "f32", "FP32", {2})->mutable_contents();
  f32->add_fp32_contents(0.5f);
  f32->add_fp32_contents(-1.0f);
  addOutput(pb, "f64", "FP64", {1})->mutable_contents()->add_fp64_contents(2.25);
  auto* s = addOutput(pb, "s", "BYTES", {2})->mutable_contents();
  s->add_bytes_contents("hello");
  s->add_bytes_contents("");
  StatusOr<InferResponse> response = decode(pb);
  ASSERT_TRUE(response.ok()) << response.status();
  const std::vector<std::string> expected = {
      std::string("\x01\x00", 2),
      le<int8_t>({-1, 5}),
      le<uint16_t>({0xfffe}),
      le<int64_t>({std::numeric_limits<int64_t>::min()}),
      le<uint64_t>({std::numeric_limits<uint64_t>::max()}),
      le<float>({0.5f, -1.0f}),
      le<double>({2.25}),
      serializeBytesElements({"hello", ""}),
  };
  ASSERT_EQ(response->outputs.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(response->outputs[i].data.view(), expected[i]) << response->outputs[i].name;
  }
}

TEST(ProtobufResponseDecoder, RawEntryWinsAndMissingIndexesTakeContents) {
  PbResponse pb;
  auto* first = addOutput(pb, "first", "INT32", {1});
  first->mutable_contents()->add_int_contents(99);  // ignored: raw entry 0 exists
  addOutput(pb, "second", "INT32", {1})->mutable_contents()->add_int_contents(7);
  addOutput(pb, "third", "INT32", {1});  // neither: no data
  pb.add_raw_output_contents(le<int32_t>({1}));
  StatusOr<InferResponse> response = decode(pb);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->outputs[0].data.view(), le<int32_t>({1}));
  EXPECT_EQ(response->outputs[1].data.view(), le<int32_t>({7}));
  EXPECT_TRUE(response->outputs[2].data.empty());
}

TEST(ProtobufResponseDecoder, AcceptsEmptyEntriesOfShmOutputs) {
  PbResponse pb;
  addOutput(pb, "shm", "FP32", {1, 16});
  addOutput(pb, "data", "UINT8", {2});
  pb.add_raw_output_contents("");
  pb.add_raw_output_contents("ab");
  StatusOr<InferResponse> response = decode(pb);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->outputs[0].data.empty());
  EXPECT_EQ(response->outputs[1].data.view(), "ab");
}

TEST(ProtobufResponseDecoder, RejectsBadOutputs) {
  PbResponse surplus;
  addOutput(surplus, "o", "UINT8", {1});
  surplus.add_raw_output_contents("a");
  surplus.add_raw_output_contents("b");
  expectError(decode(surplus), absl::StatusCode::kInvalidArgument, "raw_output_contents");
  PbResponse wrong_size;
  addOutput(wrong_size, "o", "FP64", {1});
  wrong_size.add_raw_output_contents("abc");
  expectError(decode(wrong_size), absl::StatusCode::kInvalidArgument, "'o'");
  PbResponse bad_type;
  addOutput(bad_type, "o", "FLOAT", {1});
  expectError(decode(bad_type), absl::StatusCode::kInvalidArgument, "datatype");
  PbResponse negative;
  addOutput(negative, "o", "UINT8", {-3});
  expectError(decode(negative), absl::StatusCode::kInvalidArgument, "negative");
  PbResponse typed_half;
  addOutput(typed_half, "o", "FP16", {1})->mutable_contents()->add_fp32_contents(1.0f);
  expectError(decode(typed_half), absl::StatusCode::kInvalidArgument, "'o'");
}

TEST(ProtobufResponseDecoder, KeepsParameterKinds) {
  PbResponse pb;
  (*pb.mutable_parameters())["triton_final_response"].set_bool_param(true);
  auto* out = addOutput(pb, "o", "UINT8", {0});
  (*out->mutable_parameters())["u"].set_uint64_param(3);
  (*out->mutable_parameters())["d"].set_double_param(-0.5);
  StatusOr<InferResponse> response = decode(pb);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(*response->parameters.find("triton_final_response"), ParamValue(true));
  EXPECT_EQ(*response->outputs[0].parameters.find("u"), ParamValue(uint64_t{3}));
  EXPECT_EQ(*response->outputs[0].parameters.find("d"), ParamValue(-0.5));
}

TEST(ProtobufResponseDecoder, OutputsAreSlicesOfTheMessage) {
  Buffer message = encodeFlat(richResponse());
  StatusOr<InferResponse> response = ProtobufResponseDecoder().decode(message);
  ASSERT_TRUE(response.ok());
  for (const InferOutput& out : response->outputs) {
    if (out.data.empty()) continue;
    EXPECT_GE(out.data.data(), message.data());
    EXPECT_LE(out.data.data() + out.data.size(), message.data() + message.size());
    EXPECT_EQ(out.data.owner(), message.owner());
  }
}

TEST(ProtobufResponseDecoder, RejectsOverLimits) {
  PbResponse pb;
  for (int i = 0; i < 3; ++i) addOutput(pb, "o" + std::to_string(i), "UINT8", {1});
  DecodeLimits small;
  small.max_binary_body_bytes = pb.ByteSizeLong() - 1;
  expectError(decode(pb, small), absl::StatusCode::kResourceExhausted);
  DecodeLimits few;
  few.max_tensors = 2;
  expectError(decode(pb, few), absl::StatusCode::kResourceExhausted, "outputs");
}

TEST(ProtobufResponseCodec, RoundTripsManyOutputs) {
  InferResponse response;
  for (int i = 0; i < 2000; ++i) {
    DataType type = kAllDataTypes[i % std::size(kAllDataTypes)];
    response.outputs.push_back(output("o" + std::to_string(i), type, Shape{1, i % 4}));
  }
  Buffer message = encodeFlat(response);
  expectSameResponse(parse<PbResponse>(message), response);
  StatusOr<InferResponse> decoded = ProtobufResponseDecoder().decode(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, response);
}

TEST(ProtobufResponseDecoder, EmptyPayloadIsAnEmptyResponse) {
  StatusOr<InferResponse> response = ProtobufResponseDecoder().decode(Buffer());
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(*response, InferResponse{});
}

TEST(ProtobufResponseDecoder, RejectsTrailingJunkThatIsNotAField) {
  Buffer valid = encodeFlat(richResponse());
  for (std::string junk : {std::string("\x00", 1), std::string("\xff"), std::string("\x32\x09")}) {
    Buffer bytes = Buffer::fromString(std::string(valid.view()) + junk);
    expectError(ProtobufResponseDecoder().decode(bytes), absl::StatusCode::kInvalidArgument,
                "malformed");
  }
}

TEST(ProtobufResponseDecoder, SkipsUnknownFields) {
  PbResponse pb;
  pb.set_id("x");
  addOutput(pb, "o", "UINT8", {1});
  pb.add_raw_output_contents("z");
  StatusOr<InferResponse> plain = decode(pb);
  ASSERT_TRUE(plain.ok());
  for (google::protobuf::Message* m :
       std::initializer_list<google::protobuf::Message*>{&pb, pb.mutable_outputs(0)}) {
    auto* u = m->GetReflection()->MutableUnknownFields(m);
    u->AddVarint(500, 1);
    u->AddFixed32(501, 2);
    u->AddFixed64(502, 3);
    u->AddLengthDelimited(503, "four");
    u->AddGroup(504)->AddVarint(1, 5);
  }
  StatusOr<InferResponse> with_unknowns = decode(pb);
  ASSERT_TRUE(with_unknowns.ok()) << with_unknowns.status();
  EXPECT_EQ(*with_unknowns, *plain);
}

TEST(ProtobufResponseDecoder, TruncatedAtEveryByteNeverCrashes) {
  InferResponse response = richResponse();
  Buffer message = encodeFlat(response);
  StatusOr<BufferChain> stream = ProtobufResponseEncoder().encodeStream(&response, "oops");
  ASSERT_TRUE(stream.ok());
  Buffer stream_message = stream->flatten();
  ProtobufResponseDecoder decoder;
  for (size_t n = 0; n < message.size(); ++n) {
    StatusOr<InferResponse> r = decoder.decode(Buffer::copyOf(message.view().substr(0, n)));
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
  for (size_t n = 0; n < stream_message.size(); ++n) {
    StatusOr<StreamInferResponse> r =
        decoder.decodeStreamResponse(Buffer::copyOf(stream_message.view().substr(0, n)));
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(ProtobufResponseDecoder, SurvivesRandomMutations) {
  std::string base(encodeFlat(richResponse()).view());
  std::mt19937 rng(7);
  int decoded_ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = base;
    for (int e = 0, edits = 1 + static_cast<int>(rng() % 4); e < edits && !bytes.empty(); ++e) {
      size_t pos = rng() % bytes.size();
      if (rng() % 2) {
        bytes[pos] = static_cast<char>(rng());
      } else {
        bytes.erase(pos, 1 + rng() % 8);
      }
    }
    StatusOr<InferResponse> first = ProtobufResponseDecoder().decode(Buffer::copyOf(bytes));
    if (!first.ok()) continue;
    ++decoded_ok;
    // Whatever decodes re-encodes, and decodes to the same response.
    Buffer encoded = encodeFlat(*first);
    StatusOr<InferResponse> second = ProtobufResponseDecoder().decode(encoded);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(*second, *first);
  }
  EXPECT_GT(decoded_ok, 0);
}

// ---- ModelStreamInferResponse -----------------------------------------------------

TEST(ProtobufStreamResponse, EncodesErrorAndResponse) {
  InferResponse response;
  response.id = "req-9";
  response.model_name = "m";
  response.parameters.set("triton_final_response", true);
  StatusOr<BufferChain> chain =
      ProtobufResponseEncoder().encodeStream(&response, "in-band failure");
  ASSERT_TRUE(chain.ok());
  PbStream pb = parse<PbStream>(chain->flatten());
  EXPECT_EQ(pb.error_message(), "in-band failure");
  ASSERT_TRUE(pb.has_infer_response());
  EXPECT_EQ(pb.infer_response().id(), "req-9");
  EXPECT_TRUE(pb.infer_response().parameters().at("triton_final_response").bool_param());

  StatusOr<StreamInferResponse> decoded =
      ProtobufResponseDecoder().decodeStreamResponse(chain->flatten());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->error_message, "in-band failure");
  ASSERT_TRUE(decoded->response.has_value());
  EXPECT_EQ(*decoded->response, response);
}

TEST(ProtobufStreamResponse, ErrorAloneHasNoResponse) {
  StatusOr<BufferChain> chain = ProtobufResponseEncoder().encodeStream(nullptr, "boom");
  ASSERT_TRUE(chain.ok());
  PbStream pb = parse<PbStream>(chain->flatten());
  EXPECT_EQ(pb.error_message(), "boom");
  EXPECT_FALSE(pb.has_infer_response());
  StatusOr<StreamInferResponse> decoded =
      ProtobufResponseDecoder().decodeStreamResponse(chain->flatten());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->error_message, "boom");
  EXPECT_FALSE(decoded->response.has_value());
}

TEST(ProtobufStreamResponse, EmptyResponseIsStillPresent) {
  InferResponse empty;
  StatusOr<BufferChain> chain = ProtobufResponseEncoder().encodeStream(&empty, "");
  ASSERT_TRUE(chain.ok());
  PbStream pb = parse<PbStream>(chain->flatten());
  EXPECT_TRUE(pb.has_infer_response());
  EXPECT_TRUE(pb.error_message().empty());
  StatusOr<StreamInferResponse> decoded =
      ProtobufResponseDecoder().decodeStreamResponse(chain->flatten());
  ASSERT_TRUE(decoded.ok());
  ASSERT_TRUE(decoded->response.has_value());
  EXPECT_EQ(*decoded->response, empty);
}

TEST(ProtobufStreamResponse, WrapsTheSameZeroCopyChain) {
  InferResponse response = richResponse();
  StatusOr<BufferChain> chain = ProtobufResponseEncoder().encodeStream(&response, "");
  ASSERT_TRUE(chain.ok());
  const Buffer& tensor = response.outputs[0].data;
  bool found = false;
  for (const Buffer& segment : chain->segments()) found |= segment.data() == tensor.data();
  EXPECT_TRUE(found);
  PbStream pb = parse<PbStream>(chain->flatten());
  expectSameResponse(pb.infer_response(), response);
  StatusOr<StreamInferResponse> decoded =
      ProtobufResponseDecoder().decodeStreamResponse(chain->flatten());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded->response, asDecoded(response));
}

TEST(ProtobufStreamResponse, DecodesGeneratedMessagesAndMergesRepeats) {
  PbStream first;
  first.set_error_message("first");
  first.mutable_infer_response()->set_id("a");
  addOutput(*first.mutable_infer_response(), "o1", "UINT8", {1});
  first.mutable_infer_response()->add_raw_output_contents("x");
  PbStream second;
  second.mutable_infer_response()->set_model_name("m");
  std::string bytes = first.SerializeAsString() + second.SerializeAsString();
  PbStream merged;
  ASSERT_TRUE(merged.ParseFromString(bytes));
  StatusOr<StreamInferResponse> decoded =
      ProtobufResponseDecoder().decodeStreamResponse(Buffer::fromString(bytes));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->error_message, merged.error_message());
  ASSERT_TRUE(decoded->response.has_value());
  EXPECT_EQ(decoded->response->id, merged.infer_response().id());
  EXPECT_EQ(decoded->response->model_name, merged.infer_response().model_name());
  ASSERT_EQ(decoded->response->outputs.size(), 1u);
  EXPECT_EQ(decoded->response->outputs[0].data.view(), "x");
}

TEST(ProtobufStreamResponse, EmptyPayloadAndJunk) {
  StatusOr<StreamInferResponse> empty = ProtobufResponseDecoder().decodeStreamResponse(Buffer());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->error_message.empty());
  EXPECT_FALSE(empty->response.has_value());
  StatusOr<StreamInferResponse> junk =
      ProtobufResponseDecoder().decodeStreamResponse(Buffer::fromString(std::string("\x0a\x02"
                                                                                    "ok"
                                                                                    "\x00",
                                                                                    5)));
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace infergate::codecs
