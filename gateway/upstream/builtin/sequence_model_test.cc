#include "gateway/upstream/builtin/sequence_model.h"

#include <gtest/gtest.h>

#include "gateway/upstream/builtin/builtin_test_util.h"

namespace infergate::gateway::builtin {
namespace {

using codecs::DataType;
using namespace std::chrono_literals;
using testing::tensorInput;
using testing::valuesOf;

// A clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  SteadyClock fn() {
    return [this] { return now; };
  }
};

codecs::InferRequest step(codecs::ParamValue id, int32_t value, bool start = false,
                          bool end = false, int64_t batch = 1) {
  codecs::InferRequest r;
  r.model_name = "simple_sequence";
  r.parameters.set("sequence_id", std::move(id));
  r.parameters.set("sequence_start", start);
  r.parameters.set("sequence_end", end);
  r.inputs.push_back(tensorInput("INPUT", DataType::kInt32, {batch, 1},
                                 std::vector<int32_t>(static_cast<size_t>(batch), value)));
  return r;
}

// The accumulator the model answered, or the error text.
std::string run(Model& model, const codecs::InferRequest& request) {
  Execution e = model.execute(request);
  EXPECT_EQ(e.responses.size(), 1u);
  const auto& r = e.responses[0].response;
  if (!r.ok()) return std::string(codecs::messageOf(r.status()));
  EXPECT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "OUTPUT");
  EXPECT_EQ(r->outputs[0].shape, (codecs::Shape{1, 1}));
  return std::to_string(valuesOf<int32_t>(r->outputs[0])[0]);
}

TEST(SequenceModel, AccumulatesPerCorrelationIdAcrossInterleavedSequences) {
  auto model = makeSequenceModel({});
  EXPECT_TRUE(model->spec().sequence);
  EXPECT_EQ(model->spec().max_batch_size, 8);
  EXPECT_EQ(run(*model, step(uint64_t{1000}, 0, true)), "0");
  EXPECT_EQ(run(*model, step(uint64_t{1001}, 100, true)), "100");
  for (int32_t v : {11, 7, 5}) {
    run(*model, step(uint64_t{1000}, v));
    run(*model, step(uint64_t{1001}, -v));
  }
  EXPECT_EQ(run(*model, step(uint64_t{1000}, 1, false, true)), "24");
  EXPECT_EQ(run(*model, step(uint64_t{1001}, -1, false, true)), "76");
}

TEST(SequenceModel, StringAndIntegerIdsAreDistinct) {
  auto model = makeSequenceModel({});
  EXPECT_EQ(run(*model, step(std::string("5"), 10, true)), "10");
  EXPECT_EQ(run(*model, step(uint64_t{5}, 1, true)), "1");
  EXPECT_EQ(run(*model, step(int64_t{5}, 2)), "3");  // gRPC int64_param: the same id as 5
  EXPECT_EQ(run(*model, step(std::string("5"), 3)), "13");
}

TEST(SequenceModel, StartResetsALiveSequenceAndEndDropsIt) {
  auto model = makeSequenceModel({});
  EXPECT_EQ(run(*model, step(uint64_t{9}, 4, true)), "4");
  EXPECT_EQ(run(*model, step(uint64_t{9}, 4)), "8");
  EXPECT_EQ(run(*model, step(uint64_t{9}, 50, true)), "50");
  EXPECT_EQ(run(*model, step(uint64_t{9}, 1, false, true)), "51");
  EXPECT_EQ(run(*model, step(uint64_t{9}, 1)),
            "inference request for sequence 9 to model 'simple_sequence' must specify the START "
            "flag on the first request of the sequence");
  EXPECT_EQ(run(*model, step(uint64_t{9}, 6, true, true)), "6");  // start and end at once
}

TEST(SequenceModel, RefusesRequestsWithoutACorrelationId) {
  auto model = makeSequenceModel({});
  const std::string expected =
      "inference request to model 'simple_sequence' must specify a non-zero or non-empty "
      "correlation ID";
  EXPECT_EQ(run(*model, step(uint64_t{0}, 1, true)), expected);
  EXPECT_EQ(run(*model, step(std::string(), 1, true)), expected);
  codecs::InferRequest none = step(uint64_t{1}, 1, true);
  none.parameters.erase("sequence_id");
  EXPECT_EQ(run(*model, none), expected);
  Execution e = model->execute(none);
  EXPECT_EQ(e.responses[0].response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(e.responses[0].from_model);  // the sequence batcher refused it
}

TEST(SequenceModel, RefusesBatchesLargerThanOne) {
  auto model = makeSequenceModel({});
  EXPECT_EQ(run(*model, step(uint64_t{1}, 1, true, false, 2)),
            "inference request to model 'simple_sequence' must specify batch-size 1 due to "
            "requirements of sequence batcher");
}

TEST(SequenceStore, DropsSequencesIdleLongerThanTheLimit) {
  FakeClock clock;
  SequenceStore store(10s, 100, clock.fn());
  CorrelationId a{false, 1, ""};
  CorrelationId b{false, 2, ""};
  ASSERT_TRUE(store.apply(a, true, false, 1, "m").ok());
  clock.now += 6s;
  ASSERT_TRUE(store.apply(b, true, false, 1, "m").ok());
  clock.now += 6s;  // a idle 12 s, b 6 s
  EXPECT_EQ(*store.apply(b, false, false, 1, "m"), 2);
  EXPECT_EQ(store.size(), 1u);
  auto gone = store.apply(a, false, false, 1, "m");
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SequenceStore, EvictsTheLeastRecentlyUsedPastTheCap) {
  FakeClock clock;
  SequenceStore store(1h, 3, clock.fn());
  for (uint64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(store.apply({false, id, ""}, true, false, 0, "m").ok());
  ASSERT_TRUE(store.apply({false, 1, ""}, false, false, 5, "m").ok());  // 1 is now the newest
  ASSERT_TRUE(store.apply({false, 4, ""}, true, false, 0, "m").ok());   // evicts 2
  EXPECT_EQ(store.size(), 3u);
  EXPECT_FALSE(store.apply({false, 2, ""}, false, false, 0, "m").ok());
  EXPECT_EQ(*store.apply({false, 1, ""}, false, false, 1, "m"), 6);
  EXPECT_TRUE(store.apply({false, 3, ""}, false, false, 0, "m").ok());
  store.clear();
  EXPECT_EQ(store.size(), 0u);
}

}  // namespace
}  // namespace infergate::gateway::builtin
