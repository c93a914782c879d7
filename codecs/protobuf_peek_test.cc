#include "codecs/protobuf_peek.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_wire.h"
#include "codecs/sequence_peek.h"
#include "grpc_service.pb.h"

namespace infergate::codecs {
namespace {

std::span<const uint8_t> spanOf(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

inference::ModelInferRequest sampleRequest() {
  inference::ModelInferRequest request;
  request.set_model_name("resnet50");
  request.set_model_version("3");
  request.set_id("req-1");
  (*request.mutable_parameters())["priority"].set_uint64_param(1);
  auto* input = request.add_inputs();
  input->set_name("INPUT0");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(4);
  request.add_outputs()->set_name("OUTPUT0");
  request.add_raw_input_contents(std::string(16, '\x01'));
  return request;
}

TEST(ProtobufPeek, ReadsModelNameAndVersion) {
  std::string bytes = sampleRequest().SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->model_name, "resnet50");
  EXPECT_EQ(ref->model_version, "3");
}

TEST(ProtobufPeek, RefusesAModelNameThatIsNotUtf8) {
  auto request = sampleRequest();
  request.set_model_name("resnet\xff");
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_FALSE(ref.ok());
  EXPECT_EQ(ref.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(messageOf(ref.status()).find("the model name is not valid UTF-8"), std::string_view::npos);
}

TEST(ProtobufPeek, ViewsPointIntoTheMessage) {
  std::string bytes = sampleRequest().SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_GE(ref->model_name.data(), bytes.data());
  EXPECT_LE(ref->model_name.data() + ref->model_name.size(), bytes.data() + bytes.size());
}

TEST(ProtobufPeek, FindsModelNameAfterRawContents) {
  // Serialized messages concatenate into one (protobuf merge): raw contents come first.
  inference::ModelInferRequest first;
  first.add_raw_input_contents(std::string(1000, 'r'));
  inference::ModelInferRequest second;
  second.set_model_name("late");
  second.set_model_version("7");
  std::string bytes = first.SerializeAsString() + second.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->model_name, "late");
  EXPECT_EQ(ref->model_version, "7");
}

TEST(ProtobufPeek, LastOccurrenceWinsAsInProtobuf) {
  inference::ModelInferRequest a = sampleRequest();
  inference::ModelInferRequest b;
  b.set_model_name("second");
  std::string bytes = a.SerializeAsString() + b.SerializeAsString();
  inference::ModelInferRequest merged;
  ASSERT_TRUE(merged.ParseFromString(bytes));
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->model_name, merged.model_name());
  EXPECT_EQ(ref->model_version, merged.model_version());
}

TEST(ProtobufPeek, AgreesWithFullDecode) {
  inference::ModelInferRequest no_version = sampleRequest();
  no_version.clear_model_version();
  for (const inference::ModelInferRequest& request : {sampleRequest(), no_version}) {
    Buffer message = Buffer::fromString(request.SerializeAsString());
    StatusOr<ModelRef> ref = peekModelInferRequest(message.span());
    StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(message);
    ASSERT_TRUE(ref.ok());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(ref->model_name, decoded->model_name);
    EXPECT_EQ(ref->model_version, decoded->model_version);
  }
}

TEST(ProtobufPeek, EmptyPayloadHasEmptyNames) {
  StatusOr<ModelRef> ref = peekModelInferRequest(std::span<const uint8_t>());
  ASSERT_TRUE(ref.ok());
  EXPECT_TRUE(ref->model_name.empty());
  EXPECT_TRUE(ref->model_version.empty());
}

TEST(ProtobufPeek, TruncatedAtEveryByteNeverCrashes) {
  std::string bytes = sampleRequest().SerializeAsString();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string prefix = bytes.substr(0, n);
    StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(prefix));
    if (!ref.ok()) {
      EXPECT_EQ(ref.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(ProtobufPeek, RejectsMalformedMessages) {
  std::string bytes = sampleRequest().SerializeAsString();
  const std::string bad[] = {
      bytes + std::string("\x00", 1),  // trailing junk: field number 0
      bytes + "\xff",                  // trailing junk: truncated varint
      std::string("\x0a\x05"
                  "abc"),                                      // model_name length past the end
      std::string("\x3a") + std::string(10, '\xff') + "\x01",  // 11-byte length varint
  };
  for (const std::string& message : bad) {
    EXPECT_EQ(peekModelInferRequest(spanOf(message)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(ProtobufPeek, SkipsManyTensors) {
  inference::ModelInferRequest request;
  for (int i = 0; i < 1000; ++i) {
    auto* input = request.add_inputs();
    input->set_name("in" + std::to_string(i));
    input->set_datatype("UINT8");
    input->add_shape(3);
    request.add_raw_input_contents("abc");
  }
  request.set_model_name("many");
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->model_name, "many");
}

}  // namespace
}  // namespace infergate::codecs

namespace infergate::codecs {
namespace {

// The message cut into segments at the given offsets.
std::vector<std::span<const uint8_t>> cut(const std::string& bytes, std::vector<size_t> at) {
  std::vector<std::span<const uint8_t>> segments;
  size_t from = 0;
  at.push_back(bytes.size());
  for (size_t to : at) {
    segments.push_back({reinterpret_cast<const uint8_t*>(bytes.data()) + from, to - from});
    from = to;
  }
  return segments;
}

TEST(ProtobufSegmentedPeek, AgreesWithTheContiguousPeekAtEverySplit) {
  inference::ModelInferRequest request;
  request.add_raw_input_contents(std::string(300, 'x'));  // a 2-byte length before the names
  request.set_model_name("a-model-name-long-enough-to-straddle");
  request.set_model_version("12");
  request.set_id("id");
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> whole = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(whole.ok());
  for (size_t i = 0; i <= bytes.size(); ++i) {
    for (size_t j : {i, std::min(i + 1, bytes.size()), std::min(i + 7, bytes.size())}) {
      auto segments = cut(bytes, {i, j});  // includes empty segments
      StatusOr<OwnedModelRef> ref = peekModelInferRequest(std::span(segments));
      ASSERT_TRUE(ref.ok()) << "split at " << i << "," << j << ": " << ref.status();
      EXPECT_EQ(ref->model_name, whole->model_name);
      EXPECT_EQ(ref->model_version, whole->model_version);
    }
  }
}

TEST(ProtobufSegmentedPeek, RefusesTruncatedAndMalformedMessages) {
  std::string bytes = sampleRequest().SerializeAsString();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string prefix = bytes.substr(0, n);
    auto segments = cut(prefix, {n / 2});
    StatusOr<OwnedModelRef> ref = peekModelInferRequest(std::span(segments));
    // A prefix ending on a field boundary is a valid (shorter) message.
    EXPECT_EQ(ref.ok(), peekModelInferRequest(spanOf(prefix)).ok()) << "prefix " << n;
  }
  std::string group = std::string("\x0b", 1) + "\x0c";  // field 1 as a (proto2) group
  auto segments = cut(group, {1});
  EXPECT_EQ(peekModelInferRequest(std::span(segments)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace infergate::codecs

// ---- the sequence parameters ---------------------------------------------------------

namespace infergate::codecs {
namespace {

// What a failing expectation prints: the key and the flags.
std::string describe(const SequenceRef& ref) {
  std::string out = ref.present() ? ref.key() : "none";
  if (ref.start) out += " start";
  if (ref.end) out += " end";
  return out;
}

// The sequence of a fully decoded message, by the rules of sequence_peek.h, written
// against the generated types as an independent oracle.
SequenceRef oracle(const inference::ModelInferRequest& request) {
  SequenceRef want;
  const auto& params = request.parameters();
  if (auto it = params.find("sequence_id"); it != params.end()) {
    const inference::InferParameter& id = it->second;
    if (id.parameter_choice_case() == inference::InferParameter::kInt64Param &&
        id.int64_param() != 0) {
      want.kind = SequenceRef::Kind::kInt;
      want.int_id = static_cast<uint64_t>(id.int64_param());
    } else if (id.parameter_choice_case() == inference::InferParameter::kUint64Param &&
               id.uint64_param() != 0) {
      want.kind = SequenceRef::Kind::kInt;
      want.int_id = id.uint64_param();
    } else if (id.parameter_choice_case() == inference::InferParameter::kStringParam &&
               !id.string_param().empty()) {
      want.kind = SequenceRef::Kind::kString;
      want.string_id = id.string_param();
    }
  }
  auto flag = [&](const char* key) {
    auto it = params.find(key);
    return it != params.end() &&
           it->second.parameter_choice_case() == inference::InferParameter::kBoolParam &&
           it->second.bool_param();
  };
  want.start = flag("sequence_start");
  want.end = flag("sequence_end");
  return want;
}

// Whether protobuf itself finds a tensor parameter keyed shared_memory_region: the
// oracle of the peek's shared_memory flag.
bool sharedMemoryOracle(const inference::ModelInferRequest& request) {
  for (const auto& input : request.inputs()) {
    if (input.parameters().contains("shared_memory_region")) return true;
  }
  for (const auto& output : request.outputs()) {
    if (output.parameters().contains("shared_memory_region")) return true;
  }
  return false;
}

// Both peeks, the segmented one cut at `cuts`, must equal the full decode's sequence and
// shared-memory flag.
void expectPeeksAgree(const std::string& bytes, std::vector<size_t> cuts = {}) {
  inference::ModelInferRequest full;
  ASSERT_TRUE(full.ParseFromString(bytes)) << "the test built an invalid message";
  SequenceRef want = oracle(full);
  bool want_shm = sharedMemoryOracle(full);
  StatusOr<ModelRef> whole = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(describe(whole->sequence), describe(want));
  EXPECT_EQ(whole->sequence, want);
  EXPECT_EQ(whole->model_name, full.model_name());
  EXPECT_EQ(whole->shared_memory, want_shm);
  auto segments = cut(bytes, std::move(cuts));
  StatusOr<OwnedModelRef> owned = peekModelInferRequest(std::span(segments));
  ASSERT_TRUE(owned.ok()) << owned.status();
  EXPECT_EQ(owned->sequence, want) << describe(owned->sequence) << " vs " << describe(want);
  EXPECT_EQ(owned->model_name, full.model_name());
  EXPECT_EQ(owned->shared_memory, want_shm);
}

// Hand-made wire pieces, for what the generated types never write.
std::string lenField(uint32_t number, std::string_view body) {
  std::string out;
  WireWriter(out).bytesField(number, body);
  return out;
}
std::string varintField(uint32_t number, uint64_t value) {
  std::string out;
  WireWriter(out).varintField(number, value);
  return out;
}
std::string entry(std::string_view body) { return lenField(4, body); }
std::string key(std::string_view k) { return lenField(1, k); }
std::string value(std::string_view infer_parameter) { return lenField(2, infer_parameter); }
std::string int64Member(int64_t v) { return varintField(2, static_cast<uint64_t>(v)); }
std::string boolMember(uint64_t v) { return varintField(1, v); }
std::string stringMember(std::string_view s) { return lenField(3, s); }

TEST(ProtobufPeekSequence, ReadsIdAndFlags) {
  inference::ModelInferRequest request = sampleRequest();
  auto& params = *request.mutable_parameters();
  params["sequence_id"].set_int64_param(1234);
  params["sequence_start"].set_bool_param(true);
  params["sequence_end"].set_bool_param(false);
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->sequence.kind, SequenceRef::Kind::kInt);
  EXPECT_EQ(ref->sequence.int_id, 1234u);
  EXPECT_TRUE(ref->sequence.start);
  EXPECT_FALSE(ref->sequence.end);
  EXPECT_EQ(ref->model_name, "resnet50");
  expectPeeksAgree(bytes);
}

TEST(ProtobufPeekSequence, ReadsStringId) {
  inference::ModelInferRequest request = sampleRequest();
  (*request.mutable_parameters())["sequence_id"].set_string_param("corr-7");
  (*request.mutable_parameters())["sequence_end"].set_bool_param(true);
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->sequence.key(), "s:corr-7");
  EXPECT_TRUE(ref->sequence.end);
}

TEST(ProtobufPeekSequence, NoParametersIsNoSequence) {
  std::string bytes = sampleRequest().SerializeAsString();  // only "priority"
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->sequence, SequenceRef{});
  ref = peekModelInferRequest(std::span<const uint8_t>());
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->sequence, SequenceRef{});
}

TEST(ProtobufPeekSequence, NegativeAndUint64IdsAreTheirBits) {
  // Triton's gRPC frontend hands int64_param to SetCorrelationId(uint64_t): -1 is a live
  // sequence there, the one an HTTP client names 18446744073709551615.
  inference::ModelInferRequest request;
  (*request.mutable_parameters())["sequence_id"].set_int64_param(-1);
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->sequence.key(), "i:18446744073709551615");
  expectPeeksAgree(bytes);
  (*request.mutable_parameters())["sequence_id"].set_uint64_param(77);
  bytes = request.SerializeAsString();
  ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->sequence.key(), "i:77");
}

TEST(ProtobufPeekSequence, OtherKindsZeroAndEmptyAreNoSequence) {
  std::vector<inference::InferParameter> ids(6);
  ids[0].set_int64_param(0);
  ids[1].set_string_param("");
  ids[2].set_bool_param(true);
  ids[3].set_double_param(5.0);
  ids[4].set_uint64_param(0);
  // ids[5]: no member set
  for (const inference::InferParameter& id : ids) {
    inference::ModelInferRequest request;
    (*request.mutable_parameters())["sequence_id"] = id;
    std::string bytes = request.SerializeAsString();
    StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
    ASSERT_TRUE(ref.ok());
    EXPECT_FALSE(ref->sequence.present()) << id.DebugString();
  }
}

TEST(ProtobufPeekSequence, FlagsAreTrueOnlyForBoolParamTrue) {
  inference::ModelInferRequest request;
  auto& params = *request.mutable_parameters();
  params["sequence_start"].set_int64_param(1);
  params["sequence_end"].set_string_param("true");
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_FALSE(ref->sequence.start);
  EXPECT_FALSE(ref->sequence.end);
  // Any non-zero varint is a true bool, as protobuf reads it.
  bytes = entry(key("sequence_start") + value(boolMember(2)));
  ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_TRUE(ref->sequence.start);
  expectPeeksAgree(bytes);
}

TEST(ProtobufPeekSequence, FollowsProtobufMergeRulesOnHandMadeEntries) {
  const std::string name = lenField(1, "m");
  const std::string id = "sequence_id";
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"value before key", entry(value(int64Member(7)) + key(id))},
      {"last key field wins", entry(key("priority") + value(int64Member(7)) + key(id))},
      {"key replaced by another", entry(key(id) + value(int64Member(7)) + key("priority"))},
      {"value fields merge, last member wins",
       entry(key(id) + value(int64Member(7)) + value(stringMember("x")))},
      {"merged bool member clears the id",
       entry(key(id) + value(stringMember("x")) + value(boolMember(1)))},
      {"an empty value merges as nothing", entry(key(id) + value(int64Member(7)) + value(""))},
      {"members repeated inside one value",
       entry(key(id) + value(int64Member(7) + int64Member(9)))},
      {"a later entry replaces, not merges",
       entry(key(id) + value(int64Member(7))) + entry(key(id) + value(""))},
      {"a later entry without a value clears",
       entry(key(id) + value(int64Member(7))) + entry(key(id))},
      {"last entry wins",
       entry(key(id) + value(stringMember("a"))) + name + entry(key(id) + value(int64Member(3)))},
      {"a varint key is unknown",
       varintField(4, 1) + entry(varintField(1, 5) + value(int64Member(7)))},
      {"a member of another wire type is unknown", entry(key(id) + value(lenField(2, "abc")))},
      {"unknown fields in entry and value",
       entry(varintField(3, 1) + key(id) + lenField(9, "zz") +
             value(varintField(15, 4) + int64Member(5) + std::string("\x35\x01\x02\x03\x04", 5)))},
      {"a group in an entry",
       entry(std::string("\x2b\x08\x01\x2c", 4) + key(id) + value(int64Member(8)))},
      {"ten-byte negative",
       entry(key(id) + value(int64Member(std::numeric_limits<int64_t>::min())))},
      {"double member", entry(key(id) + value(std::string("\x21", 1) + std::string(8, '\x40')))},
      {"flags replaced", entry(key("sequence_start") + value(boolMember(1))) +
                             entry(key("sequence_end") + value(boolMember(1))) +
                             entry(key("sequence_start") + value(boolMember(0)))},
      {"empty entry", entry("")},
      {"key with similar names", entry(key("sequence_id ") + value(int64Member(1))) +
                                     entry(key("sequence_i") + value(int64Member(1))) +
                                     entry(key("") + value(int64Member(1)))},
  };
  for (const auto& [what, params] : cases) {
    SCOPED_TRACE(what);
    std::string bytes = name + params;
    expectPeeksAgree(bytes);
    for (size_t i = 0; i <= bytes.size(); ++i) expectPeeksAgree(bytes, {i});
  }
}

TEST(ProtobufPeekSequence, RejectsMalformedEntries) {
  const std::string id = "sequence_id";
  const std::string bad[] = {
      entry(std::string("\x0a\x05", 2) + "ab"),                   // key longer than its entry
      entry(key(id) + value(std::string("\x10\xff", 2))),         // truncated varint in the value
      entry(key(id) + std::string("\x0f", 1)),                    // wire type 7 in the entry
      entry(key(id) + value(std::string("\x1a\x09", 2) + "ab")),  // string past the value's end
      entry(std::string("\x00", 1)),                              // field number 0 in the entry
  };
  for (const std::string& params : bad) {
    std::string bytes = lenField(1, "m") + params;
    inference::ModelInferRequest full;
    EXPECT_FALSE(full.ParseFromString(bytes));  // protobuf refuses them too
    EXPECT_EQ(peekModelInferRequest(spanOf(bytes)).status().code(),
              absl::StatusCode::kInvalidArgument);
    for (size_t i = 0; i <= bytes.size(); ++i) {
      auto segments = cut(bytes, {i});
      EXPECT_EQ(peekModelInferRequest(std::span(segments)).status().code(),
                absl::StatusCode::kInvalidArgument)
          << "split at " << i;
    }
  }
}

TEST(ProtobufPeekSequence, LeavesValuesOfOtherKeysUnchecked) {
  // Only the three keys' values are decoded; a broken value elsewhere is the upstream's
  // to refuse, as are broken tensors.
  std::string bytes = entry(key("priority") + value(std::string("\x10\xff", 2))) +
                      entry(key("sequence_id") + value(int64Member(4)));
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->sequence.key(), "i:4");
}

TEST(ProtobufSegmentedPeek, RefusesVarintsPastSixtyFourBitsAsTheContiguousPeekDoes) {
  std::string bytes = std::string("\x18", 1) + std::string(9, '\xff') + "\x02";  // field 3
  EXPECT_EQ(peekModelInferRequest(spanOf(bytes)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto segments = cut(bytes, {5});
  EXPECT_EQ(peekModelInferRequest(std::span(segments)).status().code(),
            absl::StatusCode::kInvalidArgument);
  bytes.back() = '\x01';  // bit 63 alone is fine
  EXPECT_TRUE(peekModelInferRequest(spanOf(bytes)).ok());
  segments = cut(bytes, {5});
  EXPECT_TRUE(peekModelInferRequest(std::span(segments)).ok());
}

TEST(ProtobufSegmentedPeek, ReadsParametersStraddlingSegmentsAtEverySplit) {
  inference::ModelInferRequest request;
  request.add_raw_input_contents(std::string(300, 'x'));
  request.set_model_name("straddling-model");
  auto& params = *request.mutable_parameters();
  params["sequence_id"].set_string_param(std::string(200, 's') + "-id");  // 2-byte lengths
  params["sequence_start"].set_bool_param(true);
  params["sequence_end"].set_bool_param(true);
  params["custom"].set_string_param(std::string(150, 'c'));
  std::string bytes = request.SerializeAsString();
  for (size_t i = 0; i <= bytes.size(); ++i) {
    for (size_t j : {i, std::min(i + 1, bytes.size()), std::min(i + 13, bytes.size())}) {
      expectPeeksAgree(bytes, {i, j});
    }
  }
}

// ---- property: generated requests ----------------------------------------------------

inference::InferParameter generateParameter(std::mt19937_64& rng) {
  inference::InferParameter p;
  switch (rng() % 12) {
    case 0:
      break;  // no member set
    case 1:
      p.set_bool_param(rng() % 2);
      break;
    case 2:
      p.set_int64_param(0);
      break;
    case 3:
      p.set_int64_param(static_cast<int64_t>(rng() % 1000));
      break;
    case 4:
      p.set_int64_param(static_cast<int64_t>(rng()));  // often negative
      break;
    case 5:
      p.set_string_param("");
      break;
    case 6:
      p.set_string_param(std::to_string(rng() % 1000));
      break;
    case 7:
      p.set_string_param(std::string(rng() % 400, static_cast<char>('a' + rng() % 26)));
      break;
    case 8:
      p.set_double_param(static_cast<double>(rng() % 100) / 4);
      break;
    case 9:
      p.set_uint64_param(rng() % 2 ? 0 : rng());
      break;
    default:
      p.set_bool_param(true);
      break;
  }
  return p;
}

const char* const kParameterKeys[] = {"sequence_id",  "sequence_start", "sequence_end",
                                      "priority",     "timeout",        "sequence_ids",
                                      "custom_param", "sequence_id_"};

inference::ModelInferRequest generateRequest(std::mt19937_64& rng) {
  inference::ModelInferRequest request;
  if (rng() % 2) request.set_model_name("model-" + std::to_string(rng() % 100));
  if (rng() % 3 == 0) request.set_model_version(std::to_string(rng() % 5));
  if (rng() % 2) request.set_id("req");
  int count = static_cast<int>(rng() % 6);
  for (int i = 0; i < count; ++i) {
    (*request.mutable_parameters())[kParameterKeys[rng() % std::size(kParameterKeys)]] =
        generateParameter(rng);
  }
  int inputs = static_cast<int>(rng() % 3);
  for (int i = 0; i < inputs; ++i) {
    auto* input = request.add_inputs();
    input->set_name("in" + std::to_string(i));
    input->set_datatype("UINT8");
    size_t n = rng() % 200;
    input->add_shape(static_cast<int64_t>(n));
    (*input->mutable_parameters())["sequence_id"].set_int64_param(99);  // not the request's
    request.add_raw_input_contents(std::string(n, static_cast<char>(rng())));
  }
  return request;
}

TEST(ProtobufPeekSequence, AgreesWithFullDecodeOnGeneratedRequests) {
  std::mt19937_64 rng(20240611);
  int decoded_ok = 0;
  for (int round = 0; round < 2000; ++round) {
    // One to three messages concatenated: protobuf merges them, so keys repeat.
    std::string bytes;
    int parts = 1 + static_cast<int>(rng() % 3);
    for (int p = 0; p < parts; ++p) bytes += generateRequest(rng).SerializeAsString();
    std::vector<size_t> cuts;
    for (size_t c = rng() % 5; c > 0; --c) cuts.push_back(rng() % (bytes.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    SCOPED_TRACE("round " + std::to_string(round));
    expectPeeksAgree(bytes, cuts);

    // The full decoder (which refuses a value without a member) and sequenceOf agree too.
    Buffer message = Buffer::fromString(bytes);
    StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(message);
    StatusOr<ModelRef> ref = peekModelInferRequest(message.span());
    ASSERT_TRUE(ref.ok());
    if (decoded.ok()) {
      ++decoded_ok;
      EXPECT_EQ(sequenceOf(decoded->parameters), ref->sequence);
    }
  }
  EXPECT_GT(decoded_ok, 200);  // the comparison with the decoder is not vacuous
}

}  // namespace
}  // namespace infergate::codecs

// ---- the shared-memory flag ----------------------------------------------------------

namespace infergate::codecs {
namespace {

// Hand-made tensors: an input (InferInputTensor) and a requested output, whose
// parameters are field 4 and field 2.
std::string inputTensor(std::string_view name, std::string_view fields) {
  return lenField(5, lenField(1, name) + lenField(2, "UINT8") + varintField(3, 4) +
                         std::string(fields));
}
std::string outputTensor(std::string_view name, std::string_view fields) {
  return lenField(6, lenField(1, name) + std::string(fields));
}
std::string inputEntry(std::string_view body) { return lenField(4, body); }
std::string outputEntry(std::string_view body) { return lenField(2, body); }

void addShm(google::protobuf::Map<std::string, inference::InferParameter>& params,
            const std::string& region) {
  params["shared_memory_region"].set_string_param(region);
  params["shared_memory_offset"].set_int64_param(0);
  params["shared_memory_byte_size"].set_int64_param(16);
}

// The flag's other oracle: the gateway's own full decoder. Where it decodes the message,
// the flag is exactly "some input or output got shared_memory".
void expectFlagMatchesDecoder(const std::string& bytes, bool want) {
  Buffer message = Buffer::fromString(bytes);
  StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(message);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  bool any = false;
  for (const InferInput& input : decoded->inputs) any = any || input.shared_memory.has_value();
  for (const RequestedOutput& output : decoded->outputs) {
    any = any || output.shared_memory.has_value();
  }
  EXPECT_EQ(any, want);
  StatusOr<ModelRef> ref = peekModelInferRequest(message.span());
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->shared_memory, want);
}

TEST(ProtobufPeekSharedMemory, FalseWithoutSharedMemory) {
  std::string bytes = sampleRequest().SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok());
  EXPECT_FALSE(ref->shared_memory);
  expectPeeksAgree(bytes);
  expectFlagMatchesDecoder(bytes, false);
  ref = peekModelInferRequest(std::span<const uint8_t>());
  ASSERT_TRUE(ref.ok());
  EXPECT_FALSE(ref->shared_memory);
}

TEST(ProtobufPeekSharedMemory, TrueForAnInputWithTheKey) {
  inference::ModelInferRequest request;
  request.set_model_name("m");
  auto* shm = request.add_inputs();
  shm->set_name("IN_SHM");
  shm->set_datatype("FP32");
  shm->add_shape(4);
  addShm(*shm->mutable_parameters(), "input_region");
  auto* plain = request.add_inputs();  // the other input carries its data inline
  plain->set_name("IN");
  plain->set_datatype("UINT8");
  plain->add_shape(3);
  request.add_raw_input_contents("abc");
  request.add_outputs()->set_name("OUT");
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(ref->shared_memory);
  EXPECT_EQ(ref->model_name, "m");
  expectPeeksAgree(bytes);
  expectFlagMatchesDecoder(bytes, true);
}

TEST(ProtobufPeekSharedMemory, TrueForAnOutputWithTheKey) {
  inference::ModelInferRequest request = sampleRequest();
  auto* output = request.add_outputs();
  output->set_name("OUT_SHM");
  (*output->mutable_parameters())["binary_data"].set_bool_param(false);
  addShm(*output->mutable_parameters(), "output_region");
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(ref->shared_memory);
  expectPeeksAgree(bytes);
  expectFlagMatchesDecoder(bytes, true);
}

TEST(ProtobufPeekSharedMemory, OnlyTheExactKeyCounts) {
  const std::vector<std::pair<std::string, bool>> keys = {
      {"shared_memory_regionX", false}, {"shared_memory_regio", false},
      {"Shared_memory_region", false},  {"shared_memory_region ", false},
      {"", false},                      {"shared_memory_region", true},
  };
  for (const auto& [k, want] : keys) {
    SCOPED_TRACE(k);
    inference::ModelInferRequest request = sampleRequest();
    auto& in = *request.mutable_inputs(0)->mutable_parameters();
    in[k].set_string_param("region");
    in["shared_memory_byte_size"].set_int64_param(16);
    auto& out = *request.mutable_outputs(0)->mutable_parameters();
    out[k].set_string_param("region");
    out["shared_memory_byte_size"].set_int64_param(16);
    if (want) request.clear_raw_input_contents();  // the input's data is in the region
    std::string bytes = request.SerializeAsString();
    StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(ref->shared_memory, want);
    expectPeeksAgree(bytes);
    if (want) expectFlagMatchesDecoder(bytes, true);  // the others lack a region: refused
  }
}

TEST(ProtobufPeekSharedMemory, ByteSizeOrOffsetAloneIsFalse) {
  // The decoder refuses these (no region); the flag only says whether a region is named.
  for (const char* k : {"shared_memory_byte_size", "shared_memory_offset"}) {
    inference::ModelInferRequest request = sampleRequest();
    (*request.mutable_inputs(0)->mutable_parameters())[k].set_int64_param(16);
    (*request.mutable_outputs(0)->mutable_parameters())[k].set_int64_param(16);
    std::string bytes = request.SerializeAsString();
    StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_FALSE(ref->shared_memory) << k;
    expectPeeksAgree(bytes);
  }
}

TEST(ProtobufPeekSharedMemory, FalseWhenTheKeyIsOnlyInBytesOrValues) {
  // Everything here holds the text "shared_memory_region", and even a whole serialized
  // shm input, but never as a tensor parameter's key. Raw and typed data in two messages:
  // the decoder refuses them mixed.
  inference::ModelInferRequest shm_input;
  addShm(*shm_input.add_inputs()->mutable_parameters(), "r");
  const std::string lookalike = shm_input.SerializeAsString() + "shared_memory_region";

  inference::ModelInferRequest raw;
  raw.set_model_name("shared_memory_region");
  raw.set_id("shared_memory_region");
  (*raw.mutable_parameters())["shared_memory_region"].set_string_param("r");  // request-level
  auto* input = raw.add_inputs();
  input->set_name("shared_memory_region");
  input->set_datatype("UINT8");
  input->add_shape(static_cast<int64_t>(lookalike.size()));
  (*input->mutable_parameters())["note"].set_string_param("shared_memory_region");
  raw.add_raw_input_contents(lookalike);
  auto* output = raw.add_outputs();
  output->set_name("shared_memory_region");
  (*output->mutable_parameters())["binary_data"].set_bool_param(true);

  inference::ModelInferRequest typed;
  auto* contents = typed.add_inputs();
  contents->set_name("typed");
  contents->set_datatype("BYTES");
  contents->add_shape(2);
  contents->mutable_contents()->add_bytes_contents(lookalike);
  contents->mutable_contents()->add_bytes_contents("shared_memory_region");
  (*typed.add_outputs()->mutable_parameters())["x"].set_string_param("shared_memory_region");

  for (const inference::ModelInferRequest& request : {raw, typed}) {
    std::string bytes = request.SerializeAsString();
    ASSERT_NE(bytes.find(lookalike), std::string::npos);
    StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_FALSE(ref->shared_memory);
    expectPeeksAgree(bytes);
    expectFlagMatchesDecoder(bytes, false);
  }
}

TEST(ProtobufPeekSharedMemory, AnOutputsParametersAreItsFieldTwo) {
  // InferRequestedOutputTensor.parameters is field 2 (field 4 is InferInputTensor's): an
  // entry written as an output's field 4 is an unknown field to protobuf and the decoder.
  const std::string shm_entry = key("shared_memory_region") + value(stringMember("r"));
  std::string bytes = outputTensor("OUT", inputEntry(shm_entry));
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_FALSE(ref->shared_memory);
  expectPeeksAgree(bytes);
  bytes = outputTensor("OUT", outputEntry(shm_entry));
  ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(ref->shared_memory);
  expectPeeksAgree(bytes);
}

TEST(ProtobufPeekSharedMemory, FollowsProtobufOnHandMadeTensors) {
  const std::string region = "shared_memory_region";
  const std::string size = key("shared_memory_byte_size") + value(int64Member(16));
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"key after its value", inputTensor("a", inputEntry(value(stringMember("r")) + key(region)))},
      {"last key field wins (not shm)",
       inputTensor("a", inputEntry(key(region) + value(stringMember("r")) + key("other")))},
      {"last key field wins (shm)",
       outputTensor("o", outputEntry(key("other") + value(stringMember("r")) + key(region)))},
      {"a varint key is unknown", inputTensor("a", inputEntry(varintField(1, 7)))},
      {"an entry without a value still names the key", inputTensor("a", inputEntry(key(region)))},
      {"a later entry of another key does not clear it",
       outputTensor("o", outputEntry(key(region) + value(stringMember("r"))) +
                             outputEntry(key("x") + value(stringMember("y"))))},
      {"the parameters field as a varint is unknown", inputTensor("a", varintField(4, 1))},
      {"unknown fields in the tensor and the entry",
       outputTensor("o", varintField(9, 1) + std::string("\x1d\x01\x02\x03\x04", 5) +
                             outputEntry(varintField(5, 3) + key(region) + lenField(7, "zz")))},
      {"a group inside an entry", inputTensor("a", inputEntry(std::string("\x2b\x08\x01\x2c", 4) +
                                                              key(region)))},
      {"the key in the input's name and datatype fields",
       lenField(5, lenField(1, region) + lenField(2, region))},
      {"an input split in two elements (not merged)",
       inputTensor("a", "") + inputTensor("b", inputEntry(key(region) + value(stringMember("r"))))},
      {"shm on both", inputTensor("a", inputEntry(key(region) + value(stringMember("r"))) +
                                           inputEntry(size)) +
                          outputTensor("o", outputEntry(key(region) + value(stringMember("q"))))},
      {"empty tensors", lenField(5, "") + lenField(6, "")},
  };
  for (const auto& [what, tensors] : cases) {
    SCOPED_TRACE(what);
    std::string bytes = lenField(1, "m") + tensors;
    expectPeeksAgree(bytes);
    for (size_t i = 0; i <= bytes.size(); ++i) expectPeeksAgree(bytes, {i});
  }
}

TEST(ProtobufPeekSharedMemory, RejectsMalformedTensors) {
  const std::string bad[] = {
      lenField(5, std::string("\x0a\x05", 2) + "ab"),        // name longer than the input
      lenField(6, std::string("\x12\x09", 2) + "ab"),        // parameters past the output
      lenField(5, inputEntry(std::string("\x0a\x05", 2))),   // key longer than its entry
      lenField(6, outputEntry(std::string("\x00", 1))),      // field number 0 in the entry
      lenField(5, std::string("\x0f", 1)),                   // wire type 7 in the input
      lenField(6, std::string("\x10", 1)),                   // truncated varint in the output
      lenField(5, std::string("\x19\x01", 2)),               // fixed64 past the input's end
  };
  for (const std::string& tensor : bad) {
    std::string bytes = lenField(1, "m") + tensor + lenField(2, "1");
    inference::ModelInferRequest full;
    EXPECT_FALSE(full.ParseFromString(bytes));  // protobuf refuses them too
    EXPECT_EQ(peekModelInferRequest(spanOf(bytes)).status().code(),
              absl::StatusCode::kInvalidArgument);
    for (size_t i = 0; i <= bytes.size(); ++i) {
      auto segments = cut(bytes, {i});
      EXPECT_EQ(peekModelInferRequest(std::span(segments)).status().code(),
                absl::StatusCode::kInvalidArgument)
          << "split at " << i;
    }
  }
}

TEST(ProtobufPeekSharedMemory, TheSegmentedPeekRefusesGroupsInsideATensor) {
  // The contiguous peek skips a (proto2) group as protobuf does; the segmented one refuses
  // it, and its callers fall back to the contiguous one.
  std::string bytes = lenField(1, "m") +
                      inputTensor("a", std::string("\x3b\x08\x01\x3c", 4) +
                                           inputEntry(key("shared_memory_region")));
  StatusOr<ModelRef> ref = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(ref->shared_memory);
  auto segments = cut(bytes, {bytes.size() / 2});
  EXPECT_EQ(peekModelInferRequest(std::span(segments)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProtobufSegmentedPeek, FindsSharedMemoryOnAnOutputAtEverySplit) {
  inference::ModelInferRequest request;
  request.set_model_name("shm-model");
  auto* typed = request.add_inputs();  // typed contents: an input bigger than a segment
  typed->set_name("TYPED");
  typed->set_datatype("INT32");
  typed->add_shape(100);
  for (int i = 0; i < 100; ++i) typed->mutable_contents()->add_int_contents(1000 + i);
  (*typed->mutable_parameters())["note"].set_string_param(std::string(130, 'n'));
  request.add_outputs()->set_name("PLAIN");
  auto* output = request.add_outputs();
  output->set_name("OUT_SHM");
  (*output->mutable_parameters())["binary_data"].set_bool_param(true);
  addShm(*output->mutable_parameters(), std::string(140, 'r'));  // 2-byte entry lengths
  std::string bytes = request.SerializeAsString();
  StatusOr<ModelRef> whole = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(whole->shared_memory);
  expectFlagMatchesDecoder(bytes, true);
  for (size_t i = 0; i <= bytes.size(); ++i) {
    for (size_t j : {i, std::min(i + 1, bytes.size()), std::min(i + 9, bytes.size())}) {
      auto segments = cut(bytes, {i, j});
      StatusOr<OwnedModelRef> ref = peekModelInferRequest(std::span(segments));
      ASSERT_TRUE(ref.ok()) << "split at " << i << "," << j << ": " << ref.status();
      EXPECT_TRUE(ref->shared_memory) << "split at " << i << "," << j;
      EXPECT_EQ(ref->model_name, "shm-model");
    }
  }
  // Without the output's region the same cuts find nothing.
  output->mutable_parameters()->erase("shared_memory_region");
  bytes = request.SerializeAsString();
  for (size_t i = 0; i <= bytes.size(); ++i) {
    auto segments = cut(bytes, {i});
    StatusOr<OwnedModelRef> ref = peekModelInferRequest(std::span(segments));
    ASSERT_TRUE(ref.ok()) << "split at " << i << ": " << ref.status();
    EXPECT_FALSE(ref->shared_memory) << "split at " << i;
  }
}

// ---- property: generated tensors -----------------------------------------------------

const char* const kTensorKeys[] = {"shared_memory_region",    "shared_memory_offset",
                                   "shared_memory_byte_size", "shared_memory_regionX",
                                   "binary_data",             "classification"};

void addTensorParameters(google::protobuf::Map<std::string, inference::InferParameter>& params,
                         std::mt19937_64& rng) {
  if (rng() % 3 == 0) {  // a complete, valid region: the decoder accepts it
    addShm(params, "region-" + std::to_string(rng() % 10));
    return;
  }
  for (size_t n = rng() % 3; n > 0; --n) {
    params[kTensorKeys[rng() % std::size(kTensorKeys)]] = generateParameter(rng);
  }
}

TEST(ProtobufPeekSharedMemory, AgreesWithProtobufAndTheDecoderOnGeneratedRequests) {
  std::mt19937_64 rng(20250301);
  int decoded_ok = 0, decoded_shm = 0;
  for (int round = 0; round < 2000; ++round) {
    inference::ModelInferRequest request;
    request.set_model_name("m");
    for (int i = static_cast<int>(rng() % 3); i > 0; --i) {
      auto* input = request.add_inputs();
      input->set_name("in" + std::to_string(i));
      input->set_datatype("UINT8");
      size_t n = rng() % 100;
      input->add_shape(static_cast<int64_t>(n));
      if (rng() % 2) {
        addTensorParameters(*input->mutable_parameters(), rng);
      }
      if (!input->parameters().contains("shared_memory_region")) {
        request.add_raw_input_contents(std::string(n, 'x'));
      }
    }
    for (int i = static_cast<int>(rng() % 3); i > 0; --i) {
      auto* output = request.add_outputs();
      output->set_name("out" + std::to_string(i));
      if (rng() % 2) addTensorParameters(*output->mutable_parameters(), rng);
    }
    std::string bytes = request.SerializeAsString();
    std::vector<size_t> cuts;
    for (size_t c = rng() % 5; c > 0; --c) cuts.push_back(rng() % (bytes.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    SCOPED_TRACE("round " + std::to_string(round));
    expectPeeksAgree(bytes, cuts);

    Buffer message = Buffer::fromString(bytes);
    StatusOr<InferRequest> decoded = ProtobufRequestDecoder().decode(message);
    StatusOr<ModelRef> ref = peekModelInferRequest(message.span());
    ASSERT_TRUE(ref.ok());
    if (!decoded.ok()) continue;
    ++decoded_ok;
    bool any = false;
    for (const InferInput& input : decoded->inputs) any = any || input.shared_memory.has_value();
    for (const RequestedOutput& output : decoded->outputs) {
      any = any || output.shared_memory.has_value();
    }
    decoded_shm += any;
    EXPECT_EQ(ref->shared_memory, any);
  }
  // Neither side of the comparison with the decoder is vacuous.
  EXPECT_GT(decoded_ok, 300);
  EXPECT_GT(decoded_shm, 100);
  EXPECT_GT(decoded_ok - decoded_shm, 100);
}

}  // namespace
}  // namespace infergate::codecs
