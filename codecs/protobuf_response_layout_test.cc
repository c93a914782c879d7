// scanResponseLayout and entryFramed, against messages serialized by protobuf's own
// generated classes (the layout a Triton server writes).

#include <gtest/gtest.h>

#include <string>

#include "codecs/protobuf_response_layout.h"
#include "grpc_service.pb.h"

namespace infergate::codecs {
namespace {

using Result = ResponseLayoutScan::Result;

void addOutput(inference::ModelInferResponse& r, const std::string& name, const std::string& datatype,
               std::initializer_list<int64_t> shape, size_t element_size) {
  auto* out = r.add_outputs();
  out->set_name(name);
  out->set_datatype(datatype);
  int64_t count = 1;
  for (int64_t d : shape) {
    out->add_shape(d);
    count *= d;
  }
  std::string bytes(static_cast<size_t>(count) * element_size, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + name.size());
  r.add_raw_output_contents(std::move(bytes));
}

// Two FP32 outputs (the second of 70,000 elements: a three-byte length varint), a
// zero-size INT8 one, parameters and an id in the head.
inference::ModelInferResponse sample() {
  inference::ModelInferResponse r;
  r.set_model_name("identity");
  r.set_model_version("1");
  r.set_id("req-7");
  (*r.mutable_parameters())["sequence_id"].set_int64_param(42);
  addOutput(r, "OUTPUT0", "FP32", {1, 16}, 4);
  addOutput(r, "OUTPUT1", "FP32", {2, 35000}, 4);
  addOutput(r, "EMPTY", "INT8", {0, 3}, 1);
  return r;
}

Buffer bytesOf(const std::string& s) { return Buffer::copyOf(s); }

ResponseLayoutScan scan(const std::string& message, size_t have) {
  return scanResponseLayout(bytesOf(message.substr(0, have)), message.size(), DecodeLimits());
}

TEST(ResponseLayout, EveryEntryWhereTheWholeDecodeFindsIt) {
  const std::string message = sample().SerializeAsString();
  ResponseLayoutScan s = scan(message, message.size());
  ASSERT_EQ(s.result, Result::kLaidOut);
  ASSERT_EQ(s.layout.entries.size(), 3u);
  EXPECT_EQ(s.layout.head.model_name, "identity");
  EXPECT_EQ(s.layout.head.id, "req-7");
  ASSERT_EQ(s.layout.head.outputs.size(), 3u);
  EXPECT_TRUE(s.layout.head.outputs[1].data.empty());

  inference::ModelInferResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(message));
  for (size_t i = 0; i < 3; ++i) {
    const ResponseLayout::Entry& e = s.layout.entries[i];
    EXPECT_EQ(e.length, parsed.raw_output_contents(static_cast<int>(i)).size()) << i;
    EXPECT_EQ(message.substr(e.data_at, e.length), parsed.raw_output_contents(static_cast<int>(i))) << i;
    EXPECT_TRUE(entryFramed(e, reinterpret_cast<const uint8_t*>(message.data()))) << i;
  }
  EXPECT_EQ(s.layout.entries[1].data_at - s.layout.entries[1].tag_at, 1u + 3u);  // tag + 3-byte varint
  EXPECT_EQ(s.layout.entries[2].length, 0u);
  EXPECT_EQ(s.layout.entries[2].data_at + s.layout.entries[2].length, message.size());
}

TEST(ResponseLayout, HeadNotAllInNeedsMore) {
  const std::string message = sample().SerializeAsString();
  const ResponseLayoutScan whole = scan(message, message.size());
  ASSERT_EQ(whole.result, Result::kLaidOut);
  const size_t raw_start = whole.layout.entries[0].tag_at;
  for (size_t have : {size_t{0}, size_t{1}, size_t{2}, raw_start / 2, raw_start - 1, raw_start}) {
    EXPECT_EQ(scan(message, have).result, Result::kNeedMore) << have;
  }
  // The first raw tag in is enough: the tensors' bytes themselves are not needed.
  const ResponseLayoutScan early = scan(message, raw_start + 1);
  ASSERT_EQ(early.result, Result::kLaidOut);
  EXPECT_EQ(early.layout.entries[1].data_at, whole.layout.entries[1].data_at);
}

TEST(ResponseLayout, BytesOutputsTypedContentsAndStrayFieldsAreUnknown) {
  {
    inference::ModelInferResponse r = sample();
    r.mutable_outputs(1)->set_datatype("BYTES");
    EXPECT_EQ(scan(r.SerializeAsString(), r.ByteSizeLong()).result, Result::kUnknown);
  }
  {
    inference::ModelInferResponse r;
    r.set_model_name("m");
    auto* out = r.add_outputs();
    out->set_name("OUTPUT0");
    out->set_datatype("INT32");
    out->add_shape(2);
    out->mutable_contents()->add_int_contents(1);
    out->mutable_contents()->add_int_contents(2);
    const std::string message = r.SerializeAsString();
    EXPECT_EQ(scan(message, message.size()).result, Result::kUnknown);  // no raw entry at all
  }
  {
    // An entry missing (Triton writes one per output): the framed sizes do not add up.
    inference::ModelInferResponse r = sample();
    r.mutable_raw_output_contents()->RemoveLast();
    EXPECT_EQ(scan(r.SerializeAsString(), r.ByteSizeLong()).result, Result::kUnknown);
  }
  {
    // One more byte in an entry than its shape says.
    inference::ModelInferResponse r = sample();
    r.mutable_raw_output_contents(0)->push_back('x');
    EXPECT_EQ(scan(r.SerializeAsString(), r.ByteSizeLong()).result, Result::kUnknown);
  }
  {
    // A field after the tensors, or one the head does not have.
    std::string message = sample().SerializeAsString();
    message += std::string("\x38\x01", 2);  // field 7, varint 1
    EXPECT_EQ(scan(message, message.size()).result, Result::kUnknown);
    std::string odd = std::string("\x40\x01", 2) + sample().SerializeAsString();  // field 8 first
    EXPECT_EQ(scan(odd, odd.size()).result, Result::kUnknown);
  }
  {
    // A head field whose length runs past the message.
    const std::string message = std::string("\x0a\x7f", 2) + "abc";
    EXPECT_EQ(scan(message, message.size()).result, Result::kUnknown);
  }
}

TEST(ResponseLayout, AHeadPastTheLimitsIsUnknown) {
  const std::string message = sample().SerializeAsString();
  DecodeLimits limits;
  limits.max_tensors = 2;  // three outputs
  EXPECT_EQ(scanResponseLayout(bytesOf(message), message.size(), limits).result, Result::kUnknown);
  DecodeLimits small;
  small.max_binary_body_bytes = message.size() - 1;  // the whole message is refused
  EXPECT_EQ(scanResponseLayout(bytesOf(message), message.size(), small).result, Result::kUnknown);
  small.max_binary_body_bytes = message.size();
  EXPECT_EQ(scanResponseLayout(bytesOf(message), message.size(), small).result, Result::kLaidOut);
}

TEST(ResponseLayout, EntryFramedCatchesAnotherLayout) {
  const std::string message = sample().SerializeAsString();
  const ResponseLayoutScan s = scan(message, message.size());
  ASSERT_EQ(s.result, Result::kLaidOut);
  std::string changed = message;
  const ResponseLayout::Entry& e = s.layout.entries[1];
  changed[e.tag_at] = '\x3a';  // field 7
  EXPECT_FALSE(entryFramed(e, reinterpret_cast<const uint8_t*>(changed.data())));
  changed = message;
  changed[e.tag_at + 1] = static_cast<char>(changed[e.tag_at + 1] ^ 0x01);  // another length
  EXPECT_FALSE(entryFramed(e, reinterpret_cast<const uint8_t*>(changed.data())));
  EXPECT_TRUE(entryFramed(s.layout.entries[0], reinterpret_cast<const uint8_t*>(changed.data())));
}

}  // namespace
}  // namespace infergate::codecs
