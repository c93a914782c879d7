#include "gateway/upstream/builtin/repository.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "gateway/upstream/builtin/builtin_test_util.h"

namespace infergate::gateway::builtin {
namespace {

using codecs::DataType;
using namespace std::chrono_literals;
using testing::iota32;
using testing::simpleRequest;
using testing::stringsOf;
using testing::tensorInput;
using testing::valuesOf;

std::string errorText(const codecs::Status& s) { return std::string(codecs::messageOf(s)); }

codecs::InferResponse okResponse(const Execution& e, size_t i = 0) {
  if (e.responses.size() <= i || !e.responses[i].response.ok()) {
    ADD_FAILURE() << (e.responses.size() <= i ? "no response"
                                              : e.responses[i].response.status().ToString());
    return {};
  }
  return *e.responses[i].response;
}

class Repository : public ::testing::Test {
 protected:
  std::shared_ptr<ModelRepository> repo_ = ModelRepository::createDemo();
};

TEST_F(Repository, ResolvesNamesAndVersionsAsTriton) {
  EXPECT_TRUE(repo_->find("simple", "").ok());
  EXPECT_TRUE(repo_->find("simple", "1").ok());
  auto unknown = repo_->find("nope", "");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(errorText(unknown.status()), "Request for unknown model: 'nope' is not found");
  auto v2 = repo_->find("simple", "2");
  EXPECT_EQ(v2.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(errorText(v2.status()), "Request for unknown model: 'simple' version 2 is not found");
  auto bad = repo_->find("simple", "v1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(errorText(bad.status()),
            "failed to get model version from specified version string 'v1' (details: stol), "
            "version should be an integral value > 0");
  auto negative = repo_->find("simple", "-1");
  EXPECT_EQ(errorText(negative.status()),
            "invalid model version specified '-1' , version should be an integral value > 0");
  EXPECT_TRUE(repo_->find("simple", "01").ok());
  EXPECT_EQ(repo_->find("simple", "99999999999999999999").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(Repository, UnloadAndLoadToggleReadiness) {
  EXPECT_TRUE(repo_->isReady("simple", ""));
  ASSERT_TRUE(repo_->unload("simple").ok());
  EXPECT_FALSE(repo_->isReady("simple", ""));
  EXPECT_FALSE(repo_->isReady("simple", "1"));
  auto latest = repo_->find("simple", "");
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(errorText(latest.status()),
            "Request for unknown model: 'simple' has no available versions");
  auto v1 = repo_->find("simple", "1");
  EXPECT_EQ(v1.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(errorText(v1.status()),
            "Request for unknown model: 'simple' version 1 is not at ready state");

  std::vector<IndexEntry> index = repo_->index(false);
  auto it = std::find_if(index.begin(), index.end(), [](auto& e) { return e.name == "simple"; });
  ASSERT_NE(it, index.end());
  EXPECT_EQ(*it, (IndexEntry{"simple", "1", "UNAVAILABLE", "unloaded"}));
  for (const IndexEntry& e : repo_->index(true)) EXPECT_NE(e.name, "simple");

  ASSERT_TRUE(repo_->load("simple").ok());
  EXPECT_TRUE(repo_->isReady("simple", "1"));
  EXPECT_TRUE(repo_->unload("never_heard_of_it").ok());
  codecs::Status unknown = repo_->load("never_heard_of_it");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(errorText(unknown),
            "failed to load 'never_heard_of_it', failed to poll from model repository");
}

TEST_F(Repository, LoadValidatesAConfigParameterThenIgnoresIt) {
  ASSERT_TRUE(repo_->unload("simple").ok());
  EXPECT_EQ(repo_->load("simple", R"({"bogus_field":1})").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(repo_->isReady("simple", ""));
  EXPECT_TRUE(repo_->load("simple", R"({"name":"simple","max_batch_size":4})").ok());
  EXPECT_TRUE(repo_->isReady("simple", ""));
}

TEST_F(Repository, IndexListsEveryModelByNameAndRendersAsTriton) {
  std::vector<IndexEntry> index = repo_->index(false);
  EXPECT_EQ(index.size(), demoModelNames().size());
  EXPECT_TRUE(
      std::is_sorted(index.begin(), index.end(), [](auto& a, auto& b) { return a.name < b.name; }));
  auto small = ModelRepository::createDemo({"simple", "sleep"});
  ASSERT_TRUE(small->unload("sleep").ok());
  EXPECT_EQ(small->indexJson(false),
            R"([{"name":"simple","version":"1","state":"READY"},)"
            R"({"name":"sleep","version":"1","state":"UNAVAILABLE","reason":"unloaded"}])");
  EXPECT_EQ(small->indexJson(true), R"([{"name":"simple","version":"1","state":"READY"}])");
  inference::RepositoryIndexResponse proto = small->indexProto(false);
  ASSERT_EQ(proto.models_size(), 2);
  EXPECT_EQ(proto.models(1).reason(), "unloaded");
}

TEST(RepositoryDemo, CreatesOnlyTheNamedModelsAndChecksNames) {
  auto repo = ModelRepository::createDemo({"simple", "identity_fp16"});
  EXPECT_EQ(repo->index(false).size(), 2u);
  EXPECT_TRUE(ModelRepository::checkDemoNames({"simple", "repeat_int32"}).ok());
  codecs::Status bad = ModelRepository::checkDemoNames({"simple", "identity_float"});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(errorText(bad).rfind("unknown builtin model 'identity_float' (known: simple, ", 0), 0u);
}

TEST_F(Repository, InferFillsNamesAndKeepsOnlyRequestedOutputs) {
  codecs::InferRequest req = simpleRequest();
  req.id = "42";
  Execution e = repo_->infer(req, false);
  ASSERT_EQ(e.responses.size(), 1u);
  EXPECT_TRUE(e.responses[0].final);
  const codecs::InferResponse& r = okResponse(e);
  EXPECT_EQ(r.model_name, "simple");
  EXPECT_EQ(r.model_version, "1");
  EXPECT_EQ(r.id, "42");
  EXPECT_TRUE(r.parameters.empty());
  ASSERT_EQ(r.outputs.size(), 2u);

  req.outputs.push_back({.name = "OUTPUT1"});
  const codecs::InferResponse& only = okResponse(repo_->infer(req, false));
  ASSERT_EQ(only.outputs.size(), 1u);
  EXPECT_EQ(only.outputs[0].name, "OUTPUT1");
  EXPECT_EQ(valuesOf<int32_t>(only.outputs[0]), iota32(-1, 16));
}

TEST_F(Repository, IdentityStaysZeroCopyThroughInfer) {
  codecs::InferRequest req = testing::singleInputRequest(
      "identity_fp32", tensorInput("INPUT0", DataType::kFp32, {2, 3}, std::vector<float>(6, 1.5f)));
  req.outputs.push_back({.name = "OUTPUT0"});
  const uint8_t* bytes = req.inputs[0].data.data();
  codecs::InferResponse r = okResponse(repo_->infer(req, false));
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].data.data(), bytes);
  EXPECT_EQ(r.outputs[0].shape, (codecs::Shape{2, 3}));
}

TEST_F(Repository, InferAppliesClassification) {
  codecs::InferRequest req = simpleRequest();
  req.outputs.push_back({.name = "OUTPUT0", .classification = 2});
  req.outputs.push_back({.name = "OUTPUT1"});
  const codecs::InferResponse& r = okResponse(repo_->infer(req, false));
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].datatype, DataType::kBytes);
  EXPECT_EQ(r.outputs[0].shape, (codecs::Shape{1, 2}));
  EXPECT_EQ(stringsOf(r.outputs[0]), (std::vector<std::string>{"16:15", "15:14"}));
  EXPECT_EQ(r.outputs[1].datatype, DataType::kInt32);

  codecs::InferRequest strings;
  strings.model_name = "simple_string";
  strings.inputs.push_back(
      testing::bytesInput("INPUT0", {1, 16}, std::vector<std::string>(16, "1")));
  strings.inputs.push_back(
      testing::bytesInput("INPUT1", {1, 16}, std::vector<std::string>(16, "1")));
  strings.outputs.push_back({.name = "OUTPUT0", .classification = 1});
  Execution e = repo_->infer(strings, false);
  ASSERT_EQ(e.responses.size(), 1u);
  EXPECT_EQ(errorText(e.responses[0].response.status()),
            "class result not available for output due to unsupported type 'BYTES'");
}

TEST_F(Repository, InferRefusesBadRequestsWithoutTouchingTheModel) {
  codecs::InferRequest req = simpleRequest();
  req.model_name = "nope";
  Execution e = repo_->infer(req, true);
  ASSERT_EQ(e.responses.size(), 1u);
  EXPECT_EQ(e.responses[0].response.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(e.responses[0].final);
  EXPECT_FALSE(e.responses[0].from_model);

  req = simpleRequest();
  req.inputs.pop_back();
  e = repo_->infer(req, false);
  EXPECT_EQ(e.responses[0].response.status().code(), absl::StatusCode::kInvalidArgument);
  auto stats = repo_->statisticsProto("simple", "");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->model_stats(0).inference_stats().fail().count(), 0u);
  EXPECT_EQ(stats->model_stats(0).execution_count(), 0u);
}

codecs::InferRequest repeatRequest(std::vector<int32_t> in, std::vector<uint32_t> delay,
                                   uint32_t wait) {
  codecs::InferRequest r;
  r.model_name = "repeat_int32";
  r.id = "r1";
  r.inputs.push_back(tensorInput("IN", DataType::kInt32, {int64_t(in.size())}, in));
  r.inputs.push_back(tensorInput("DELAY", DataType::kUint32, {int64_t(delay.size())}, delay));
  r.inputs.push_back(tensorInput("WAIT", DataType::kUint32, {1}, std::vector<uint32_t>{wait}));
  return r;
}

bool finalFlag(const codecs::InferResponse& r) {
  const codecs::ParamValue* v = r.parameters.find("triton_final_response");
  EXPECT_NE(v, nullptr);
  return v != nullptr && std::get<bool>(*v);
}

TEST_F(Repository, DecoupledModelNeedsAStream) {
  Execution e = repo_->infer(repeatRequest({1}, {0}, 0), false);
  ASSERT_EQ(e.responses.size(), 1u);
  EXPECT_EQ(e.responses[0].response.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(errorText(e.responses[0].response.status()),
            "ModelInfer RPC doesn't support models with decoupled transaction policy");
}

TEST_F(Repository, DecoupledStreamMarksResponsesNotFinalAndCompletesAfterWait) {
  Execution e = repo_->infer(repeatRequest({4, 5}, {3, 2}, 9), true);
  ASSERT_EQ(e.responses.size(), 2u);
  for (size_t i = 0; i < e.responses.size(); ++i) {
    EXPECT_FALSE(e.responses[i].final);
    codecs::InferResponse r = okResponse(e, i);
    EXPECT_FALSE(finalFlag(r));
    EXPECT_EQ(r.model_name, "repeat_int32");
    EXPECT_EQ(r.model_version, "1");
    EXPECT_EQ(r.id, "r1");
    EXPECT_EQ(testing::valuesOf<int32_t>(r.outputs[0]), std::vector<int32_t>{int32_t(4 + i)});
  }
  EXPECT_EQ(e.responses[0].delay, 3ms);
  EXPECT_EQ(e.complete_after, 9ms);
}

TEST_F(Repository, DecoupledStreamAddsAnEmptyFinalResponseWhenAsked) {
  codecs::InferRequest req = repeatRequest({4, 5}, {3, 2}, 9);
  req.parameters.set("triton_enable_empty_final_response", true);
  req.outputs.push_back({.name = "IDX"});
  Execution e = repo_->infer(req, true);
  ASSERT_EQ(e.responses.size(), 3u);
  EXPECT_EQ(okResponse(e, 0).outputs.size(), 1u);
  EXPECT_EQ(okResponse(e, 0).outputs[0].name, "IDX");
  const TimedResponse& last = e.responses[2];
  EXPECT_TRUE(last.final);
  EXPECT_EQ(last.delay, 9ms);
  EXPECT_TRUE(last.response->outputs.empty());
  EXPECT_TRUE(finalFlag(*last.response));
  EXPECT_EQ(last.response->model_version, "");  // copied from the request, as Triton does
  EXPECT_EQ(last.response->id, "r1");
  EXPECT_EQ(e.complete_after, 0ms);

  Execution none = repo_->infer(
      [&] {
        codecs::InferRequest r = repeatRequest({}, {}, 1);
        r.parameters.set("triton_enable_empty_final_response", true);
        return r;
      }(),
      true);
  ASSERT_EQ(none.responses.size(), 1u);
  EXPECT_TRUE(none.responses[0].final);
}

TEST_F(Repository, ModelErrorsOnAStreamAreFinalAndFromTheModel) {
  Execution e = repo_->infer(repeatRequest({1}, {1, 2}, 0), true);
  ASSERT_EQ(e.responses.size(), 1u);
  EXPECT_TRUE(e.responses[0].final);
  EXPECT_TRUE(e.responses[0].from_model);
  auto stats = repo_->statisticsProto("repeat_int32", "1");
  EXPECT_EQ(stats->model_stats(0).inference_stats().fail().count(), 1u);
}

TEST_F(Repository, NonDecoupledStreamResponsesCarryFinalTrue) {
  Execution e = repo_->infer(simpleRequest(), true);
  EXPECT_TRUE(finalFlag(okResponse(e)));
}

TEST_F(Repository, SleepDelayIsReturnedNotSlept) {
  codecs::InferRequest req = testing::singleInputRequest(
      "sleep", tensorInput("INPUT0", DataType::kInt32, {1}, std::vector<int32_t>{30000}));
  const auto before = std::chrono::steady_clock::now();
  Execution e = repo_->infer(req, false);
  EXPECT_LT(std::chrono::steady_clock::now() - before, 10s);
  ASSERT_EQ(e.responses.size(), 1u);
  EXPECT_EQ(e.responses[0].delay, 30s);
  auto stats = repo_->statisticsProto("sleep", "");
  EXPECT_GE(stats->model_stats(0).inference_stats().compute_infer().ns(), 30'000'000'000u);
}

TEST_F(Repository, StatisticsJsonHasTritonsShape) {
  codecs::InferRequest req = simpleRequest();
  ASSERT_TRUE(okResponse(repo_->infer(req, false)).outputs.size() == 2);
  req.inputs[0] = tensorInput("INPUT0", DataType::kInt32, {2, 16}, iota32(0, 32));
  req.inputs[1] = tensorInput("INPUT1", DataType::kInt32, {2, 16}, iota32(0, 32));
  okResponse(repo_->infer(req, false));
  auto json = repo_->statisticsJson("simple", "1");
  ASSERT_TRUE(json.ok());
  const std::string& s = *json;
  EXPECT_EQ(s.rfind(R"({"model_stats":[{"name":"simple","version":"1","last_inference":)", 0), 0u)
      << s;
  EXPECT_NE(
      s.find(
          R"("inference_count":3,"execution_count":2,"inference_stats":{"success":{"count":2,"ns":)"),
      std::string::npos)
      << s;
  for (const char* key :
       {R"("fail":{"count":0,"ns":0})", R"("queue":{"count":2,)", R"("compute_input":{"count":2,)",
        R"("compute_infer":{"count":2,)", R"("compute_output":{"count":2,)",
        R"("cache_hit":{"count":0,"ns":0})",
        R"("cache_miss":{"count":0,"ns":0}},"response_stats":{"0":{"compute_infer":{"count":2,)",
        R"("batch_stats":[{"batch_size":1,"compute_input":{"count":1,)",
        R"({"batch_size":2,"compute_input":{"count":1,)", R"("memory_usage":[]}]})"}) {
    EXPECT_NE(s.find(key), std::string::npos) << key << " in " << s;
  }
  auto proto = repo_->statisticsProto("simple", "");
  ASSERT_TRUE(proto.ok());
  ASSERT_EQ(proto->model_stats_size(), 1);
  EXPECT_EQ(proto->model_stats(0).inference_count(), 3u);
  EXPECT_EQ(proto->model_stats(0).batch_stats_size(), 2);
  EXPECT_GT(proto->model_stats(0).last_inference(), 1600000000000u);
}

TEST_F(Repository, StatisticsErrorsAreInvalidArgument) {
  auto unknown = repo_->statisticsJson("nope", "");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(errorText(unknown.status()), "requested model 'nope' is not available");
  auto version = repo_->statisticsJson("simple", "3");
  EXPECT_EQ(errorText(version.status()),
            "requested model version is not available for model 'simple'");
  ASSERT_TRUE(repo_->unload("simple").ok());
  EXPECT_EQ(errorText(repo_->statisticsJson("simple", "").status()),
            "requested model 'simple' is not available");
  auto all = repo_->statisticsProto("", "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(static_cast<size_t>(all->model_stats_size()), demoModelNames().size() - 1);
}

TEST_F(Repository, SequenceStateIsDroppedOnUnload) {
  auto step = [&](bool start, int32_t v) {
    codecs::InferRequest r = testing::singleInputRequest(
        "simple_sequence", tensorInput("INPUT", DataType::kInt32, {1, 1}, std::vector<int32_t>{v}));
    r.parameters.set("sequence_id", uint64_t{77});
    r.parameters.set("sequence_start", start);
    return repo_->infer(r, false);
  };
  EXPECT_EQ(valuesOf<int32_t>(okResponse(step(true, 5)).outputs[0])[0], 5);
  ASSERT_TRUE(repo_->unload("simple_sequence").ok());
  ASSERT_TRUE(repo_->load("simple_sequence").ok());
  Execution e = step(false, 1);
  EXPECT_EQ(e.responses[0].response.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(Repository, InferIsSafeFromFourThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        codecs::InferRequest req = simpleRequest();
        req.inputs[0] = tensorInput("INPUT0", DataType::kInt32, {1, 16}, iota32(t * 1000 + i, 16));
        Execution e = repo_->infer(req, i % 2 == 0);
        if (e.responses.size() != 1 || !e.responses[0].response.ok() ||
            valuesOf<int32_t>(e.responses[0].response->outputs[0])[0] != t * 1000 + i + 1) {
          ++failures;
        }
        codecs::InferRequest seq = testing::singleInputRequest(
            "simple_sequence",
            tensorInput("INPUT", DataType::kInt32, {1, 1}, std::vector<int32_t>{1}));
        seq.parameters.set("sequence_id", uint64_t(t + 1));
        seq.parameters.set("sequence_start", i == 0);
        Execution s = repo_->infer(seq, false);
        if (!s.responses[0].response.ok() ||
            valuesOf<int32_t>(s.responses[0].response->outputs[0])[0] != i + 1) {
          ++failures;
        }
        if (i % 50 == 0) (void)repo_->statisticsJson("", "");
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto stats = repo_->statisticsProto("simple", "");
  EXPECT_EQ(stats->model_stats(0).inference_stats().success().count(), 800u);
  EXPECT_EQ(stats->model_stats(0).execution_count(), 800u);
}

}  // namespace
}  // namespace infergate::gateway::builtin
