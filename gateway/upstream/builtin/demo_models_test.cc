#include "gateway/upstream/builtin/demo_models.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "gateway/upstream/builtin/builtin_test_util.h"

namespace infergate::gateway::builtin {
namespace {

using codecs::DataType;
using namespace std::chrono_literals;
using testing::bytesInput;
using testing::iota32;
using testing::simpleRequest;
using testing::singleInputRequest;
using testing::stringsOf;
using testing::tensorInput;
using testing::valuesOf;

codecs::InferResponse onlyResponse(const Execution& e) {
  EXPECT_EQ(e.responses.size(), 1u);
  if (e.responses.empty() || !e.responses[0].response.ok()) {
    ADD_FAILURE() << (e.responses.empty() ? "no response"
                                          : e.responses[0].response.status().ToString());
    return {};
  }
  return *e.responses[0].response;
}

TEST(DemoModels, NamesCoverEveryFamilyAndAllFourteenIdentityTypes) {
  std::vector<std::string> names = demoModelNames();
  EXPECT_EQ(names.size(), 5u + 14u);
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
  for (const char* n : {"simple", "simple_string", "simple_sequence", "repeat_int32", "sleep",
                        "identity_fp32", "identity_bytes", "identity_bf16", "identity_bool",
                        "identity_uint64", "identity_fp16", "identity_int8"}) {
    EXPECT_TRUE(unique.count(n)) << n;
  }
  for (const std::string& n : names) {
    std::shared_ptr<Model> model = makeDemoModel(n);
    ASSERT_NE(model, nullptr) << n;
    EXPECT_EQ(model->spec().name, n);
    EXPECT_EQ(model->spec().platform, "builtin");
    EXPECT_EQ(model->spec().versions, std::vector<std::string>{"1"});
  }
  EXPECT_EQ(makeDemoModel("nope"), nullptr);
}

TEST(SimpleModel, AddsAndSubtractsLikeTritonsExample) {
  auto model = makeSimpleModel();
  EXPECT_EQ(model->spec().max_batch_size, 8);
  const codecs::InferResponse& r = onlyResponse(model->execute(simpleRequest()));
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].name, "OUTPUT0");
  EXPECT_EQ(r.outputs[0].datatype, DataType::kInt32);
  EXPECT_EQ(r.outputs[0].shape, (codecs::Shape{1, 16}));
  EXPECT_EQ(valuesOf<int32_t>(r.outputs[0]), iota32(1, 16));
  EXPECT_EQ(r.outputs[1].name, "OUTPUT1");
  EXPECT_EQ(valuesOf<int32_t>(r.outputs[1]), iota32(-1, 16));
}

TEST(SimpleModel, WrapsOnInt32Overflow) {
  codecs::InferRequest req = simpleRequest();
  req.inputs[0] = tensorInput("INPUT0", DataType::kInt32, {1, 16},
                              std::vector<int32_t>(16, std::numeric_limits<int32_t>::max()));
  const codecs::InferResponse& r = onlyResponse(makeSimpleModel()->execute(req));
  EXPECT_EQ(valuesOf<int32_t>(r.outputs[0])[0], std::numeric_limits<int32_t>::min());
}

TEST(SimpleStringModel, WorksOnDecimalStrings) {
  codecs::InferRequest req;
  req.model_name = "simple_string";
  std::vector<std::string> a, b;
  for (int i = 0; i < 16; ++i) {
    a.push_back(std::to_string(i));
    b.push_back("1");
  }
  a[3] = "-7";
  req.inputs.push_back(bytesInput("INPUT0", {1, 16}, a));
  req.inputs.push_back(bytesInput("INPUT1", {1, 16}, b));
  const codecs::InferResponse& r = onlyResponse(makeSimpleStringModel()->execute(req));
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].datatype, DataType::kBytes);
  EXPECT_EQ(r.outputs[0].shape, (codecs::Shape{1, 16}));
  std::vector<std::string> sum = stringsOf(r.outputs[0]);
  std::vector<std::string> diff = stringsOf(r.outputs[1]);
  ASSERT_EQ(sum.size(), 16u);
  EXPECT_EQ(sum[0], "1");
  EXPECT_EQ(sum[3], "-6");
  EXPECT_EQ(sum[15], "16");
  EXPECT_EQ(diff[0], "-1");
  EXPECT_EQ(diff[15], "14");
}

TEST(SimpleStringModel, RejectsANonNumericElement) {
  codecs::InferRequest req;
  req.model_name = "simple_string";
  std::vector<std::string> a(16, "2"), b(16, "1");
  a[5] = "abc";
  req.inputs.push_back(bytesInput("INPUT0", {1, 16}, a));
  req.inputs.push_back(bytesInput("INPUT1", {1, 16}, b));
  Execution e = makeSimpleStringModel()->execute(req);
  ASSERT_EQ(e.responses.size(), 1u);
  const auto& status = e.responses[0].response.status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codecs::messageOf(status),
            "simple_string: element 5 of input 'INPUT0' ('abc') is not a decimal int32");
  EXPECT_TRUE(e.responses[0].from_model);
}

TEST(IdentityModel, ReturnsTheInputBufferItselfForEveryType) {
  for (DataType type : codecs::kAllDataTypes) {
    auto model = makeIdentityModel(type);
    EXPECT_EQ(model->spec().max_batch_size, 8);
    EXPECT_EQ(model->spec().inputs[0].dims, (codecs::Shape{-1}));
    codecs::InferInput in;
    in.name = "INPUT0";
    in.datatype = type;
    in.shape = {2, 3};
    in.data = type == DataType::kBytes
                  ? codecs::Buffer::fromString(
                        codecs::serializeBytesElements({"a", "", "ccc", "d", "e", "\xff"}))
                  : codecs::Buffer::fromString(std::string(6 * codecs::elementSize(type), '\x5a'));
    const codecs::InferResponse& r =
        onlyResponse(model->execute(singleInputRequest(model->spec().name, in)));
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].name, "OUTPUT0");
    EXPECT_EQ(r.outputs[0].datatype, type);
    EXPECT_EQ(r.outputs[0].shape, in.shape);
    EXPECT_EQ(r.outputs[0].data.data(), in.data.data()) << "zero copy for " << model->spec().name;
    EXPECT_EQ(r.outputs[0].data.owner(), in.data.owner());
  }
}

TEST(SleepModel, AnswersAfterTheRequestedDelay) {
  auto model = makeSleepModel();
  EXPECT_EQ(model->spec().max_batch_size, 0);
  Execution e = model->execute(singleInputRequest(
      "sleep", tensorInput("INPUT0", DataType::kInt32, {1}, std::vector<int32_t>{250})));
  ASSERT_EQ(e.responses.size(), 1u);
  EXPECT_EQ(e.responses[0].delay, 250ms);
  EXPECT_EQ(valuesOf<int32_t>(e.responses[0].response->outputs[0]), std::vector<int32_t>{250});
}

TEST(SleepModel, ClampsToSixtySecondsAndRefusesNegativeDelays) {
  auto model = makeSleepModel();
  Execution e = model->execute(singleInputRequest(
      "sleep", tensorInput("INPUT0", DataType::kInt32, {1}, std::vector<int32_t>{600000})));
  EXPECT_EQ(e.responses[0].delay, 60s);
  EXPECT_EQ(valuesOf<int32_t>(e.responses[0].response->outputs[0]), std::vector<int32_t>{600000});
  e = model->execute(singleInputRequest(
      "sleep", tensorInput("INPUT0", DataType::kInt32, {1}, std::vector<int32_t>{-5})));
  EXPECT_EQ(e.responses[0].response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codecs::messageOf(e.responses[0].response.status()),
            "sleep: INPUT0 must be a non-negative number of milliseconds, got -5");
}

codecs::InferRequest repeatRequest(std::vector<int32_t> in, std::vector<uint32_t> delay,
                                   uint32_t wait) {
  codecs::InferRequest r;
  r.model_name = "repeat_int32";
  const int64_t n_in = static_cast<int64_t>(in.size());
  const int64_t n_delay = static_cast<int64_t>(delay.size());
  r.inputs.push_back(tensorInput("IN", DataType::kInt32, {n_in}, in));
  r.inputs.push_back(tensorInput("DELAY", DataType::kUint32, {n_delay}, delay));
  r.inputs.push_back(tensorInput("WAIT", DataType::kUint32, {1}, std::vector<uint32_t>{wait}));
  return r;
}

TEST(RepeatModel, EmitsOneResponsePerElementThenCompletesAfterWait) {
  auto model = makeRepeatModel();
  EXPECT_TRUE(model->spec().decoupled);
  Execution e = model->execute(repeatRequest({7, 8, 9}, {10, 0, 30}, 40));
  ASSERT_EQ(e.responses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const TimedResponse& r = e.responses[i];
    ASSERT_TRUE(r.response.ok());
    EXPECT_FALSE(r.final);
    ASSERT_EQ(r.response->outputs.size(), 2u);
    EXPECT_EQ(r.response->outputs[0].name, "OUT");
    EXPECT_EQ(r.response->outputs[0].shape, (codecs::Shape{1}));
    EXPECT_EQ(valuesOf<int32_t>(r.response->outputs[0]),
              std::vector<int32_t>{7 + static_cast<int32_t>(i)});
    EXPECT_EQ(r.response->outputs[1].name, "IDX");
    EXPECT_EQ(r.response->outputs[1].datatype, DataType::kUint32);
    EXPECT_EQ(valuesOf<uint32_t>(r.response->outputs[1]), std::vector<uint32_t>{uint32_t(i)});
  }
  EXPECT_EQ(e.responses[0].delay, 10ms);
  EXPECT_EQ(e.responses[1].delay, 0ms);
  EXPECT_EQ(e.responses[2].delay, 30ms);
  EXPECT_EQ(e.complete_after, 40ms);
}

TEST(RepeatModel, EmptyInputGivesNoResponse) {
  Execution e = makeRepeatModel()->execute(repeatRequest({}, {}, 5));
  EXPECT_TRUE(e.responses.empty());
  EXPECT_EQ(e.complete_after, 5ms);
}

TEST(RepeatModel, RefusesMismatchedInAndDelayLikeTheTritonBackend) {
  Execution e = makeRepeatModel()->execute(repeatRequest({1}, {0, 0}, 0));
  ASSERT_EQ(e.responses.size(), 1u);
  EXPECT_EQ(codecs::messageOf(e.responses[0].response.status()),
            "expected IN and DELAY shape to match, got [1] and [2]");
  EXPECT_TRUE(e.responses[0].final);
  EXPECT_TRUE(e.responses[0].from_model);
}

}  // namespace
}  // namespace infergate::gateway::builtin
