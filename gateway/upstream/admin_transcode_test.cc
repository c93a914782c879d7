#include "gateway/upstream/admin_transcode.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "gateway/settings_store.h"
#include "gateway/upstream/builtin/repository.h"

namespace infergate::gateway::upstream {
namespace {

using google::protobuf::util::MessageDifferencer;

std::shared_ptr<builtin::ModelRepository> repositoryWithTraffic() {
  auto repo = builtin::ModelRepository::createDemo();
  codecs::InferRequest request;
  request.model_name = "identity_int32";
  codecs::InferInput input;
  input.name = "INPUT0";
  input.datatype = codecs::DataType::kInt32;
  input.shape = codecs::Shape({1, 2});
  int32_t values[2] = {3, 4};
  input.data = codecs::Buffer::copyOf(std::string_view(reinterpret_cast<char*>(values), 8));
  request.inputs.push_back(input);
  for (int i = 0; i < 3; ++i) repo->infer(request, /*streaming=*/false);
  return repo;
}

// The transcoded JSON of a gRPC answer is what the same server's HTTP port answers, byte
// for byte; and the JSON read back is the message.
TEST(AdminTranscode, MetadataMatchesTheBuiltinRenderingsBothWays) {
  auto repo = builtin::ModelRepository::createDemo();
  for (const auto& entry : repo->index(false)) {
    auto model = repo->find(entry.name, "");
    ASSERT_TRUE(model.ok());
    inference::ModelMetadataResponse proto = repo->metadataProto((*model)->spec(), "");
    std::string json = repo->metadataJson((*model)->spec(), "");
    EXPECT_EQ(modelMetadataToJson(proto), json) << entry.name;
    auto back = modelMetadataFromJson(json);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*back, proto)) << entry.name;
  }
}

TEST(AdminTranscode, ConfigMatchesTheBuiltinRenderingsBothWays) {
  auto repo = builtin::ModelRepository::createDemo();
  for (const auto& entry : repo->index(false)) {
    auto model = repo->find(entry.name, "");
    ASSERT_TRUE(model.ok());
    inference::ModelConfigResponse proto;
    *proto.mutable_config() = repo->configProto((*model)->spec());
    auto json = modelConfigToJson(proto);
    ASSERT_TRUE(json.ok());
    EXPECT_EQ(*json, repo->configJson((*model)->spec())) << entry.name;
    auto back = modelConfigFromJson(*json);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*back, proto)) << entry.name;
  }
}

TEST(AdminTranscode, StatisticsMatchTheBuiltinRenderingsBothWays) {
  auto repo = repositoryWithTraffic();
  for (std::string_view name : {std::string_view("identity_int32"), std::string_view("")}) {
    auto proto = repo->statisticsProto(name, "");
    auto json = repo->statisticsJson(name, "");
    ASSERT_TRUE(proto.ok() && json.ok());
    EXPECT_NE(json->find("\"inference_count\":3"), std::string::npos);
    EXPECT_EQ(modelStatisticsToJson(*proto), *json);
    auto back = modelStatisticsFromJson(*json);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*back, *proto));
  }
}

TEST(AdminTranscode, IndexAndTraceMatchTheBuiltinRenderings) {
  auto repo = builtin::ModelRepository::createDemo();
  ASSERT_TRUE(repo->unload("simple").ok());
  EXPECT_EQ(repositoryIndexToJson(repo->indexProto(false)), repo->indexJson(false));
  auto index = repositoryIndexFromJson(repo->indexJson(false));
  ASSERT_TRUE(index.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*index, repo->indexProto(false)));

  SettingsStore settings([](std::string_view) { return absl::OkStatus(); });
  auto proto = settings.traceSetting(inference::TraceSettingRequest());
  auto json = settings.traceJson("");
  ASSERT_TRUE(proto.ok() && json.ok());
  EXPECT_EQ(traceSettingToJson(*proto), *json);
  auto back = traceSettingFromJson(*json);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*back, *proto));
}

TEST(AdminTranscode, MalformedAnswersNameTheField) {
  auto bad = modelMetadataFromJson(R"({"name":"m","inputs":[{"name":"a","datatype":"FP32","shape":"x"}]})");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(codecs::messageOf(bad.status()).find("inputs[0].shape"), std::string_view::npos);
  EXPECT_FALSE(modelStatisticsFromJson(R"({"model_stats":{}})").ok());
  EXPECT_FALSE(repositoryIndexFromJson("{}").ok());
  EXPECT_FALSE(modelConfigFromJson("[1]").ok());
  // 64-bit values as strings (protobuf's JSON form) are accepted.
  auto stats = modelStatisticsFromJson(R"({"model_stats":[{"name":"m","inference_count":"18446744073709551615"}]})");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->model_stats(0).inference_count(), UINT64_MAX);
}

TEST(AdminTranscode, RequestsTravelBothWays) {
  auto load = loadRequestFromJson("m", R"({"parameters":{"config":"{}","file:1/model.bin":"AAEC/w=="}})");
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->model_name(), "m");
  EXPECT_EQ(load->parameters().at("config").string_param(), "{}");
  EXPECT_EQ(load->parameters().at("file:1/model.bin").bytes_param(), std::string("\x00\x01\x02\xff", 4));
  auto again = loadRequestFromJson("m", loadRequestToJson(*load));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*again, *load));
  EXPECT_FALSE(loadRequestFromJson("m", R"({"parameters":{"file:x":"not base64!"}})").ok());
  EXPECT_FALSE(loadRequestFromJson("m", R"({"parameters":[]})").ok());

  auto unload = unloadRequestFromJson("m", R"({"parameters":{"unload_dependents":true}})");
  ASSERT_TRUE(unload.ok());
  EXPECT_TRUE(unload->parameters().at("unload_dependents").bool_param());
  EXPECT_EQ(unloadRequestToJson(*unload), R"({"parameters":{"unload_dependents":true}})");

  auto index = indexRequestFromJson(R"({"ready":true})");
  ASSERT_TRUE(index.ok());
  EXPECT_TRUE(index->ready());
  EXPECT_TRUE(indexRequestFromJson("").ok());
  EXPECT_FALSE(indexRequestFromJson(R"({"ready":1})").ok());

  auto trace = traceSettingRequestFromJson("m", R"({"trace_level":["TIMESTAMPS"],"trace_rate":"10","trace_count":null})");
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ(trace->settings().at("trace_rate").value(0), "10");
  EXPECT_EQ(trace->settings().at("trace_count").value_size(), 0);  // clears it
  EXPECT_EQ(traceSettingRequestToJson(*trace),
            R"({"trace_count":null,"trace_level":["TIMESTAMPS"],"trace_rate":"10"})");
}

TEST(AdminTranscode, MergesKeepEveryAnswersEntries) {
  EXPECT_EQ(mergeRepositoryIndexJson({R"([{"name":"a","version":"1","state":"READY"}])",
                                      R"([{"name":"b"}])"}),
            R"([{"name":"a","version":"1","state":"READY"},{"name":"b"}])");
  auto stats = mergeModelStatisticsJson({R"({"model_stats":[{"name":"a","version":"1"}]})",
                                         R"({"model_stats":[{"name":"b","version":"2"}]})"});
  ASSERT_TRUE(stats.ok());
  auto parsed = modelStatisticsFromJson(*stats);
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->model_stats_size(), 2);
  EXPECT_EQ(parsed->model_stats(1).name(), "b");
  EXPECT_FALSE(mergeModelStatisticsJson({"not json"}).ok());
}

TEST(AdminTranscode, RenameInJsonKeepsEveryOtherByte) {
  EXPECT_EQ(renameInJson(R"({"model_name":"up","model_version":"1","outputs":[]})", "model_name", "pub"),
            R"({"model_name":"pub","model_version":"1","outputs":[]})");
  // Nested members of the same name, escaped strings and spacing are left alone.
  std::string json = R"( { "x" : {"name":"inner"}, "s":"a\"name\":\"no", "name" : "up" ,"z":[1,{"name":2}] } )";
  EXPECT_EQ(renameInJson(json, "name", "p\"q"),
            R"( { "x" : {"name":"inner"}, "s":"a\"name\":\"no", "name" : "p\"q" ,"z":[1,{"name":2}] } )");
  EXPECT_EQ(renameInJson(R"({"name":1})", "name", "x"), std::nullopt);
  EXPECT_EQ(renameInJson(R"({"other":"y"})", "name", "x"), std::nullopt);
  EXPECT_EQ(renameInJson(R"([{"name":"y"}])", "name", "x"), std::nullopt);
  EXPECT_EQ(renameInJson(R"({"a":"unterminated)", "name", "x"), std::nullopt);
}

inference::ModelInferResponse sampleResponse() {
  inference::ModelInferResponse r;
  r.set_model_name("upstream-model");
  r.set_model_version("3");
  r.set_id("req-7");
  auto* out = r.add_outputs();
  out->set_name("OUTPUT0");
  out->set_datatype("FP32");
  out->add_shape(1);
  out->add_shape(1024);
  r.add_raw_output_contents(std::string(4096, '\x5a'));
  return r;
}

TEST(AdminTranscode, RewriteModelFieldsReplacesOnlyTheNamesWithoutCopyingTensors) {
  inference::ModelInferResponse original = sampleResponse();
  codecs::Buffer message = codecs::Buffer::fromString(original.SerializeAsString());
  auto chain = rewriteModelFields(message, "public", std::nullopt);
  ASSERT_TRUE(chain.ok()) << chain.status();
  inference::ModelInferResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(chain->toString()));
  inference::ModelInferResponse expected = original;
  expected.set_model_name("public");
  EXPECT_TRUE(MessageDifferencer::Equals(parsed, expected));
  // The tensor bytes are a slice of the original message, not a copy.
  bool shared = false;
  for (const codecs::Buffer& segment : chain->segments()) {
    shared = shared || (segment.size() >= 4096 && segment.data() >= message.data() &&
                        segment.data() < message.data() + message.size());
  }
  EXPECT_TRUE(shared);

  auto versioned = rewriteModelFields(message, "public", std::string_view(""));
  ASSERT_TRUE(versioned.ok());
  ASSERT_TRUE(parsed.ParseFromString(versioned->toString()));
  EXPECT_EQ(parsed.model_version(), "");  // proto3: an empty version is not written
}

TEST(AdminTranscode, RewriteStreamModelFieldsRewritesInsideTheStreamMessage) {
  inference::ModelStreamInferResponse stream;
  stream.set_error_message("");
  *stream.mutable_infer_response() = sampleResponse();
  codecs::Buffer message = codecs::Buffer::fromString(stream.SerializeAsString());
  auto chain = rewriteStreamModelFields(message, "public", std::string_view("1"));
  ASSERT_TRUE(chain.ok()) << chain.status();
  inference::ModelStreamInferResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(chain->toString()));
  EXPECT_EQ(parsed.infer_response().model_name(), "public");
  EXPECT_EQ(parsed.infer_response().model_version(), "1");
  EXPECT_EQ(parsed.infer_response().raw_output_contents(0), std::string(4096, '\x5a'));
}

TEST(AdminTranscode, RewriteRefusesMalformedMessagesAtEveryTruncation) {
  std::string bytes = sampleResponse().SerializeAsString();
  for (size_t n = 1; n < bytes.size(); n += 7) {
    codecs::Buffer prefix = codecs::Buffer::copyOf(std::string_view(bytes).substr(0, n));
    auto chain = rewriteModelFields(prefix, "m", std::nullopt);
    inference::ModelInferResponse parsed;
    // Either refused, or (a prefix ending on a field boundary) a valid shorter message.
    if (chain.ok()) {
      EXPECT_TRUE(parsed.ParseFromString(chain->toString())) << n;
    } else {
      EXPECT_EQ(chain.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace infergate::gateway::upstream
