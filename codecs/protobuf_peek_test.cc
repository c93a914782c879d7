#include "codecs/protobuf_peek.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codecs/protobuf_peek_test_util.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_wire.h"
#include "codecs/sequence_peek.h"
#include "grpc_service.pb.h"

namespace infergate::codecs {
namespace {

using namespace peek_test;  // NOLINT(google-build-using-namespace)



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

// ---- the head of a message still arriving ----

TEST(ModelInferHead, IsFoundOnceEveryFieldBeforeTheTensorsIsIn) {
  inference::ModelInferRequest request = sampleRequest();
  request.add_raw_input_contents(std::string(300, '\x02'));  // a length of two varint bytes
  const std::string bytes = request.SerializeAsString();
  inference::ModelInferRequest head_only = request;
  head_only.clear_raw_input_contents();
  const size_t head = head_only.ByteSizeLong();  // serialized in field order: 7 comes last
  ASSERT_LT(head, bytes.size());
  for (size_t n = 0; n <= bytes.size(); ++n) {
    ModelInferHead found = findModelInferHead(spanOf(bytes).first(n), bytes.size());
    if (n <= head) {
      // Up to the first byte of field 7's tag, the head cannot be told complete.
      EXPECT_EQ(found.state, ModelInferHead::State::kNeedMore) << "prefix " << n;
      continue;
    }
    ASSERT_EQ(found.state, ModelInferHead::State::kFound) << "prefix " << n;
    EXPECT_EQ(found.length, head) << "prefix " << n;
  }
  // What the head peeks to is what the whole message peeks to.
  StatusOr<ModelRef> from_head = peekModelInferRequest(spanOf(bytes).first(head));
  StatusOr<ModelRef> from_whole = peekModelInferRequest(spanOf(bytes));
  ASSERT_TRUE(from_head.ok() && from_whole.ok());
  EXPECT_EQ(from_head->model_name, from_whole->model_name);
  EXPECT_EQ(from_head->model_version, from_whole->model_version);
}

TEST(ModelInferHead, AWalkResumedWhereTheLastOneStoppedFindsTheSameHead) {
  inference::ModelInferRequest request = sampleRequest();
  request.add_raw_input_contents(std::string(300, '\x02'));
  const std::string bytes = request.SerializeAsString();
  const ModelInferHead whole = findModelInferHead(spanOf(bytes), bytes.size());
  ASSERT_EQ(whole.state, ModelInferHead::State::kFound);
  // The bytes in one at a time, each walk resuming at the last one's boundary: that never
  // goes back, and ends on the same head.
  size_t from = 0;
  for (size_t n = 0; n <= bytes.size(); ++n) {
    const ModelInferHead found = findModelInferHead(spanOf(bytes).first(n), bytes.size(), from);
    if (found.state == ModelInferHead::State::kFound) {
      EXPECT_EQ(found.length, whole.length) << "prefix " << n;
      EXPECT_EQ(n, whole.length + 1) << "found as soon as field 7's tag is in";
      return;
    }
    ASSERT_EQ(found.state, ModelInferHead::State::kNeedMore) << "prefix " << n;
    ASSERT_GE(found.length, from) << "prefix " << n;
    ASSERT_LE(found.length, n) << "prefix " << n;
    from = found.length;
  }
  ADD_FAILURE() << "the head was never found";
}

TEST(ModelInferHead, AMessageWithoutRawContentsHasNoneOnceWhole) {
  inference::ModelInferRequest request = sampleRequest();
  request.clear_raw_input_contents();
  request.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.5F);
  const std::string bytes = request.SerializeAsString();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(findModelInferHead(spanOf(bytes).first(n), bytes.size()).state, ModelInferHead::State::kNeedMore)
        << "prefix " << n;
  }
  EXPECT_EQ(findModelInferHead(spanOf(bytes), bytes.size()).state, ModelInferHead::State::kNone);
}

TEST(ModelInferHead, TensorsFirstGiveAnEmptyHead) {
  // As a merged message: raw contents, then the model's name. The head is empty, and only
  // the whole message names the model.
  inference::ModelInferRequest first;
  first.add_raw_input_contents(std::string(1000, 'r'));
  inference::ModelInferRequest second;
  second.set_model_name("late");
  const std::string bytes = first.SerializeAsString() + second.SerializeAsString();
  ModelInferHead found = findModelInferHead(spanOf(bytes).first(3), bytes.size());
  ASSERT_EQ(found.state, ModelInferHead::State::kFound);
  EXPECT_EQ(found.length, 0U);
}

TEST(ModelInferHead, MalformedWholeMessagesHaveNoneAndPrefixesWaitForMore) {
  const std::string bad[] = {
      std::string("\x00\x01", 2),                      // field number 0
      std::string("\x0a\x05" "abc"),                   // a length past the end
      std::string("\x0f\x01\x02", 3),                 // wire type 7
      std::string("\x0a\x01m") + std::string(11, '\xff'),  // a varint past ten bytes
  };
  for (const std::string& message : bad) {
    EXPECT_EQ(findModelInferHead(spanOf(message), message.size()).state, ModelInferHead::State::kNone)
        << "message of " << message.size() << " bytes";
    // The same bytes as the start of a longer message: only more of it would tell.
    EXPECT_EQ(findModelInferHead(spanOf(message), message.size() + 100).state, ModelInferHead::State::kNeedMore);
  }
}

TEST(ModelInferHead, NeverReadsPastThePrefixOrTheMessage) {
  const std::string bytes = sampleRequest().SerializeAsString();
  // A prefix longer than the message it is said to be: only the message's bytes count.
  const std::string longer = bytes + std::string("\x3a\x01z", 3);
  ModelInferHead found = findModelInferHead(spanOf(longer), bytes.size());
  ASSERT_EQ(found.state, ModelInferHead::State::kFound);
  EXPECT_LT(found.length, bytes.size());
  // Each prefix as its own allocation of exactly its size (ASan sees any overread).
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> exact(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    (void)findModelInferHead(std::span<const uint8_t>(exact.data(), exact.size()), bytes.size());
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

using namespace peek_test;  // NOLINT(google-build-using-namespace)


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

using namespace peek_test;  // NOLINT(google-build-using-namespace)






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
    const std::string bytes = lenField(1, "m") + params;
    expectEveryPeekRefuses(bytes);
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
    SCOPED_TRACE("round " + std::to_string(round));
    expectPeeksAgree(bytes, randomCuts(rng, bytes.size()));

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
