#include "codecs/json_request_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "codecs/bytes_tensor.h"

namespace infergate::codecs {
namespace {

StatusOr<JsonInferRequestHeader> decode(std::string_view json, DecodeLimits limits = {}) {
  return JsonRequestDecoder(limits).decode(json);
}

template <typename T>
std::vector<T> values(const Buffer& b) {
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
  return out;
}

void expectError(std::string_view json, absl::StatusCode code, std::string_view fragment,
                 DecodeLimits limits = {}) {
  auto r = decode(json, limits);
  ASSERT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.status().code(), code) << messageOf(r.status());
  EXPECT_NE(messageOf(r.status()).find(fragment), std::string_view::npos)
      << "message: " << messageOf(r.status()) << "\nexpected to contain: " << fragment;
}

TEST(JsonRequestDecoder, DecodesSimpleModelRequest) {
  auto r = decode(R"({"id":"42","inputs":[
      {"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},
      {"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[[1,1,1,1,1,1,1,1],[1,1,1,1,1,1,1,1]]}],
      "outputs":[{"name":"OUTPUT0"},{"name":"OUTPUT1","parameters":{"binary_data":true}}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const InferRequest& req = r->request;
  EXPECT_EQ(req.id, "42");
  ASSERT_EQ(req.inputs.size(), 2u);
  EXPECT_EQ(req.inputs[0].datatype, DataType::kInt32);
  EXPECT_EQ(req.inputs[0].shape, (Shape{1, 16}));
  auto in0 = values<int32_t>(req.inputs[0].data);
  ASSERT_EQ(in0.size(), 16u);
  EXPECT_EQ(in0[15], 15);
  EXPECT_EQ(values<int32_t>(req.inputs[1].data), std::vector<int32_t>(16, 1));
  ASSERT_EQ(req.outputs.size(), 2u);
  EXPECT_FALSE(req.outputs[0].binary_data.has_value());
  EXPECT_EQ(req.outputs[1].binary_data, std::optional<bool>(true));
  EXPECT_TRUE(r->binary_inputs.empty());
}

// Found by the json_request fuzzer: a second "datatype" used to replace the first after the
// data was decoded with it, leaving a tensor whose bytes did not match its type. Triton
// reads the first of equal keys; the gateway refuses them so it never forwards a request
// other than the one it checked.
TEST(JsonRequestDecoder, RefusesAKeyGivenTwice) {
  const auto invalid = absl::StatusCode::kInvalidArgument;
  expectError(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1],"datatype":"UINT16"}]})",
              invalid, "input 'x': key 'datatype' appears more than once");
  expectError(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1],"shape":[2]}]})",
              invalid, "input 'x': key 'shape' appears more than once");
  expectError(R"({"inputs":[{"data":[1],"name":"x","datatype":"INT8","shape":[1],"data":[1,2]}]})",
              invalid, "input 'x': key 'data' appears more than once");
  expectError(R"({"inputs":[{"name":"x","name":"y","datatype":"INT8","shape":[1],"data":[1]}]})",
              invalid, "input 'x': key 'name' appears more than once");
  expectError(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1],
                  "parameters":{"a":1},"parameters":{"b":2}}]})",
              invalid, "input 'x': key 'parameters' appears more than once");
  expectError(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],
                  "parameters":{"binary_data_size":1,"binary_data_size":4}}]})",
              invalid, "tensor 'x' parameters: key 'binary_data_size' appears more than once");
  expectError(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1],
                  "parameters":{"p":1,"p":"two"}}]})",
              invalid, "tensor 'x' parameters: key 'p' appears more than once");
  expectError(R"({"id":"a","inputs":[],"id":"b"})", invalid,
              "the inference request: key 'id' appears more than once");
  expectError(R"({"inputs":[],"inputs":[]})", invalid,
              "the inference request: key 'inputs' appears more than once");
  expectError(R"({"inputs":[],"parameters":{"sequence_id":1,"sequence_id":2}})", invalid,
              "request 'parameters': key 'sequence_id' appears more than once");
  expectError(R"({"inputs":[],"parameters":{"binary_data_output":true,"binary_data_output":false}})",
              invalid, "request 'parameters': key 'binary_data_output' appears more than once");
  expectError(R"({"inputs":[],"outputs":[{"name":"o","parameters":{},"parameters":{}}]})", invalid,
              "output 'o': key 'parameters' appears more than once");
  expectError(R"({"inputs":[],"outputs":[{"name":"o","name":"p"}]})", invalid,
              "output 'o': key 'name' appears more than once");
  // Unknown keys are not read, so a repeated one changes nothing and is let through.
  auto r = decode(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1],"z":1,"z":2}],
                      "extra":1,"extra":2})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->request.inputs.size(), 1u);
}

// PROTOCOL 5.2: Triton's reader takes NaN, Infinity and integers past 64 bits as doubles,
// so a custom parameter may hold one; a reserved key then refuses it by name.
TEST(JsonRequestDecoder, TakesNonFiniteAndHugeParametersAsDoubles) {
  auto r = decode(R"({"parameters":{"a":NaN,"b":-Infinity,"c":18446744073709551616},"inputs":[]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const Parameters& p = r->request.parameters;
  ASSERT_TRUE(std::holds_alternative<double>(*p.find("a")));
  EXPECT_TRUE(std::isnan(std::get<double>(*p.find("a"))));
  EXPECT_EQ(std::get<double>(*p.find("b")), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::get<double>(*p.find("c")), 18446744073709551616.0);
  const auto invalid = absl::StatusCode::kInvalidArgument;
  expectError(R"({"parameters":{"priority":NaN},"inputs":[]})", invalid,
              "parameter 'priority' must be an unsigned integer");
  expectError(R"({"parameters":{"timeout":Infinity},"inputs":[]})", invalid,
              "parameter 'timeout' must be an unsigned integer");
  expectError(R"({"parameters":{"priority":18446744073709551616},"inputs":[]})", invalid,
              "parameter 'priority' must be an unsigned integer");
  expectError(R"({"parameters":{"sequence_id":NaN},"inputs":[]})", invalid,
              "parameter 'sequence_id' must be an unsigned integer or a string");
  expectError(R"({"parameters":{"p":1e999},"inputs":[]})", invalid,
              "parameter 'p' is a number out of range");
}

// Found by the json_request fuzzer once NaN parameters were taken: a request with one did
// not equal itself after a round trip, NaN being unequal to NaN.
// `"k0":0,"k1":1,...` with `count` entries.
std::string manyParameters(size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) out += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  return out;
}

// Parameters::set is linear: an unbounded object would be quadratic to decode, so the JSON
// decoders cap a map as the protobuf ones do.
TEST(JsonRequestDecoder, CapsTheParametersOfAMap) {
  const std::string input = R"(,"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1])";
  auto at_cap = decode("{\"parameters\":{" + manyParameters(kMaxParametersPerMap) + "}" + input + "}]}");
  ASSERT_TRUE(at_cap.ok()) << at_cap.status();
  EXPECT_EQ(at_cap->request.parameters.size(), kMaxParametersPerMap);
  expectError("{\"parameters\":{" + manyParameters(kMaxParametersPerMap + 1) + "}" + input + "}]}",
              absl::StatusCode::kResourceExhausted, "more than 1024 parameters in the request");
  expectError(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1],"parameters":{)" +
                  manyParameters(kMaxParametersPerMap + 1) + "}}]}",
              absl::StatusCode::kResourceExhausted, "more than 1024 parameters in tensor 'x'");
}

TEST(Parameters, ANanEqualsANanAndNothingElse) {
  Parameters a, b;
  a.set("x", std::numeric_limits<double>::quiet_NaN());
  b.set("x", std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(a, b);
  Parameters c;
  c.set("x", 1.0);
  EXPECT_NE(a, c);
  Parameters d;
  d.set("y", std::numeric_limits<double>::quiet_NaN());
  EXPECT_NE(a, d);
  Parameters e;
  e.set("x", std::string("NaN"));
  EXPECT_NE(a, e);
  auto r1 = decode(R"({"parameters":{"p":NaN},"inputs":[]})");
  auto r2 = decode(R"({"parameters":{"p":NaN},"inputs":[]})");
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(r1->request, r2->request);
}

TEST(JsonRequestDecoder, KeepsInt64AndUint64Exact) {
  auto r = decode(R"({"inputs":[
      {"name":"a","shape":[3],"datatype":"INT64","data":[9223372036854775807,-9223372036854775808,9007199254740993]},
      {"name":"b","shape":[2],"datatype":"UINT64","data":[18446744073709551615,9007199254740993]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(values<int64_t>(r->request.inputs[0].data),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min(), 9007199254740993LL}));
  EXPECT_EQ(values<uint64_t>(r->request.inputs[1].data),
            (std::vector<uint64_t>{std::numeric_limits<uint64_t>::max(), 9007199254740993ULL}));
}

TEST(JsonRequestDecoder, AcceptsNanAndInfinityLiterals) {
  auto r = decode(
      R"({"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":[NaN, Infinity ,-Infinity,1.5]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  auto v = values<float>(r->request.inputs[0].data);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[2], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[3], 1.5f);
}

TEST(JsonRequestDecoder, DecodesEveryJsonDatatype) {
  auto r = decode(R"({"inputs":[
      {"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]},
      {"name":"u8","shape":[2],"datatype":"UINT8","data":[0,255]},
      {"name":"u16","shape":[1],"datatype":"UINT16","data":[65535]},
      {"name":"u32","shape":[1],"datatype":"UINT32","data":[4294967295]},
      {"name":"i8","shape":[2],"datatype":"INT8","data":[-128,127]},
      {"name":"i16","shape":[1],"datatype":"INT16","data":[-32768]},
      {"name":"f64","shape":[2],"datatype":"FP64","data":[0.1,-2]},
      {"name":"s","shape":[3],"datatype":"BYTES","data":["ab","","\u0000z"]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& in = r->request.inputs;
  EXPECT_EQ(in[0].data.view(), std::string_view("\x01\x00", 2));
  EXPECT_EQ(values<uint8_t>(in[1].data), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(values<uint16_t>(in[2].data), (std::vector<uint16_t>{65535}));
  EXPECT_EQ(values<uint32_t>(in[3].data), (std::vector<uint32_t>{4294967295u}));
  EXPECT_EQ(values<int8_t>(in[4].data), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(values<int16_t>(in[5].data), (std::vector<int16_t>{-32768}));
  EXPECT_EQ(values<double>(in[6].data), (std::vector<double>{0.1, -2.0}));
  auto elements = parseBytesElements(in[7].data.span(), "s");
  ASSERT_TRUE(elements.ok());
  EXPECT_EQ(*elements, (std::vector<std::string>{"ab", "", std::string("\0z", 2)}));
}

TEST(JsonRequestDecoder, DecodesDataThatComesBeforeShapeAndDatatype) {
  auto r = decode(R"({"inputs":[{"data":[1,2,3],"name":"x","shape":[3],"datatype":"INT16"}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(values<int16_t>(r->request.inputs[0].data), (std::vector<int16_t>{1, 2, 3}));
}

TEST(JsonRequestDecoder, KeepsParameterKindsAndOrder) {
  auto r = decode(R"({"inputs":[],"parameters":{"sequence_id":7,"sequence_start":true,
      "sequence_end":false,"priority":18446744073709551615,"custom_s":"v","custom_d":1.25,
      "custom_i":-3,"binary_data_output":true}})");
  ASSERT_TRUE(r.ok()) << r.status();
  const Parameters& p = r->request.parameters;
  std::vector<std::string> keys;
  for (const auto& [k, v] : p) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"sequence_id", "sequence_start", "sequence_end",
                                            "priority", "custom_s", "custom_d", "custom_i"}));
  EXPECT_EQ(*p.find("sequence_id"), ParamValue(int64_t{7}));
  EXPECT_EQ(*p.find("priority"), ParamValue(std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(*p.find("custom_d"), ParamValue(1.25));
  EXPECT_EQ(*p.find("custom_i"), ParamValue(int64_t{-3}));
  EXPECT_EQ(r->request.binary_data_output, std::optional<bool>(true));
}

TEST(JsonRequestDecoder, ListsBinaryInputsInJsonOrderAndSharedMemoryInputs) {
  auto r = decode(R"({"inputs":[
      {"name":"A","shape":[1,4],"datatype":"INT32","parameters":{"binary_data_size":16}},
      {"name":"S","shape":[2],"datatype":"FP32","parameters":{"shared_memory_region":"r0",
        "shared_memory_byte_size":8,"shared_memory_offset":64}},
      {"name":"T","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}],
      "outputs":[{"name":"OUT","parameters":{"shared_memory_region":"o","shared_memory_byte_size":4}}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->binary_inputs, (std::vector<BinaryInputSlot>{{0, 16}, {2, 10}}));
  EXPECT_EQ(r->request.inputs[1].shared_memory, (SharedMemoryRef{"r0", 64, 8}));
  EXPECT_EQ(r->request.outputs[0].shared_memory, (SharedMemoryRef{"o", 0, 4}));
  EXPECT_TRUE(r->request.inputs[0].parameters.empty());
}

TEST(JsonRequestDecoder, RejectsMalformedJson) {
  expectError(R"({"inputs":[)", absl::StatusCode::kInvalidArgument, "JSON");
  expectError("", absl::StatusCode::kInvalidArgument, "JSON");
  expectError("[1,2]", absl::StatusCode::kInvalidArgument, "must be a JSON object");
}

TEST(JsonRequestDecoder, RejectsValidRequestFollowedByJunk) {
  expectError(R"({"inputs":[]} xyz)", absl::StatusCode::kInvalidArgument, "");
  expectError(R"({"inputs":[]}{})", absl::StatusCode::kInvalidArgument, "");
}

TEST(JsonRequestDecoder, RejectsMissingInputs) {
  expectError(R"({"id":"1"})", absl::StatusCode::kInvalidArgument, "no 'inputs'");
}

TEST(JsonRequestDecoder, RejectsShapeAndDataMismatch) {
  expectError(R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"INT32","data":[1,2,3]}]})",
              absl::StatusCode::kInvalidArgument, "shape calls for 4 elements but 'data' holds 3");
  expectError(R"({"inputs":[{"name":"x","shape":[2],"datatype":"INT32","data":[1,2,3]}]})",
              absl::StatusCode::kInvalidArgument, "more elements than its shape");
}

TEST(JsonRequestDecoder, RejectsUnknownDatatype) {
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FLOAT32","data":[1]}]})",
              absl::StatusCode::kInvalidArgument, "invalid datatype 'FLOAT32'");
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"fp32","data":[1]}]})",
              absl::StatusCode::kInvalidArgument, "invalid datatype 'fp32'");
}

TEST(JsonRequestDecoder, RejectsNonNumericAndWrongKindData) {
  expectError(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,"a"]}]})",
              absl::StatusCode::kInvalidArgument, "tensor 'x': data element 1");
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":[1.0]}]})",
              absl::StatusCode::kInvalidArgument, "is not an integer");
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"BOOL","data":[1]}]})",
              absl::StatusCode::kInvalidArgument, "is not true or false");
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[-1]}]})",
              absl::StatusCode::kInvalidArgument, "non-negative");
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"BYTES","data":[5]}]})",
              absl::StatusCode::kInvalidArgument, "is not a string");
}

TEST(JsonRequestDecoder, RejectsFp16AndBf16AsJson) {
  expectError(R"({"inputs":[{"name":"h","shape":[1],"datatype":"FP16","data":[1]}]})",
              absl::StatusCode::kInvalidArgument, "FP16 data via JSON is not supported");
  expectError(R"({"inputs":[{"name":"h","shape":[1],"datatype":"BF16","data":[1]}]})",
              absl::StatusCode::kInvalidArgument, "BF16 data via JSON is not supported");
}

TEST(JsonRequestDecoder, RejectsTooDeepNesting) {
  std::string data(101, '[');
  data += "1";
  data += std::string(101, ']');
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT32","data":)" + data + "}]}",
              absl::StatusCode::kInvalidArgument, "nested deeper than 100");
}

TEST(JsonRequestDecoder, RejectsDeepNestingAnywhereInTheBody) {
  // Outside `data` too: in a parameter, or a key the decoder would skip.
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  expectError(R"({"parameters":{"p":)" + deep + R"(},"inputs":[]})",
              absl::StatusCode::kInvalidArgument, "JSON nested deeper than 100 levels");
  expectError(R"({"unknown":)" + deep + R"(,"inputs":[]})", absl::StatusCode::kInvalidArgument,
              "JSON nested deeper than 100 levels");
  DecodeLimits shallow;
  shallow.max_json_depth = 3;
  expectError(R"({"inputs":[{"name":"x","shape":[1,1],"datatype":"INT32","data":[[1]]}]})",
              absl::StatusCode::kInvalidArgument, "JSON nested deeper than 3 levels", shallow);
}

TEST(JsonRequestDecoder, RefusesShapesPastTheRankAndElementLimits) {
  DecodeLimits limits;
  limits.max_rank = 2;
  limits.max_elements = 4;
  EXPECT_TRUE(decode(R"({"inputs":[{"name":"x","shape":[2,2],"datatype":"INT32","data":[1,2,3,4]}]})",
                     limits).ok());
  expectError(R"({"inputs":[{"name":"x","shape":[1,1,1],"datatype":"INT32","data":[1]}]})",
              absl::StatusCode::kResourceExhausted, "more than the limit of 2 dimensions", limits);
  expectError(R"({"inputs":[{"name":"x","shape":[5],"datatype":"INT32","data":[1,2,3,4,5]}]})",
              absl::StatusCode::kResourceExhausted,
              "tensor 'x' of shape [5] has 5 elements, more than the limit of 4", limits);
}

TEST(JsonRequestDecoder, RejectsElementCountOverflow) {
  expectError(R"({"inputs":[{"name":"x","shape":[4294967296,4294967296],"datatype":"INT8","data":[]}]})",
              absl::StatusCode::kInvalidArgument, "more elements than fit in int64");
  expectError(R"({"inputs":[{"name":"x","shape":[-1],"datatype":"INT8","data":[]}]})",
              absl::StatusCode::kInvalidArgument, "non-negative integers");
}

TEST(JsonRequestDecoder, RejectsDuplicateTensorNames) {
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[1]},
                            {"name":"x","shape":[1],"datatype":"INT8","data":[2]}]})",
              absl::StatusCode::kInvalidArgument, "input 'x' appears more than once");
  expectError(R"({"inputs":[],"outputs":[{"name":"o"},{"name":"o"}]})",
              absl::StatusCode::kInvalidArgument, "output 'o' is requested more than once");
}

TEST(JsonRequestDecoder, RejectsMoreThanOneDataSource) {
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[1],
                  "parameters":{"binary_data_size":1}}]})",
              absl::StatusCode::kInvalidArgument, "given: 'data' 'binary_data_size'");
  expectError(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8"}]})",
              absl::StatusCode::kInvalidArgument, "given: none");
}

TEST(JsonRequestDecoder, RejectsReservedTritonParameters) {
  expectError(R"({"inputs":[],"parameters":{"triton_enable_empty_final_response":true}})",
              absl::StatusCode::kInvalidArgument, "reserved");
}

TEST(JsonRequestDecoder, RejectsBadParameterValues) {
  expectError(R"({"inputs":[],"parameters":{"custom":[1]}})", absl::StatusCode::kInvalidArgument,
              "parameter 'custom' must be");
  expectError(R"({"inputs":[],"parameters":{"sequence_id":-1}})",
              absl::StatusCode::kInvalidArgument, "sequence_id");
  expectError(R"({"inputs":[],"parameters":{"sequence_start":1}})",
              absl::StatusCode::kInvalidArgument, "sequence_start");
  expectError(R"({"id":5,"inputs":[]})", absl::StatusCode::kInvalidArgument, "'id' must be a string");
}

TEST(JsonRequestDecoder, RejectsSharedMemoryCombinedWithClassification) {
  expectError(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"classification":3,
                  "shared_memory_region":"r","shared_memory_byte_size":4}}]})",
              absl::StatusCode::kInvalidArgument, "shared memory and classification");
}

TEST(JsonRequestDecoder, EnforcesSizeLimits) {
  DecodeLimits small;
  small.max_json_bytes = 20;
  expectError(R"({"inputs":[],"id":"0123456789"})", absl::StatusCode::kResourceExhausted,
              "exceeds the limit", small);
  DecodeLimits tensor;
  tensor.max_tensor_bytes = 8;
  expectError(R"({"inputs":[{"name":"x","shape":[3],"datatype":"INT32","data":[1,2,3]}]})",
              absl::StatusCode::kResourceExhausted, "decodes to more than 8 bytes", tensor);
  expectError(R"({"inputs":[{"name":"x","shape":[3],"datatype":"BYTES","data":["aaaa","b","c"]}]})",
              absl::StatusCode::kResourceExhausted, "decodes to more than 8 bytes", tensor);
}

TEST(JsonRequestDecoder, TreatsScalarShapeAsZeroElementsLikeTriton) {
  expectError(R"({"inputs":[{"name":"x","shape":[],"datatype":"INT32","data":[1]}]})",
              absl::StatusCode::kInvalidArgument, "more elements than its shape (0)");
}

TEST(JsonRequestDecoder, DecodesManyTensors) {
  std::string json = R"({"inputs":[)";
  for (int i = 0; i < 200; ++i) {
    if (i) json += ',';
    json += R"({"name":"t)" + std::to_string(i) + R"(","shape":[1],"datatype":"INT32","data":[)" +
            std::to_string(i) + "]}";
  }
  json += "]}";
  auto r = decode(json);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->request.inputs.size(), 200u);
  EXPECT_EQ(values<int32_t>(r->request.inputs[199].data), std::vector<int32_t>{199});
}

TEST(JsonRequestDecoder, ParsesInPlaceWhenPaddingIsReadable) {
  std::string storage = R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[7]}]})";
  size_t size = storage.size();
  storage.append(64, 'Z');  // padding bytes of any value
  auto r = JsonRequestDecoder().decode(std::string_view(storage.data(), size), storage.size());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->request.inputs[0].data.view(), "\x07");
}

TEST(JsonRequestDecoder, FailsCleanlyOnEveryTruncation) {
  std::string json = R"({"id":"a","inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1.5,NaN]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]})";
  for (size_t n = 0; n < json.size(); ++n) {
    auto r = decode(std::string_view(json).substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes decoded";
  }
  EXPECT_TRUE(decode(json).ok());
}

}  // namespace
}  // namespace infergate::codecs
