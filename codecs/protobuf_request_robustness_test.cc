// ProtobufRequestDecoder on invalid tensors, limits, many tensors, and incomplete,
// malformed, padded and mutated input.

#include "codecs/protobuf_request_test_util.h"

namespace infergate::codecs {
namespace {

// ---- invalid tensors ----------------------------------------------------------------

TEST(ProtobufRequestDecoder, RejectsUnknownDatatype) {
  for (const char* type : {"FLOAT32", "fp32", "STRING", ""}) {
    PbRequest pb;
    addInput(pb, "x", type, {1});
    pb.add_raw_input_contents("abcd");
    expectError(decode(pb), absl::StatusCode::kInvalidArgument, "datatype");
  }
}

// Protobuf requires a string field to hold UTF-8; the gateway refuses one that does not
// rather than pass on (or echo back) bytes a client's parser then chokes on.
TEST(ProtobufRequestDecoder, RejectsStringsThatAreNotUtf8) {
  const std::string bad = "ab\xff" "cd";
  {
    PbRequest pb;
    pb.set_model_name(bad);
    expectError(decode(pb), absl::StatusCode::kInvalidArgument,
                "the model name is not valid UTF-8");
  }
  {
    PbRequest pb;
    pb.set_id(bad);
    expectError(decode(pb), absl::StatusCode::kInvalidArgument, "the request id is not valid UTF-8");
  }
  {
    PbRequest pb;
    addInput(pb, bad, "UINT8", {1});
    pb.add_raw_input_contents("a");
    expectError(decode(pb), absl::StatusCode::kInvalidArgument, "an input name is not valid UTF-8");
  }
  {
    PbRequest pb;
    (*pb.mutable_parameters())["p"].set_string_param(bad);
    expectError(decode(pb), absl::StatusCode::kInvalidArgument,
                "a string_param is not valid UTF-8");
  }
  {
    PbRequest pb;  // and well-formed multi-byte text passes
    pb.set_model_name("mod\xC3\xA8le");
    (*pb.mutable_parameters())["p"].set_string_param("\xE2\x82\xAC");
    StatusOr<InferRequest> r = decode(pb);
    ASSERT_TRUE(r.ok()) << r.status();
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

TEST(ProtobufRequestDecoder, RefusesShapesPastTheRankAndElementLimits) {
  DecodeLimits limits;
  limits.max_rank = 3;
  limits.max_elements = 1000;
  PbRequest at_limit;
  addInput(at_limit, "x", "UINT8", {10, 10, 10});
  at_limit.add_raw_input_contents(std::string(1000, 'a'));
  EXPECT_TRUE(decode(at_limit, limits).ok());
  PbRequest rank;
  addInput(rank, "x", "UINT8", {1, 1, 1, 1});
  rank.add_raw_input_contents("a");
  expectError(decode(rank, limits), absl::StatusCode::kResourceExhausted,
              "tensor 'x' has 4 dimensions, more than the limit of 3");
  PbRequest elements;
  addInput(elements, "x", "UINT8", {1001});
  elements.add_raw_input_contents(std::string(1001, 'a'));
  expectError(decode(elements, limits), absl::StatusCode::kResourceExhausted,
              "tensor 'x' of shape [1001] has 1001 elements, more than the limit of 1000");
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
