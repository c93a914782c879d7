// Every datatype through every form: JSON, JSON + binary tensors and protobuf, for
// requests and responses, and across forms (JSON -> protobuf -> binary -> JSON). The
// model decoded at the end equals the model at the start, byte for byte.

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "codecs/binary_tensor.h"
#include "codecs/bytes_tensor.h"
#include "codecs/half.h"
#include "codecs/json_request_encoder.h"
#include "codecs/json_response_encoder.h"
#include "codecs/protobuf_request_decoder.h"
#include "codecs/protobuf_request_encoder.h"
#include "codecs/protobuf_response_decoder.h"
#include "codecs/protobuf_response_encoder.h"

namespace infergate::codecs {
namespace {

template <typename T>
void appendValue(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Six elements per type, including each type's extremes.
Buffer sampleData(DataType type) {
  std::string out;
  switch (type) {
    case DataType::kBool:
      out = std::string("\x01\x00\x01\x01\x00\x00", 6);
      break;
    case DataType::kUint8:
      for (uint8_t v : {0, 1, 2, 127, 128, 255}) appendValue(out, v);
      break;
    case DataType::kUint16:
      for (uint16_t v : {0, 1, 2, 256, 32768, 65535}) appendValue(out, v);
      break;
    case DataType::kUint32:
      for (uint32_t v : {0u, 1u, 7u, 65536u, 2147483648u, 4294967295u}) appendValue(out, v);
      break;
    case DataType::kUint64:
      for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{9007199254740993ULL},
                         uint64_t{1ULL << 63}, std::numeric_limits<uint64_t>::max() - 1,
                         std::numeric_limits<uint64_t>::max()}) {
        appendValue(out, v);
      }
      break;
    case DataType::kInt8:
      for (int8_t v : {-128, -1, 0, 1, 100, 127}) appendValue(out, v);
      break;
    case DataType::kInt16:
      for (int16_t v : {-32768, -1, 0, 1, 1000, 32767}) appendValue(out, v);
      break;
    case DataType::kInt32:
      for (int32_t v : {std::numeric_limits<int32_t>::min(), -1, 0, 1, 123456,
                        std::numeric_limits<int32_t>::max()}) {
        appendValue(out, v);
      }
      break;
    case DataType::kInt64:
      for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{-9007199254740993LL},
                        int64_t{0}, int64_t{1}, int64_t{9007199254740993LL},
                        std::numeric_limits<int64_t>::max()}) {
        appendValue(out, v);
      }
      break;
    case DataType::kFp16:
      for (float v : {0.0f, -1.5f, 65504.0f, 0.000061035156f, 3.140625f, -0.0f}) {
        appendValue(out, floatToFp16(v));
      }
      break;
    case DataType::kBf16:
      for (float v : {0.0f, -1.5f, 3.0e38f, 1.0e-30f, 3.140625f, -0.0f}) {
        appendValue(out, floatToBf16Truncate(v));
      }
      break;
    case DataType::kFp32:
      for (float v : {0.0f, -0.0f, 0.1f, std::numeric_limits<float>::max(),
                      std::numeric_limits<float>::denorm_min(),
                      std::numeric_limits<float>::infinity()}) {
        appendValue(out, v);
      }
      break;
    case DataType::kFp64:
      for (double v : {0.0, 1.0 / 3, -1e300, std::numeric_limits<double>::denorm_min(),
                       -std::numeric_limits<double>::infinity(), 123456789.125}) {
        appendValue(out, v);
      }
      break;
    case DataType::kBytes:
      out = serializeBytesElements({"", "a", std::string("\0\x01\xc3\xa9", 4), "\"quoted\"",
                                    "\\back\\slash", std::string(300, 'x')});
      break;
    case DataType::kInvalid:
      break;
  }
  return Buffer::fromString(std::move(out));
}

InferRequest requestFor(DataType type) {
  InferRequest r;
  r.model_name = "identity";
  r.model_version = "1";
  r.id = "rt";
  r.parameters.set("sequence_id", int64_t{3});
  r.parameters.set("custom", std::string("v"));
  r.inputs.push_back({"INPUT0", type, Shape{2, 3}, {}, std::nullopt, sampleData(type)});
  r.inputs.push_back({"SHM", type, Shape{6}, {}, SharedMemoryRef{"region", 64, 48}, Buffer()});
  RequestedOutput out;
  out.name = "OUTPUT0";
  r.outputs.push_back(out);
  return r;
}

InferResponse responseFor(DataType type) {
  InferResponse r;
  r.model_name = "identity";
  r.model_version = "1";
  r.id = "rt";
  r.outputs.push_back({"OUTPUT0", type, Shape{2, 3}, {}, std::nullopt, sampleData(type)});
  return r;
}

StatusOr<InferRequest> viaHttp(const InferRequest& in, bool binary) {
  JsonRequestEncoder::Options o;
  o.binary_inputs = binary;
  INFERGATE_ASSIGN_OR_RETURN(HttpInferBody body, JsonRequestEncoder(o).encode(in));
  INFERGATE_ASSIGN_OR_RETURN(InferRequest out, BinaryTensorDecoder().decodeRequest(
                                                   body.body.flatten(), body.header_length));
  out.model_name = in.model_name;  // HTTP carries these in the URL
  out.model_version = in.model_version;
  return out;
}

StatusOr<InferRequest> viaProtobuf(const InferRequest& in) {
  INFERGATE_ASSIGN_OR_RETURN(BufferChain chain, ProtobufRequestEncoder().encode(in));
  return ProtobufRequestDecoder().decode(chain.flatten());
}

class EveryDatatype : public ::testing::TestWithParam<DataType> {};

TEST_P(EveryDatatype, RequestRoundTripsThroughBinaryHttp) {
  InferRequest in = requestFor(GetParam());
  auto out = viaHttp(in, true);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, in);
}

TEST_P(EveryDatatype, RequestRoundTripsThroughJsonOrIsForcedBinary) {
  InferRequest in = requestFor(GetParam());
  auto out = viaHttp(in, false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, in);
}

TEST_P(EveryDatatype, RequestRoundTripsThroughProtobuf) {
  InferRequest in = requestFor(GetParam());
  auto out = viaProtobuf(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, in);
}

TEST_P(EveryDatatype, RequestSurvivesJsonToProtobufToBinaryToJson) {
  InferRequest in = requestFor(GetParam());
  auto a = viaHttp(in, false);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = viaProtobuf(*a);
  ASSERT_TRUE(b.ok()) << b.status();
  auto c = viaHttp(*b, true);
  ASSERT_TRUE(c.ok()) << c.status();
  auto d = viaHttp(*c, false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, in);
}

TEST_P(EveryDatatype, ResponseRoundTripsThroughEveryForm) {
  InferResponse in = responseFor(GetParam());
  auto pb = ProtobufResponseEncoder().encode(in);
  ASSERT_TRUE(pb.ok()) << pb.status();
  auto from_pb = ProtobufResponseDecoder().decode(pb->flatten());
  ASSERT_TRUE(from_pb.ok()) << from_pb.status();
  EXPECT_EQ(*from_pb, in);
  for (bool binary : {true, false}) {
    InferRequest asked;
    asked.binary_data_output = binary;
    auto http = JsonResponseEncoder().encode(*from_pb, asked);
    if (!binary && isRawOnly(GetParam())) {
      ASSERT_FALSE(http.ok());  // FP16/BF16 cannot be JSON: a clear 400, as Triton
      EXPECT_EQ(http.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ASSERT_TRUE(http.ok()) << http.status();
    auto back = BinaryTensorDecoder().decodeResponse(http->body.flatten(), http->header_length);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, in) << "binary=" << binary;
  }
}

// Triton writes BYTES into JSON strings without UTF-8 validation, so a non-UTF-8 element
// makes invalid JSON; decoding it must fail cleanly (binary outputs are the remedy).
TEST(JsonBytes, NonUtf8ElementsFailCleanlyOnTheJsonPath) {
  InferResponse in = responseFor(DataType::kBytes);
  in.outputs[0].shape = Shape{1};
  in.outputs[0].data = Buffer::fromString(serializeBytesElements({std::string("\xff\xfe", 2)}));
  auto http = JsonResponseEncoder().encode(in, InferRequest{});
  ASSERT_TRUE(http.ok());
  auto back = BinaryTensorDecoder().decodeResponse(http->body.flatten(), http->header_length);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  InferRequest binary;
  binary.binary_data_output = true;
  auto as_binary = JsonResponseEncoder().encode(in, binary);
  ASSERT_TRUE(as_binary.ok());
  auto ok = BinaryTensorDecoder().decodeResponse(as_binary->body.flatten(), as_binary->header_length);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, in);
}

INSTANTIATE_TEST_SUITE_P(Codecs, EveryDatatype, ::testing::ValuesIn(kAllDataTypes),
                         [](const auto& info) { return std::string(dataTypeName(info.param)); });

}  // namespace
}  // namespace infergate::codecs
