#include "codecs/binary_tensor.h"

#include <gtest/gtest.h>

#include "codecs/bytes_tensor.h"

namespace infergate::codecs {
namespace {

// PROTOCOL.md 6.2: A (INT32 [1,4]) binary, S in shared memory, T (BYTES [2]) binary.
const std::string kJson =
    R"({"inputs":[{"name":"A","shape":[1,4],"datatype":"INT32","parameters":{"binary_data_size":16}},)"
    R"({"name":"S","shape":[2],"datatype":"FP32","parameters":{"shared_memory_region":"s","shared_memory_byte_size":8}},)"
    R"({"name":"T","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}],)"
    R"("outputs":[{"name":"OUT","parameters":{"binary_data":true}}]})";
const std::string kBlobs = std::string("\x01\0\0\0\x02\0\0\0\x03\0\0\0\x04\0\0\0", 16) +
                           std::string("\x02\0\0\0" "ab" "\0\0\0\0", 10);

StatusOr<InferRequest> decode(const std::string& body, std::optional<uint64_t> header_length) {
  return BinaryTensorDecoder().decodeRequest(Buffer::copyOf(body), header_length);
}

void expectError(const std::string& body, std::optional<uint64_t> hl, std::string_view fragment,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  auto r = decode(body, hl);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code);
  EXPECT_NE(messageOf(r.status()).find(fragment), std::string_view::npos) << messageOf(r.status());
}

TEST(BinaryTensorDecoder, DecodesTheWorkedExampleWithBlobsAsSlices) {
  Buffer body = Buffer::copyOf(kJson + kBlobs);
  auto r = BinaryTensorDecoder().decodeRequest(body, kJson.size());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->inputs.size(), 3u);
  EXPECT_EQ(r->inputs[0].data.data(), body.data() + kJson.size());  // zero copy
  EXPECT_EQ(r->inputs[0].data.size(), 16u);
  EXPECT_TRUE(r->inputs[1].data.empty());
  EXPECT_EQ(r->inputs[1].shared_memory->region, "s");
  EXPECT_EQ(r->inputs[2].data.data(), body.data() + kJson.size() + 16);
  EXPECT_EQ(*parseBytesElements(r->inputs[2].data.span(), "T"),
            (std::vector<std::string>{"ab", ""}));
}

TEST(BinaryTensorDecoder, RejectsHeaderLengthPastTheBody) {
  expectError(kJson, kJson.size() + 1, "larger than the body");
}

TEST(BinaryTensorDecoder, RejectsTruncatedBlobs) {
  expectError(kJson + kBlobs.substr(0, 20), kJson.size(), "unexpected size for input 'T'");
  expectError(kJson, kJson.size(), "unexpected size for input 'A'");
  expectError(kJson, std::nullopt, "unexpected size for input 'A'");
}

TEST(BinaryTensorDecoder, RejectsBytesAfterTheLastBlob) {
  expectError(kJson + kBlobs + "junk", kJson.size(), "unexpected additional input data");
}

TEST(BinaryTensorDecoder, RejectsBlobsThatDisagreeWithShape) {
  std::string json =
      R"({"inputs":[{"name":"A","shape":[1,4],"datatype":"INT32","parameters":{"binary_data_size":12}}]})";
  expectError(json + std::string(12, '\0'), json.size(), "needs 16 bytes but 12 were given");
  std::string bytes_json =
      R"({"inputs":[{"name":"T","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}]})";
  expectError(bytes_json + std::string("\x09\0\0\0" "ab", 6), bytes_json.size(),
              "runs past the end");
}

TEST(BinaryTensorDecoder, RejectsBodiesOverTheLimit) {
  DecodeLimits limits;
  limits.max_binary_body_bytes = 100;
  auto r = BinaryTensorDecoder(limits).decodeRequest(Buffer::copyOf(kJson + kBlobs), kJson.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(BinaryTensorDecoder, AcceptsEmptyBlobs) {
  std::string json =
      R"({"inputs":[{"name":"E","shape":[0],"datatype":"FP32","parameters":{"binary_data_size":0}}]})";
  auto r = decode(json, json.size());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->inputs[0].data.empty());
}

TEST(BinaryTensorDecoder, FailsCleanlyAtEveryCut) {
  std::string body = kJson + kBlobs;
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = decode(body.substr(0, n), std::min<uint64_t>(kJson.size(), n));
    EXPECT_FALSE(r.ok()) << n;
  }
}

TEST(BinaryTensorDecoder, DecodesRawBinaryRequests) {
  BinaryTensorDecoder d;
  std::string floats(24, '\0');
  auto r = d.decodeRawRequest(Buffer::copyOf(floats), {"IN", DataType::kFp32, Shape{-1, 3}, true});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->inputs[0].shape, (Shape{1, 2, 3}));
  EXPECT_EQ(r->binary_data_output, std::optional<bool>(true));

  auto s = d.decodeRawRequest(Buffer::copyOf("hello"), {"S", DataType::kBytes, Shape{1}, false});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->inputs[0].shape, (Shape{1}));
  EXPECT_EQ(s->inputs[0].data.view(), std::string_view("\x05\0\0\0hello", 9));

  EXPECT_FALSE(d.decodeRawRequest(Buffer::copyOf("12345"), {"I", DataType::kFp32, Shape{-1}, false}).ok());
  EXPECT_FALSE(d.decodeRawRequest(Buffer::copyOf(floats), {"I", DataType::kFp32, Shape{-1, -1}, false}).ok());
  EXPECT_FALSE(d.decodeRawRequest(Buffer::copyOf(floats), {"I", DataType::kFp32, Shape{4}, false}).ok());
  EXPECT_FALSE(d.decodeRawRequest(Buffer::copyOf("x"), {"S", DataType::kBytes, Shape{2}, false}).ok());
}

// A response still arriving: the blobs' memory holds anything (here 0xEE, not yet
// written), and only the header is read.
const std::string kAheadJson =
    R"({"model_name":"m","id":"7","outputs":[)"
    R"({"name":"A","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},)"
    R"({"name":"E","datatype":"INT8","shape":[0],"parameters":{"binary_data_size":0}},)"
    R"({"name":"B","datatype":"INT16","shape":[3],"parameters":{"binary_data_size":6}}]})";

Buffer arriving(const std::string& json, size_t blob_bytes) {
  std::string body = json + std::string(blob_bytes, '\xee');
  return Buffer::copyOf(body);
}

StatusOr<InferResponse> ahead(const std::string& json, size_t blob_bytes) {
  return BinaryTensorDecoder().decodeResponseAhead(arriving(json, blob_bytes), json.size());
}

TEST(BinaryTensorDecoder, ReadsAResponseAheadOfItsBlobs) {
  Buffer body = arriving(kAheadJson, 14);
  auto r = BinaryTensorDecoder().decodeResponseAhead(body, kAheadJson.size());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_name, "m");
  EXPECT_EQ(r->id, "7");
  ASSERT_EQ(r->outputs.size(), 3u);
  EXPECT_EQ(r->outputs[0].data.data(), body.data() + kAheadJson.size());
  EXPECT_EQ(r->outputs[0].data.size(), 8u);
  EXPECT_TRUE(r->outputs[1].data.empty());
  EXPECT_EQ(r->outputs[2].data.data(), body.data() + kAheadJson.size() + 8);
  EXPECT_EQ(r->outputs[2].data.size(), 6u);
  EXPECT_EQ(r->outputs[2].shape, (Shape{3}));

  // The same outputs as the whole decode of the same bytes.
  auto whole = BinaryTensorDecoder().decodeResponse(body, kAheadJson.size());
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->outputs.size(), r->outputs.size());
  for (size_t i = 0; i < r->outputs.size(); ++i) {
    EXPECT_EQ(whole->outputs[i].name, r->outputs[i].name);
    EXPECT_EQ(whole->outputs[i].datatype, r->outputs[i].datatype);
    EXPECT_EQ(whole->outputs[i].data.data(), r->outputs[i].data.data());
  }
}

TEST(BinaryTensorDecoder, RefusesToReadAheadWhatMustBeReadToBeChecked) {
  const std::string bytes_json =
      R"({"outputs":[{"name":"T","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]})";
  auto bytes = ahead(bytes_json, 6);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(messageOf(bytes.status()).find("'T' is BYTES"), std::string_view::npos) << bytes.status();

  const std::string json_data =
      R"({"outputs":[{"name":"A","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}},)"
      R"({"name":"J","datatype":"INT32","shape":[1],"data":[5]}]})";
  auto mixed = ahead(json_data, 4);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(messageOf(mixed.status()).find("'J' is not binary"), std::string_view::npos) << mixed.status();
}

TEST(BinaryTensorDecoder, ChecksBlobSizesAheadAsTheWholeDecodeDoes) {
  auto wrong_shape = ahead(
      R"({"outputs":[{"name":"A","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":8}}]})", 8);
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(messageOf(wrong_shape.status()).find("needs 12 bytes but 8 were given"), std::string_view::npos);
  auto extra = ahead(kAheadJson, 15);
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(messageOf(extra.status()).find("unexpected additional output data"), std::string_view::npos);
  auto short_body = ahead(kAheadJson, 13);
  ASSERT_FALSE(short_body.ok());
  EXPECT_NE(messageOf(short_body.status()).find("unexpected size for output 'B'"), std::string_view::npos);
  auto past = BinaryTensorDecoder().decodeResponseAhead(arriving(kAheadJson, 0), kAheadJson.size() + 1);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(messageOf(past.status()).find("larger than the body"), std::string_view::npos);
  auto garbage = ahead("{\"outputs\":", 0);
  EXPECT_FALSE(garbage.ok());
}

}  // namespace
}  // namespace infergate::codecs
