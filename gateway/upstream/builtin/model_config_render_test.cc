#include "gateway/upstream/builtin/model_config_render.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "gateway/upstream/builtin/demo_models.h"

namespace infergate::gateway::builtin {
namespace {

bool has(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ModelMetadata, SimpleRendersExactlyAsTriton) {
  auto model = makeSimpleModel();
  EXPECT_EQ(modelMetadataJson(model->spec(), ""),
            R"({"name":"simple","versions":["1"],"platform":"builtin",)"
            R"("inputs":[{"name":"INPUT0","datatype":"INT32","shape":[-1,16]},)"
            R"({"name":"INPUT1","datatype":"INT32","shape":[-1,16]}],)"
            R"("outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[-1,16]},)"
            R"({"name":"OUTPUT1","datatype":"INT32","shape":[-1,16]}]})");
}

TEST(ModelMetadata, NonBatchingModelHasNoLeadingBatchDim) {
  auto model = makeRepeatModel();
  EXPECT_EQ(modelMetadataJson(model->spec(), "1"),
            R"({"name":"repeat_int32","versions":["1"],"platform":"builtin",)"
            R"("inputs":[{"name":"IN","datatype":"INT32","shape":[-1]},)"
            R"({"name":"DELAY","datatype":"UINT32","shape":[-1]},)"
            R"({"name":"WAIT","datatype":"UINT32","shape":[1]}],)"
            R"("outputs":[{"name":"OUT","datatype":"INT32","shape":[1]},)"
            R"({"name":"IDX","datatype":"UINT32","shape":[1]}]})");
}

TEST(ModelMetadata, ProtoCarriesTheSameContent) {
  auto model = makeIdentityModel(codecs::DataType::kBytes);
  inference::ModelMetadataResponse m = modelMetadataProto(model->spec(), "");
  EXPECT_EQ(m.name(), "identity_bytes");
  ASSERT_EQ(m.versions_size(), 1);
  EXPECT_EQ(m.versions(0), "1");
  EXPECT_EQ(m.platform(), "builtin");
  ASSERT_EQ(m.inputs_size(), 1);
  EXPECT_EQ(m.inputs(0).datatype(), "BYTES");
  ASSERT_EQ(m.inputs(0).shape_size(), 2);
  EXPECT_EQ(m.inputs(0).shape(0), -1);
  EXPECT_EQ(m.inputs(0).shape(1), -1);
  EXPECT_EQ(m.outputs(0).name(), "OUTPUT0");
}

TEST(ModelConfig, SimpleConfigJsonHasTritonsForm) {
  auto json = modelConfigJson(modelConfigOf(makeSimpleModel()->spec()));
  ASSERT_TRUE(json.ok()) << json.status();
  const std::string& s = *json;
  EXPECT_EQ(s.rfind(R"({"name":"simple","platform":"builtin",)", 0), 0u) << s;
  EXPECT_TRUE(has(s, R"("max_batch_size":8)")) << s;
  EXPECT_TRUE(has(
      s,
      R"("input":[{"name":"INPUT0","data_type":"TYPE_INT32","format":"FORMAT_NONE","dims":[16],)"))
      << s;
  EXPECT_TRUE(has(s, R"("optional":false)")) << s;
  EXPECT_TRUE(has(s, R"("is_shape_tensor":false)")) << s;
  EXPECT_TRUE(has(
      s, R"("output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[16],"label_filename":"")"))
      << s;
  EXPECT_TRUE(has(s, R"("version_policy":{"latest":{"num_versions":1}})")) << s;
  EXPECT_TRUE(
      has(s, R"("instance_group":[{"name":"simple_0","count":1,"gpus":[],"kind":"KIND_CPU",)"))
      << s;
  EXPECT_TRUE(has(s, R"("model_transaction_policy":{"decoupled":false})")) << s;
  EXPECT_TRUE(has(s, R"("response_cache":{"enable":false})")) << s;
  EXPECT_TRUE(has(
      s, R"("optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},)"))
      << s;
  EXPECT_TRUE(has(s, R"("backend":"builtin")")) << s;
  EXPECT_TRUE(has(s, R"("cc_model_filenames":{})")) << s;
  EXPECT_TRUE(has(s, R"("batch_input":[])")) << s;
  EXPECT_FALSE(has(s, "sequence_batching")) << s;
  EXPECT_FALSE(has(s, " ")) << "compact: " << s;
  EXPECT_FALSE(has(s, R"("16")")) << s;
}

TEST(ModelConfig, SequenceAndDecoupledModelsDeclareThemselves) {
  DemoOptions options;
  options.sequence_idle = std::chrono::seconds(5);
  auto seq = modelConfigJson(modelConfigOf(makeSequenceModel(options)->spec()));
  ASSERT_TRUE(seq.ok());
  EXPECT_TRUE(has(*seq, R"("sequence_batching":{"max_sequence_idle_microseconds":5000000,)"))
      << *seq;
  EXPECT_TRUE(has(*seq, R"("direct":{"max_queue_delay_microseconds":0,)")) << *seq;
  EXPECT_TRUE(has(
      *seq,
      R"("control_input":[{"name":"START","control":[{"kind":"CONTROL_SEQUENCE_START","int32_false_true":[0,1],)"))
      << *seq;
  EXPECT_TRUE(has(*seq, R"("dims":[1])")) << *seq;

  auto repeat = modelConfigJson(modelConfigOf(makeRepeatModel()->spec()));
  ASSERT_TRUE(repeat.ok());
  EXPECT_TRUE(has(*repeat, R"("model_transaction_policy":{"decoupled":true})")) << *repeat;
  EXPECT_TRUE(has(*repeat, R"("max_batch_size":0)")) << *repeat;
  EXPECT_TRUE(has(*repeat, R"("dims":[-1])")) << *repeat;
  EXPECT_TRUE(has(*repeat, R"("data_type":"TYPE_UINT32")")) << *repeat;

  auto bytes = modelConfigJson(modelConfigOf(makeIdentityModel(codecs::DataType::kBytes)->spec()));
  EXPECT_TRUE(has(*bytes, R"("data_type":"TYPE_STRING")")) << *bytes;
}

TEST(ModelConfig, ConfigJsonParsesBackIntoTheSameMessage) {
  inference::ModelConfig config = modelConfigOf(makeSequenceModel({})->spec());
  auto json = modelConfigJson(config);
  ASSERT_TRUE(json.ok());
  inference::ModelConfig parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), config.SerializeAsString());
}

TEST(ModelConfig, RewritesOnlyTheListedInt64Paths) {
  inference::ModelConfig config;
  config.set_name("m");
  config.add_input()->add_dims(-1);
  config.mutable_version_policy()->mutable_specific()->add_versions(3);
  config.mutable_dynamic_batching()->set_max_queue_delay_microseconds(100);
  (*config.mutable_dynamic_batching()->mutable_priority_queue_policy())[2]
      .set_default_timeout_microseconds(7);
  auto* warm = config.add_model_warmup();
  (*warm->mutable_inputs())["x"].add_dims(4);
  auto json = modelConfigJson(config);
  ASSERT_TRUE(json.ok());
  EXPECT_TRUE(has(*json, R"("dims":[-1])")) << *json;
  EXPECT_TRUE(has(*json, R"("specific":{"versions":[3]})")) << *json;
  EXPECT_TRUE(has(*json, R"("max_queue_delay_microseconds":100)")) << *json;
  EXPECT_TRUE(has(*json, R"("priority_queue_policy":{"2":{)")) << *json;
  EXPECT_TRUE(has(*json, R"("default_timeout_microseconds":7)")) << *json;
  EXPECT_TRUE(has(*json, R"("inputs":{"x":{"data_type":"TYPE_INVALID","dims":[4]}})")) << *json;
}

TEST(ModelConfig, RewriterLeavesOtherStringsAndMalformedTextAlone) {
  EXPECT_EQ(rewriteInt64PathsAsNumbers(R"({"input":[{"dims":["1","-2"],"name":"16"}]})"),
            R"({"input":[{"dims":[1,-2],"name":"16"}]})");
  EXPECT_EQ(rewriteInt64PathsAsNumbers(
                R"({"instance_group":[{"secondary_devices":[{"device_id":"3"}]}]})"),
            R"({"instance_group":[{"secondary_devices":[{"device_id":"3"}]}]})");
  EXPECT_EQ(
      rewriteInt64PathsAsNumbers(
          R"({"sequence_batching":{"state":[{"dims":["2"],"initial_state":[{"dims":["5"]}]}]}})"),
      R"({"sequence_batching":{"state":[{"dims":[2],"initial_state":[{"dims":["5"]}]}]}})");
  EXPECT_EQ(rewriteInt64PathsAsNumbers(R"({"input":[{"dims":["x"]}]})"),
            R"({"input":[{"dims":["x"]}]})");
  EXPECT_EQ(rewriteInt64PathsAsNumbers(R"({"input":[{"dims":["1")"), R"({"input":[{"dims":["1")");
  EXPECT_EQ(rewriteInt64PathsAsNumbers(R"({ "output" : [ { "dims" : [ "8" ] } ] })"),
            R"({ "output" : [ { "dims" : [ 8 ] } ] })");
}

}  // namespace
}  // namespace infergate::gateway::builtin
