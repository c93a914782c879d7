#include "gateway/upstream/admin_transcode.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <random>

#include "codecs/protobuf_wire.h"
#include "gateway/settings_store.h"
#include "gateway/upstream/builtin/builtin_test_util.h"
#include "gateway/upstream/builtin/repository.h"
#include "gateway/upstream/model_rename.h"

namespace infergate::gateway::upstream {
namespace {

using builtin::testing::iota32;
using builtin::testing::simpleRequest;
using builtin::testing::singleInputRequest;
using builtin::testing::tensorInput;
using codecs::DataType;
using google::protobuf::util::MessageDifferencer;

// ---- helpers -----------------------------------------------------------------------------

// `status` is INVALID_ARGUMENT with exactly `message`.
void expectInvalid(const codecs::Status& status, std::string_view message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(codecs::messageOf(status), message);
}

// The demo repository after some traffic, so that every statistics member is non-zero
// somewhere: two batch sizes (simple), twelve responses of one request (repeat_int32:
// response indexes "0".."11", which sort as strings), a model failure (sleep).
std::shared_ptr<builtin::ModelRepository> repositoryWithTraffic() {
  auto repo = builtin::ModelRepository::createDemo();
  for (int i = 0; i < 3; ++i) repo->infer(simpleRequest(), /*streaming=*/false);
  codecs::InferRequest batch2;
  batch2.model_name = "simple";
  batch2.inputs.push_back(tensorInput("INPUT0", DataType::kInt32, {2, 16}, iota32(0, 32)));
  batch2.inputs.push_back(tensorInput("INPUT1", DataType::kInt32, {2, 16}, iota32(5, 32)));
  repo->infer(batch2, false);
  codecs::InferRequest repeat;
  repeat.model_name = "repeat_int32";
  repeat.inputs.push_back(tensorInput("IN", DataType::kInt32, {12}, iota32(1, 12)));
  repeat.inputs.push_back(
      tensorInput("DELAY", DataType::kUint32, {12}, std::vector<uint32_t>(12, 0)));
  repeat.inputs.push_back(tensorInput("WAIT", DataType::kUint32, {1}, std::vector<uint32_t>{0}));
  repo->infer(repeat, /*streaming=*/true);
  repo->infer(singleInputRequest(
                  "sleep", tensorInput("INPUT0", DataType::kInt32, {1}, std::vector<int32_t>{-1})),
              false);
  return repo;
}

std::vector<std::string> demoModelNames(const builtin::ModelRepository& repo) {
  std::vector<std::string> names;
  for (const builtin::IndexEntry& e : repo.index(false)) names.push_back(e.name);
  return names;
}

// ---- the builtin's own renderings: byte-identical JSON, equal protobuf --------------------

TEST(AdminTranscodeBuiltin, MetadataOfEveryDemoModelIsByteIdenticalBothWays) {
  auto repo = builtin::ModelRepository::createDemo();
  ASSERT_GT(demoModelNames(*repo).size(), 10u);
  for (const std::string& name : demoModelNames(*repo)) {
    auto model = repo->find(name, "");
    ASSERT_TRUE(model.ok());
    for (std::string_view version : {"", "1"}) {
      inference::ModelMetadataResponse proto = repo->metadataProto((*model)->spec(), version);
      std::string json = repo->metadataJson((*model)->spec(), version);
      EXPECT_EQ(modelMetadataToJson(proto), json) << name;
      auto back = modelMetadataFromJson(json);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(MessageDifferencer::Equals(*back, proto)) << name;
    }
  }
}

TEST(AdminTranscodeBuiltin, ConfigOfEveryDemoModelIsByteIdenticalBothWays) {
  auto repo = builtin::ModelRepository::createDemo();
  for (const std::string& name : demoModelNames(*repo)) {
    auto model = repo->find(name, "");
    ASSERT_TRUE(model.ok());
    inference::ModelConfigResponse proto;
    *proto.mutable_config() = repo->configProto((*model)->spec());
    auto json = modelConfigToJson(proto);
    ASSERT_TRUE(json.ok());
    EXPECT_EQ(*json, repo->configJson((*model)->spec())) << name;
    auto back = modelConfigFromJson(*json);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*back, proto)) << name;
  }
}

TEST(AdminTranscodeBuiltin, StatisticsAfterTrafficAreByteIdenticalBothWays) {
  auto repo = repositoryWithTraffic();
  // The traffic reached the statistics (otherwise this test would compare zeros).
  auto simple = repo->statisticsProto("simple", "");
  auto repeat = repo->statisticsProto("repeat_int32", "");
  auto sleep = repo->statisticsProto("sleep", "");
  ASSERT_TRUE(simple.ok() && repeat.ok() && sleep.ok());
  EXPECT_EQ(simple->model_stats(0).inference_count(), 5u);
  EXPECT_EQ(simple->model_stats(0).batch_stats_size(), 2);
  EXPECT_GT(simple->model_stats(0).last_inference(), 0u);
  EXPECT_EQ(repeat->model_stats(0).response_stats_size(), 12);
  EXPECT_EQ(sleep->model_stats(0).inference_stats().fail().count(), 1u);

  std::vector<std::string> names = demoModelNames(*repo);
  names.push_back("");  // every model at once
  for (const std::string& name : names) {
    auto proto = repo->statisticsProto(name, "");
    auto json = repo->statisticsJson(name, "");
    ASSERT_TRUE(proto.ok() && json.ok()) << name;
    EXPECT_EQ(modelStatisticsToJson(*proto), *json) << name;
    auto back = modelStatisticsFromJson(*json);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*back, *proto)) << name;
  }
}

TEST(AdminTranscodeBuiltin, IndexIsByteIdenticalBothWays) {
  auto repo = builtin::ModelRepository::createDemo();
  ASSERT_TRUE(repo->unload("simple").ok());
  ASSERT_TRUE(repo->unload("sleep").ok());
  for (bool ready_only : {false, true}) {
    inference::RepositoryIndexResponse proto = repo->indexProto(ready_only);
    std::string json = repo->indexJson(ready_only);
    EXPECT_EQ(repositoryIndexToJson(proto), json);
    auto back = repositoryIndexFromJson(json);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*back, proto));
  }
  EXPECT_NE(repo->indexJson(false).find(R"("state":"UNAVAILABLE","reason":"unloaded")"),
            std::string::npos);
}

TEST(AdminTranscodeBuiltin, TraceSettingsAreByteIdenticalBothWays) {
  SettingsStore settings;
  auto compare = [&](const std::string& model) {
    inference::TraceSettingRequest read;
    read.set_model_name(model);
    auto proto = settings.traceSetting(read);
    auto json = settings.traceJson(model);
    ASSERT_TRUE(proto.ok() && json.ok());
    EXPECT_EQ(traceSettingToJson(*proto), *json) << model;
    auto back = traceSettingFromJson(*json);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*back, *proto)) << model;
  };
  compare("");
  ASSERT_TRUE(settings
                  .updateTraceJson("", R"({"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"50",
                                            "trace_count":"7","log_frequency":"3"})")
                  .ok());
  ASSERT_TRUE(
      settings.updateTraceJson("simple", R"({"trace_level":["OFF"],"trace_rate":"9"})").ok());
  compare("");
  compare("simple");
}

// The HTTP body of a trace update, sent to a gRPC upstream as a TraceSettingRequest, does
// what the body does on an HTTP upstream: set, clear (null) and refuse alike.
TEST(AdminTranscodeBuiltin, TraceRequestBodiesActAsTheyDoOverHttp) {
  SettingsStore over_http;
  SettingsStore over_grpc;
  const std::vector<std::pair<std::string, std::string>> updates = {
      {"", R"({"trace_level":["TIMESTAMPS"],"trace_rate":"10"})"},
      {"simple", R"({"trace_level":["TENSORS","TIMESTAMPS"],"trace_count":"4"})"},
      {"simple", R"({"trace_level":null,"trace_rate":"77"})"},
      {"simple", R"({"trace_rate":null,"log_frequency":"12"})"},
      {"", R"({"trace_count":null,"trace_level":["OFF"]})"},
      {"", R"({"trace_rate":"abc"})"},               // refused by both
      {"", R"({"trace_level":["OFF","TENSORS"]})"},  // refused by both
      {"simple", R"({"trace_file":"/tmp/x"})"},      // UNIMPLEMENTED by both
      {"", "{}"},
  };
  for (const auto& [model, body] : updates) {
    auto http = over_http.updateTraceJson(model, body);
    auto request = traceSettingRequestFromJson(model, body);
    ASSERT_TRUE(request.ok()) << request.status();
    EXPECT_EQ(request->model_name(), model);
    auto grpc = over_grpc.traceSetting(*request);
    ASSERT_EQ(http.status().code(), grpc.status().code()) << body;
    if (http.ok()) {
      EXPECT_EQ(traceSettingToJson(*grpc), *http) << body;
    }
  }
}

// ---- answers: JSON -> protobuf ------------------------------------------------------------

TEST(AdminTranscode, MetadataErrorsNameTheMember) {
  expectInvalid(modelMetadataFromJson(
                    R"({"name":"m","inputs":[{"name":"a","datatype":"FP32","shape":[1]},
                                             {"name":"b","datatype":"FP32","shape":[1,"x"]}]})")
                    .status(),
                "model metadata: 'inputs[1].shape' must be an array of integers");
  expectInvalid(
      modelMetadataFromJson(R"({"name":"m","outputs":[{"datatype":"FP32","shape":[]}]})").status(),
      "model metadata: 'outputs[0].name' is missing");
  expectInvalid(
      modelMetadataFromJson(R"({"name":"m","outputs":[{"name":"o","datatype":"FP32"}]})").status(),
      "model metadata: 'outputs[0].shape' must be an array of integers");
  expectInvalid(modelMetadataFromJson(R"({"versions":["1"]})").status(),
                "model metadata: 'name' is missing");
  expectInvalid(modelMetadataFromJson(R"({"name":"m","versions":[1]})").status(),
                "model metadata: 'versions' must be an array of strings");
  expectInvalid(modelMetadataFromJson(R"({"name":"m","inputs":{}})").status(),
                "model metadata: 'inputs' must be an array");
  expectInvalid(modelMetadataFromJson("[]").status(), "model metadata: expected a JSON object");
  auto truncated = modelMetadataFromJson(R"({"name":)");
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(codecs::messageOf(truncated.status()).starts_with("model metadata: "));
}

TEST(AdminTranscode, MetadataReadsKServeAnswersIgnoringUnknownMembers) {
  auto r = modelMetadataFromJson(
      R"({"name":"m","versions":null,"platform":"onnx","properties":{"x":1},
          "inputs":[{"name":"a","datatype":"INT64","shape":["-1",3],"parameters":{}}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->versions_size(), 0);
  EXPECT_EQ(r->platform(), "onnx");
  ASSERT_EQ(r->inputs_size(), 1);
  EXPECT_EQ(r->inputs(0).shape(0), -1);
  EXPECT_EQ(r->inputs(0).shape(1), 3);
  expectInvalid(
      modelMetadataFromJson(
          R"({"name":"m","inputs":[{"name":"a","datatype":"A","shape":[9223372036854775808]}]})")
          .status(),
      "model metadata: 'inputs[0].shape' must be an array of integers");
}

TEST(AdminTranscode, StatisticsErrorsNameTheMember) {
  expectInvalid(modelStatisticsFromJson("{}").status(),
                "model statistics: 'model_stats' is missing");
  expectInvalid(modelStatisticsFromJson(R"({"model_stats":{}})").status(),
                "model statistics: 'model_stats' must be an array");
  expectInvalid(modelStatisticsFromJson(R"({"model_stats":[7]})").status(),
                "model statistics: 'model_stats[0]' must be an object");
  expectInvalid(
      modelStatisticsFromJson(
          R"({"model_stats":[{"name":"m","inference_stats":{"queue":{"count":1,"ns":-5}}}]})")
          .status(),
      "model statistics: 'model_stats[0].inference_stats.queue.ns' must be a non-negative integer");
  expectInvalid(
      modelStatisticsFromJson(R"({"model_stats":[{"name":"m","inference_stats":[]}]})").status(),
      "model statistics: 'model_stats[0].inference_stats' must be an object");
  expectInvalid(
      modelStatisticsFromJson(
          R"({"model_stats":[{"name":"m"},{"name":"n","batch_stats":[{"batch_size":"x"}]}]})")
          .status(),
      "model statistics: 'model_stats[1].batch_stats[0].batch_size' must be a non-negative "
      "integer");
  expectInvalid(
      modelStatisticsFromJson(R"({"model_stats":[{"name":"m","response_stats":{"0":[]}}]})")
          .status(),
      "model statistics: 'model_stats[0].response_stats.0' must be an object");
  expectInvalid(
      modelStatisticsFromJson(R"({"model_stats":[{"name":"m","memory_usage":[{"id":"abc"}]}]})")
          .status(),
      "model statistics: 'model_stats[0].memory_usage[0].id' must be an integer");
  expectInvalid(modelStatisticsFromJson(R"({"model_stats":[{"version":"1"}]})").status(),
                "model statistics: 'model_stats[0].name' is missing");
}

TEST(AdminTranscode, SixtyFourBitIntegersAreReadAsNumbersOrStringsExactly) {
  auto stats = modelStatisticsFromJson(
      R"({"model_stats":[{"name":"a","inference_count":"18446744073709551615",
                           "execution_count":18446744073709551615,
                           "last_inference":9007199254740993,
                           "memory_usage":[{"type":"GPU","id":"-2","byte_size":"5"}]}]})");
  ASSERT_TRUE(stats.ok()) << stats.status();
  const inference::ModelStatistics& s = stats->model_stats(0);
  EXPECT_EQ(s.inference_count(), UINT64_MAX);
  EXPECT_EQ(s.execution_count(), UINT64_MAX);
  EXPECT_EQ(s.last_inference(), 9007199254740993u);  // 2^53 + 1: no double on the way
  EXPECT_EQ(s.memory_usage(0).id(), -2);
  EXPECT_EQ(s.memory_usage(0).byte_size(), 5u);
  // ... and written back as numbers, as Triton does.
  EXPECT_NE(modelStatisticsToJson(*stats).find(R"("inference_count":18446744073709551615)"),
            std::string::npos);
  EXPECT_FALSE(modelStatisticsFromJson(
                   R"({"model_stats":[{"name":"a","inference_count":"18446744073709551616"}]})")
                   .ok());
  EXPECT_FALSE(
      modelStatisticsFromJson(R"({"model_stats":[{"name":"a","inference_count":-1}]})").ok());
  EXPECT_FALSE(
      modelStatisticsFromJson(R"({"model_stats":[{"name":"a","inference_count":" 1"}]})").ok());
  EXPECT_FALSE(
      modelStatisticsFromJson(R"({"model_stats":[{"name":"a","inference_count":1.5}]})").ok());
}

TEST(AdminTranscode, StatisticsWriteResponseIndexesSortedAndMemoryUsage) {
  inference::ModelStatisticsResponse r;
  inference::ModelStatistics* s = r.add_model_stats();
  s->set_name("m");
  for (std::string_view index : {"2", "10", "0", "1"}) {
    (*s->mutable_response_stats())[std::string(index)].mutable_success()->set_count(1);
  }
  inference::MemoryUsage* m = s->add_memory_usage();
  m->set_type("GPU");
  m->set_id(-1);
  m->set_byte_size(64);
  const std::string json = modelStatisticsToJson(r);
  const size_t i0 = json.find(R"("0":{)"), i1 = json.find(R"("1":{)"), i10 = json.find(R"("10":{)"),
               i2 = json.find(R"("2":{)");
  ASSERT_NE(i2, std::string::npos);
  EXPECT_TRUE(i0 < i1 && i1 < i10 && i10 < i2);  // as strings, as Triton's std::map
  EXPECT_NE(json.find(R"("memory_usage":[{"type":"GPU","id":-1,"byte_size":64}])"),
            std::string::npos);
  auto back = modelStatisticsFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model_stats(0).response_stats().at("10").success().count(), 1u);
  EXPECT_EQ(back->model_stats(0).memory_usage(0).id(), -1);
}

TEST(AdminTranscode, IndexErrorsNameTheEntry) {
  expectInvalid(repositoryIndexFromJson("{}").status(), "repository index: expected a JSON array");
  expectInvalid(repositoryIndexFromJson(R"([{"name":"a"},3])").status(),
                "repository index: '[1]' must be an object");
  expectInvalid(repositoryIndexFromJson(R"([{"name":"a","version":1}])").status(),
                "repository index: '[0].version' must be a string");
  expectInvalid(repositoryIndexFromJson(R"([{"state":"READY"}])").status(),
                "repository index: '[0].name' is missing");
  auto minimal = repositoryIndexFromJson(R"([{"name":"a"}])");
  ASSERT_TRUE(minimal.ok());
  EXPECT_EQ(repositoryIndexToJson(*minimal), R"([{"name":"a"}])");
}

TEST(AdminTranscode, TraceAnswersTakeStringsArraysAndNull) {
  auto r = traceSettingFromJson(
      R"({"trace_mode":"opentelemetry","url":"http://c:4318","trace_level":["TIMESTAMPS"],
          "trace_rate":"1000","trace_count":null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->settings().at("trace_count").value_size(), 0);
  // Triton's key order first, then the others sorted; one value -> a string.
  EXPECT_EQ(traceSettingToJson(*r),
            R"({"trace_level":["TIMESTAMPS"],"trace_rate":"1000","trace_count":[],)"
            R"("trace_mode":"opentelemetry","url":"http://c:4318"})");
  expectInvalid(traceSettingFromJson(R"({"trace_rate":5})").status(),
                "trace settings: 'trace_rate' must be a string, an array of strings or null");
  expectInvalid(traceSettingFromJson(R"({"trace_level":["OFF",1]})").status(),
                "trace settings: 'trace_level' must be a string or an array of strings");
  expectInvalid(traceSettingFromJson("[]").status(), "trace settings: expected a JSON object");
}

TEST(AdminTranscode, ConfigIsReadByProtobufIgnoringUnknownFields) {
  auto r = modelConfigFromJson(
      R"({"name":"m","max_batch_size":4,"a_future_field":{"x":[1]},
          "input":[{"name":"a","data_type":"TYPE_INT64","dims":[-1,"3",9007199254740993]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->config().name(), "m");
  EXPECT_EQ(r->config().max_batch_size(), 4);
  ASSERT_EQ(r->config().input(0).dims_size(), 3);
  EXPECT_EQ(r->config().input(0).dims(1), 3);
  EXPECT_EQ(r->config().input(0).dims(2), 9007199254740993);
  EXPECT_EQ(r->config().input(0).data_type(), inference::TYPE_INT64);
  // Triton's answer for an all-default config is an empty body.
  auto empty = modelConfigFromJson("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->has_config());
  auto bad = modelConfigFromJson("[1]");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(codecs::messageOf(bad.status()).starts_with("model config: "));
  EXPECT_FALSE(modelConfigFromJson(R"({"max_batch_size":"four"})").ok());
}

// ---- requests ------------------------------------------------------------------------------

TEST(AdminTranscode, LoadRequestCarriesConfigAsStringAndFilesAsBase64Bytes) {
  auto load = loadRequestFromJson(
      "m", R"({"parameters":{"config":"{\"max_batch_size\":2}","file:1/model.onnx":"AAEC/w=="}})");
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->model_name(), "m");
  EXPECT_EQ(load->parameters().at("config").string_param(), R"({"max_batch_size":2})");
  EXPECT_EQ(load->parameters().at("file:1/model.onnx").bytes_param(),
            std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(loadRequestToJson(*load),
            R"({"parameters":{"config":"{\"max_batch_size\":2}","file:1/model.onnx":"AAEC/w=="}})");

  auto empty = loadRequestFromJson("m", "");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->parameters_size(), 0);
  EXPECT_EQ(loadRequestToJson(*empty), "{}");
  // A key Triton's gRPC handler refuses is still forwarded: the upstream names it.
  auto other = loadRequestFromJson("m", R"({"parameters":{"colour":"blue"}})");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->parameters().at("colour").string_param(), "blue");
}

TEST(AdminTranscode, LoadRequestErrorsNameTheParameter) {
  expectInvalid(loadRequestFromJson("m", R"({"parameters":{"config":{}}})").status(),
                "load request: 'parameters.config' must be a string");
  expectInvalid(loadRequestFromJson("m", R"({"parameters":[]})").status(),
                "load request: 'parameters' must be an object");
  expectInvalid(loadRequestFromJson("m", "[]").status(), "load request: expected a JSON object");
  for (std::string_view bad : {"Zm9v!", "Z", "Zg==Zg==", "Zm9v===", "Zm9v_-"}) {
    expectInvalid(
        loadRequestFromJson("m", codecs::strCat(R"({"parameters":{"file:1/x":")", bad, R"("}})"))
            .status(),
        "load request: 'parameters.file:1/x' is not valid base64");
  }
  EXPECT_EQ(loadRequestFromJson("m", "{").status().code(), absl::StatusCode::kInvalidArgument);
}

// RFC 4648's test vectors, then every length and byte value both ways.
TEST(AdminTranscode, Base64MatchesTheRfcAndRoundTrips) {
  const std::pair<std::string_view, std::string_view> vectors[] = {{"", ""},
                                                                   {"f", "Zg=="},
                                                                   {"fo", "Zm8="},
                                                                   {"foo", "Zm9v"},
                                                                   {"foob", "Zm9vYg=="},
                                                                   {"fooba", "Zm9vYmE="},
                                                                   {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    inference::RepositoryModelLoadRequest r;
    (*r.mutable_parameters())["file:1/f"].set_bytes_param(std::string(plain));
    EXPECT_EQ(loadRequestToJson(r),
              codecs::strCat(R"({"parameters":{"file:1/f":")", encoded, R"("}})"));
  }
  std::string bytes;
  for (int n = 0; n < 300; ++n) {
    inference::RepositoryModelLoadRequest r;
    (*r.mutable_parameters())["file:1/f"].set_bytes_param(bytes);
    auto back = loadRequestFromJson("", loadRequestToJson(r));
    ASSERT_TRUE(back.ok()) << n;
    ASSERT_EQ(back->parameters().at("file:1/f").bytes_param(), bytes) << n;
    bytes.push_back(static_cast<char>(n * 7 + 3));
  }
  // Lenient where libb64 is: line breaks and missing padding.
  auto wrapped =
      loadRequestFromJson("m", R"({"parameters":{"file:f":"Zm9v\r\nYmFy","file:g":"Zm9vYg"}})");
  ASSERT_TRUE(wrapped.ok()) << wrapped.status();
  EXPECT_EQ(wrapped->parameters().at("file:f").bytes_param(), "foobar");
  EXPECT_EQ(wrapped->parameters().at("file:g").bytes_param(), "foob");
}

TEST(AdminTranscode, RepositoryParametersOfEveryKindBecomeJson) {
  inference::RepositoryModelLoadRequest r;
  auto& p = *r.mutable_parameters();
  p["a"].set_bool_param(true);
  p["b"].set_int64_param(-3);
  p["c"].set_string_param("s\"q");
  p["file:d"].set_bytes_param(std::string(1, '\0'));
  p["e"];  // no kind set
  EXPECT_EQ(loadRequestToJson(r),
            R"({"parameters":{"a":true,"b":-3,"c":"s\"q","e":null,"file:d":"AA=="}})");
}

TEST(AdminTranscode, UnloadRequestCarriesUnloadDependentsAsBool) {
  auto unload = unloadRequestFromJson("m", R"({"parameters":{"unload_dependents":false}})");
  ASSERT_TRUE(unload.ok()) << unload.status();
  EXPECT_EQ(unload->model_name(), "m");
  const auto& p = unload->parameters().at("unload_dependents");
  EXPECT_EQ(p.parameter_choice_case(), inference::ModelRepositoryParameter::kBoolParam);
  EXPECT_FALSE(p.bool_param());
  EXPECT_EQ(unloadRequestToJson(*unload), R"({"parameters":{"unload_dependents":false}})");
  auto back = unloadRequestFromJson("m", unloadRequestToJson(*unload));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*back, *unload));
  expectInvalid(
      unloadRequestFromJson("m", R"({"parameters":{"unload_dependents":"yes"}})").status(),
      "unload request: 'parameters.unload_dependents' must be a boolean");
  expectInvalid(unloadRequestFromJson("m", R"({"parameters":{"x":[]}})").status(),
                "unload request: 'parameters.x' must be a boolean, an integer or a string");
  auto empty = unloadRequestFromJson("m", "  ");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(unloadRequestToJson(*empty), "{}");
}

TEST(AdminTranscode, IndexRequestCarriesReady) {
  auto ready = indexRequestFromJson(R"({"ready":true,"extra":1})");
  ASSERT_TRUE(ready.ok());
  EXPECT_TRUE(ready->ready());
  EXPECT_EQ(indexRequestToJson(*ready), R"({"ready":true})");
  for (std::string_view body : {"", "{}", R"({"ready":null})", R"({"ready":false})"}) {
    auto r = indexRequestFromJson(body);
    ASSERT_TRUE(r.ok()) << body;
    EXPECT_FALSE(r->ready());
  }
  EXPECT_EQ(indexRequestToJson(inference::RepositoryIndexRequest()), R"({"ready":false})");
  expectInvalid(indexRequestFromJson(R"({"ready":1})").status(),
                "repository index request: 'ready' must be a boolean");
}

TEST(AdminTranscode, TraceRequestNullClearsAndEmptyBodyReads) {
  auto r = traceSettingRequestFromJson(
      "m", R"({"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"1000","trace_count":null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_name(), "m");
  EXPECT_EQ(r->settings().at("trace_level").value_size(), 2);
  EXPECT_EQ(r->settings().at("trace_rate").value(0), "1000");
  EXPECT_EQ(r->settings().at("trace_count").value_size(), 0);
  EXPECT_EQ(traceSettingRequestToJson(*r),
            R"({"trace_count":null,"trace_level":["TIMESTAMPS","TENSORS"],"trace_rate":"1000"})");
  auto back = traceSettingRequestFromJson("m", traceSettingRequestToJson(*r));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*back, *r));

  auto read = traceSettingRequestFromJson("", "");
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->settings().empty());
  EXPECT_EQ(read->model_name(), "");
  expectInvalid(
      traceSettingRequestFromJson("", R"({"trace_rate":1000})").status(),
      "trace setting request: 'trace_rate' must be a string, an array of strings or null");
}

// ---- merging -------------------------------------------------------------------------------

// The inside of a JSON array or object text: "[a,b]" -> "a,b".
std::string_view inner(std::string_view json, size_t prefix, size_t suffix) {
  return json.substr(prefix, json.size() - prefix - suffix);
}

TEST(AdminTranscode, MergedIndexKeepsEveryEntryInAnswerOrder) {
  auto repo = builtin::ModelRepository::createDemo({"simple", "sleep"});
  ASSERT_TRUE(repo->unload("sleep").ok());
  const std::string builtin_index = repo->indexJson(false);
  const std::string merged = mergeRepositoryIndexJson(
      {builtin_index, "[]",
       R"( [ {"name" : "x", "state":"READY", "extra":1} , {"name":"simple"} ] )", "not json",
       R"({"name":"y"})"});
  EXPECT_EQ(merged, codecs::strCat("[", inner(builtin_index, 1, 1),
                                   R"(,{"name":"x","state":"READY"},{"name":"simple"}])"));
  EXPECT_EQ(mergeRepositoryIndexJson({}), "[]");
}

TEST(AdminTranscode, MergedStatisticsKeepEveryEntryByteForByte) {
  auto a = repositoryWithTraffic();
  auto b = builtin::ModelRepository::createDemo({"identity_fp32"});
  auto a_json = a->statisticsJson("", "");
  auto b_json = b->statisticsJson("", "");
  ASSERT_TRUE(a_json.ok() && b_json.ok());
  const size_t prefix = std::string_view(R"({"model_stats":[)").size();
  auto merged = mergeModelStatisticsJson({*a_json, R"({"model_stats":[]})", *b_json});
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(*merged, codecs::strCat(R"({"model_stats":[)", inner(*a_json, prefix, 2), ",",
                                    inner(*b_json, prefix, 2), "]}"));
  expectInvalid(mergeModelStatisticsJson({*a_json, R"({"model_stats":[{}]})"}).status(),
                "answer 2 of 2: model statistics: 'model_stats[0].name' is missing");
  EXPECT_EQ(mergeModelStatisticsJson({"not json"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*mergeModelStatisticsJson({}), R"({"model_stats":[]})");
}

// ---- with the model-name rewrite (model_rename.h) -----------------------------------------

// Renaming the builtin's metadata text gives what the renamed message renders to.
TEST(AdminTranscode, RenameInJsonAgreesWithRenderingTheRenamedMessage) {
  auto repo = builtin::ModelRepository::createDemo();
  for (const std::string& name : demoModelNames(*repo)) {
    auto model = repo->find(name, "");
    ASSERT_TRUE(model.ok());
    inference::ModelMetadataResponse proto = repo->metadataProto((*model)->spec(), "");
    proto.set_name("public/\"alias\"");
    EXPECT_EQ(renameInJson(repo->metadataJson((*model)->spec(), ""), "name", proto.name()),
              modelMetadataToJson(proto));
  }
}

}  // namespace
}  // namespace infergate::gateway::upstream
