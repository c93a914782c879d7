#include "codecs/json_request_encoder.h"

#include <gtest/gtest.h>

#include "codecs/binary_tensor.h"
#include "codecs/bytes_tensor.h"

namespace infergate::codecs {
namespace {

InferRequest sampleRequest() {
  InferRequest r;
  r.id = "7";
  r.parameters.set("sequence_id", int64_t{5});
  r.parameters.set("sequence_start", true);
  r.parameters.set("triton_enable_empty_final_response", false);
  InferInput a{"A", DataType::kInt32, Shape{1, 2}, {}, std::nullopt,
               Buffer::copyOf(std::string_view("\x01\0\0\0\x02\0\0\0", 8))};
  InferInput s{"S", DataType::kFp32, Shape{2}, {}, SharedMemoryRef{"r", 16, 8}, Buffer()};
  InferInput t{"T", DataType::kBytes, Shape{2}, {}, std::nullopt,
               Buffer::fromString(serializeBytesElements({"ab", ""}))};
  r.inputs = {a, s, t};
  RequestedOutput out;
  out.name = "OUT";
  out.binary_data = true;
  out.classification = 3;
  r.outputs = {out};
  r.binary_data_output = false;
  return r;
}

TEST(JsonRequestEncoder, WritesBinaryInputsAfterJsonWithoutCopying) {
  InferRequest r = sampleRequest();
  auto body = JsonRequestEncoder().encode(r);
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_TRUE(body->header_length.has_value());
  const auto& segments = body->body.segments();
  ASSERT_EQ(segments.size(), 3u);
  EXPECT_EQ(segments[0].view(),
            R"({"id":"7","inputs":[{"name":"A","shape":[1,2],"datatype":"INT32","parameters":{"binary_data_size":8}},)"
            R"({"name":"S","shape":[2],"datatype":"FP32","parameters":{"shared_memory_region":"r","shared_memory_byte_size":8,"shared_memory_offset":16}},)"
            R"({"name":"T","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}],)"
            R"("outputs":[{"name":"OUT","parameters":{"binary_data":true,"classification":3}}],)"
            R"("parameters":{"sequence_id":5,"sequence_start":true,"binary_data_output":false}})");
  EXPECT_EQ(*body->header_length, segments[0].size());
  EXPECT_EQ(segments[1].data(), r.inputs[0].data.data());  // the same bytes, not a copy
  EXPECT_EQ(segments[2].data(), r.inputs[2].data.data());
  EXPECT_EQ(body->contentType(), "application/octet-stream");
}

TEST(JsonRequestEncoder, RoundTripsThroughTheDecoder) {
  InferRequest r = sampleRequest();
  r.parameters.erase("triton_enable_empty_final_response");
  for (bool binary : {true, false}) {
    JsonRequestEncoder::Options o;
    o.binary_inputs = binary;
    auto body = JsonRequestEncoder(o).encode(r);
    ASSERT_TRUE(body.ok());
    Buffer flat = body->body.flatten();
    auto back = BinaryTensorDecoder().decodeRequest(flat, body->header_length);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, r) << "binary_inputs=" << binary;
  }
}

TEST(JsonRequestEncoder, WritesJsonDataAndForcesBinaryForHalfTypes) {
  InferRequest r;
  r.inputs.push_back({"x", DataType::kFp64, Shape{2}, {}, std::nullopt,
                      Buffer::copyOf(std::string_view("\0\0\0\0\0\0\xf8\x3f\0\0\0\0\0\0\0\xc0", 16))});
  r.inputs.push_back({"h", DataType::kFp16, Shape{1}, {}, std::nullopt,
                      Buffer::copyOf(std::string_view("\x00\x3c", 2))});
  JsonRequestEncoder::Options o;
  o.binary_inputs = false;
  auto body = JsonRequestEncoder(o).encode(r);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->body.segments()[0].view(),
            R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP64","data":[1.5,-2.0]},)"
            R"({"name":"h","shape":[1],"datatype":"FP16","parameters":{"binary_data_size":2}}]})");
  EXPECT_EQ(body->body.segments().size(), 2u);
}

TEST(JsonRequestEncoder, RejectsDataThatDoesNotMatchShape) {
  InferRequest r;
  r.inputs.push_back({"x", DataType::kInt32, Shape{2}, {}, std::nullopt, Buffer::copyOf("abc")});
  auto body = JsonRequestEncoder().encode(r);
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JsonRequestEncoder, KeepsTritonParametersWhenAsked) {
  InferRequest r;
  r.parameters.set("triton_x", true);
  JsonRequestEncoder::Options o;
  o.drop_triton_parameters = false;
  auto body = JsonRequestEncoder(o).encode(r);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->body.toString(), R"({"inputs":[],"parameters":{"triton_x":true}})");
  auto dropped = JsonRequestEncoder().encode(r);
  EXPECT_EQ(dropped->body.toString(), R"({"inputs":[]})");
}

}  // namespace
}  // namespace infergate::codecs
