#include "codecs/json_response_encoder.h"

#include <gtest/gtest.h>

#include "codecs/binary_tensor.h"
#include "codecs/bytes_tensor.h"

namespace infergate::codecs {
namespace {

InferResponse simpleResponse() {
  InferResponse r;
  r.model_name = "simple";
  r.model_version = "1";
  std::string sum, diff;
  for (int32_t i = 0; i < 4; ++i) {
    int32_t s = i + 1, d = i - 1;
    sum.append(reinterpret_cast<const char*>(&s), 4);
    diff.append(reinterpret_cast<const char*>(&d), 4);
  }
  r.outputs.push_back({"OUTPUT0", DataType::kInt32, Shape{1, 4}, {}, std::nullopt,
                       Buffer::fromString(sum)});
  r.outputs.push_back({"OUTPUT1", DataType::kInt32, Shape{1, 4}, {}, std::nullopt,
                       Buffer::fromString(diff)});
  return r;
}

TEST(JsonResponseEncoder, WritesJsonOutputsInTritonKeyOrder) {
  InferRequest req;
  req.id = "ignored";  // the response's own id is written, not the request's
  auto body = JsonResponseEncoder().encode(simpleResponse(), req);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_FALSE(body->header_length.has_value());
  EXPECT_EQ(body->contentType(), "application/json");
  EXPECT_EQ(body->body.toString(),
            R"({"model_name":"simple","model_version":"1","outputs":[)"
            R"({"name":"OUTPUT0","datatype":"INT32","shape":[1,4],"data":[1,2,3,4]},)"
            R"({"name":"OUTPUT1","datatype":"INT32","shape":[1,4],"data":[-1,0,1,2]}]})");
}

TEST(JsonResponseEncoder, HonoursPerOutputAndRequestLevelBinaryChoice) {
  InferResponse resp = simpleResponse();
  resp.id = "abc";
  InferRequest req;
  req.binary_data_output = true;
  RequestedOutput o1;
  o1.name = "OUTPUT1";
  o1.binary_data = false;
  req.outputs = {o1};
  auto body = JsonResponseEncoder().encode(resp, req);
  ASSERT_TRUE(body.ok());
  ASSERT_TRUE(body->header_length.has_value());
  const auto& seg = body->body.segments();
  ASSERT_EQ(seg.size(), 2u);
  EXPECT_EQ(seg[0].view(),
            R"({"id":"abc","model_name":"simple","model_version":"1","outputs":[)"
            R"({"name":"OUTPUT0","datatype":"INT32","shape":[1,4],"parameters":{"binary_data_size":16}},)"
            R"({"name":"OUTPUT1","datatype":"INT32","shape":[1,4],"data":[-1,0,1,2]}]})");
  EXPECT_EQ(*body->header_length, seg[0].size());
  EXPECT_EQ(seg[1].data(), resp.outputs[0].data.data());
}

TEST(JsonResponseEncoder, WritesSharedMemoryOutputsBare) {
  InferResponse resp = simpleResponse();
  resp.outputs[0].shared_memory = SharedMemoryRef{"out", 0, 16};
  resp.outputs[0].data = Buffer();
  resp.parameters.set("p", 1.0);
  auto body = JsonResponseEncoder().encode(resp, InferRequest{});
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->body.toString(),
            R"({"model_name":"simple","model_version":"1","parameters":{"p":1.0},"outputs":[)"
            R"({"name":"OUTPUT0","datatype":"INT32","shape":[1,4]},)"
            R"({"name":"OUTPUT1","datatype":"INT32","shape":[1,4],"data":[-1,0,1,2]}]})");
}

TEST(JsonResponseEncoder, RefusesHalfPrecisionAsJson) {
  InferResponse resp;
  resp.outputs.push_back({"h", DataType::kFp16, Shape{1}, {}, std::nullopt,
                          Buffer::copyOf(std::string_view("\0\x3c", 2))});
  auto body = JsonResponseEncoder().encode(resp, InferRequest{});
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(messageOf(body.status()).find("FP16 data via JSON"), std::string_view::npos);
  InferRequest binary;
  binary.binary_data_output = true;
  EXPECT_TRUE(JsonResponseEncoder().encode(resp, binary).ok());
}

TEST(JsonResponseEncoder, RoundTripsThroughTheResponseDecoder) {
  InferResponse resp = simpleResponse();
  resp.outputs.push_back({"S", DataType::kBytes, Shape{2}, {}, std::nullopt,
                          Buffer::fromString(serializeBytesElements({"x\"y", "\n"}))});
  for (bool binary : {false, true}) {
    InferRequest req;
    req.binary_data_output = binary;
    auto body = JsonResponseEncoder().encode(resp, req);
    ASSERT_TRUE(body.ok());
    auto back = BinaryTensorDecoder().decodeResponse(body->body.flatten(), body->header_length);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, resp);
  }
}

TEST(JsonResponseEncoder, EncodesErrorBodies) {
  EXPECT_EQ(encodeJsonError("Request for unknown model: 'x' is not found"),
            R"({"error":"Request for unknown model: 'x' is not found"})");
  EXPECT_EQ(encodeJsonError("a\"b"), R"({"error":"a\"b"})");
  // What a client put in the URL is quoted back as valid UTF-8, so the body stays JSON.
  EXPECT_EQ(encodeJsonError("model 'ab\xff\xfe" "cd' is not found"),
            "{\"error\":\"model 'ab\xEF\xBF\xBD\xEF\xBF\xBD" "cd' is not found\"}");
  EXPECT_EQ(validUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(validUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");              // overlong '/'
  EXPECT_EQ(validUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(validUtf8("\xF4\x90\x80\x80").substr(0, 3), "\xEF\xBF\xBD");        // past U+10FFFF
  EXPECT_EQ(validUtf8("ab\xE2\x82"), "ab\xEF\xBF\xBD\xEF\xBF\xBD");              // cut off
}

}  // namespace
}  // namespace infergate::codecs
