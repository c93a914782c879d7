#include "codecs/protobuf_peek.h"

#include <gtest/gtest.h>

#include <string>

#include "codecs/protobuf_request_decoder.h"
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
