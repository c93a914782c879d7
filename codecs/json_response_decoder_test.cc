#include "codecs/json_response_decoder.h"

#include <gtest/gtest.h>

namespace infergate::codecs {
namespace {

TEST(JsonResponseDecoder, DecodesTritonResponse) {
  auto r = JsonResponseDecoder().decode(
      R"({"id":"1","model_name":"m","model_version":"3","parameters":{"sequence_end":true},"outputs":[
         {"name":"a","datatype":"FP32","shape":[2],"data":[0.10000000149011612,NaN]},
         {"name":"b","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}},
         {"name":"c","datatype":"INT8","shape":[2]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->response.id, "1");
  EXPECT_EQ(r->response.model_version, "3");
  EXPECT_EQ(*r->response.parameters.find("sequence_end"), ParamValue(true));
  float a[2];
  std::memcpy(a, r->response.outputs[0].data.data(), 8);
  EXPECT_EQ(a[0], 0.1f);
  EXPECT_TRUE(std::isnan(a[1]));
  EXPECT_EQ(r->binary_outputs, (std::vector<BinaryOutputSlot>{{1, 8}}));
  EXPECT_TRUE(r->response.outputs[1].parameters.empty());  // binary_data_size is lifted out
  EXPECT_TRUE(r->response.outputs[2].data.empty());        // shared-memory output
}

TEST(JsonResponseDecoder, RejectsBrokenResponses) {
  const char* bad[] = {
      R"({"model_name":"m"})",
      R"({"outputs":[{"name":"a","datatype":"INT8","shape":[1],"data":[1],"parameters":{"binary_data_size":1}}]})",
      R"({"outputs":[{"name":"a","datatype":"INT8","shape":[2],"data":[1]}]})",
      R"({"outputs":[{"name":"a","datatype":"NOPE","shape":[1],"data":[1]}]})",
      R"({"outputs":[{"name":"a","datatype":"INT8","shape":[1],"data":[1]},{"name":"a","datatype":"INT8","shape":[1],"data":[1]}]})",
      R"({"outputs":[]}])",
      R"({"outputs":[{"name":"a","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":-1}}]})",
  };
  for (const char* json : bad) {
    auto r = JsonResponseDecoder().decode(json);
    EXPECT_FALSE(r.ok()) << json;
    if (!r.ok()) EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << json;
  }
}

TEST(JsonResponseDecoder, CapsTheParametersOfAMap) {
  std::string params;
  for (size_t i = 0; i <= kMaxParametersPerMap; ++i) {
    params += (i ? ",\"p" : "\"p") + std::to_string(i) + "\":true";
  }
  auto r = JsonResponseDecoder().decode(R"({"model_name":"m","parameters":{)" + params +
                                        R"(},"outputs":[{"name":"a","datatype":"INT8","shape":[1],"data":[1]}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(messageOf(r.status()).find("more than 1024 parameters"), std::string_view::npos)
      << messageOf(r.status());
}

TEST(JsonResponseDecoder, RefusesAKeyGivenTwice) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"outputs":[{"name":"a","datatype":"INT8","shape":[1],"data":[1],"datatype":"FP32"}]})",
       "output 'a': key 'datatype' appears more than once"},
      {R"({"outputs":[{"name":"a","datatype":"INT8","shape":[1],"shape":[1],"data":[1]}]})",
       "output 'a': key 'shape' appears more than once"},
      {R"({"outputs":[{"name":"a","datatype":"INT8","shape":[1],
           "parameters":{"binary_data_size":1,"binary_data_size":9}}]})",
       "output 'a' parameters: key 'binary_data_size' appears more than once"},
      {R"({"model_name":"m","model_name":"n","outputs":[]})",
       "the inference response: key 'model_name' appears more than once"},
      {R"({"outputs":[],"outputs":[]})", "the inference response: key 'outputs' appears more than once"},
      {R"({"outputs":[],"parameters":{"sequence_end":true,"sequence_end":false}})",
       "the response parameters: key 'sequence_end' appears more than once"},
  };
  for (const auto& [json, message] : cases) {
    auto r = JsonResponseDecoder().decode(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_NE(messageOf(r.status()).find(message), std::string_view::npos)
        << messageOf(r.status()) << "\nexpected: " << message;
  }
}

TEST(JsonResponseDecoder, DecodesErrorBodies) {
  EXPECT_EQ(*decodeJsonError(R"({"error":"Not Found"})"), "Not Found");
  EXPECT_FALSE(decodeJsonError("<html>").ok());
  EXPECT_FALSE(decodeJsonError(R"({"message":"x"})").ok());
}

}  // namespace
}  // namespace infergate::codecs
