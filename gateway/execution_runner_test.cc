#include "gateway/execution_runner.h"

#include <gtest/gtest.h>

#include <future>

#include "gateway/http/worker_pool.h"

namespace infergate::gateway {
namespace {

builtin::TimedResponse response(std::string id, int delay_ms, bool final = false) {
  codecs::InferResponse r;
  r.id = std::move(id);
  return builtin::TimedResponse{r, std::chrono::milliseconds(delay_ms), final, false};
}

TEST(ExecutionRunner, EmitsInOrderAfterTheirDelaysAndMarksTheLastFinal) {
  http::WorkerPool pool(1);
  pool.start();
  builtin::Execution execution;
  execution.responses = {response("a", 0), response("b", 30), response("c", 10)};
  std::promise<std::vector<std::pair<std::string, bool>>> done;
  auto seen = std::make_shared<std::vector<std::pair<std::string, bool>>>();
  auto start = std::chrono::steady_clock::now();
  pool.loop(0).post([&] {
    runExecution(pool.loop(0), std::move(execution), nullptr, [&, seen](Emission e) {
      seen->emplace_back(e.response->id, e.final);
      if (e.final) done.set_value(*seen);
    });
  });
  auto result = done.get_future().get();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(40));
  EXPECT_EQ(result, (std::vector<std::pair<std::string, bool>>{{"a", false}, {"b", false}, {"c", true}}));
  pool.stop();
}

TEST(ExecutionRunner, CompletesWithAnEmptyFinalAfterCompleteAfter) {
  http::WorkerPool pool(1);
  pool.start();
  builtin::Execution execution;
  execution.responses = {response("a", 0)};
  execution.complete_after = std::chrono::milliseconds(5);
  std::promise<bool> done;
  pool.loop(0).post([&] {
    runExecution(pool.loop(0), std::move(execution), nullptr, [&](Emission e) {
      if (e.final) done.set_value(e.empty);
    });
  });
  EXPECT_TRUE(done.get_future().get());
  pool.stop();
}

TEST(ExecutionRunner, CancelledLongWaitEndsWithoutEmittingAndWithoutLeaking) {
  http::WorkerPool pool(1);
  pool.start();
  builtin::Execution execution;
  execution.responses = {response("late", 60'000)};
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  std::atomic<int> emitted{0};
  pool.loop(0).post([&] {
    runExecution(pool.loop(0), std::move(execution), cancelled, [&](Emission) { ++emitted; });
  });
  cancelled->store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // a few cancel-check slices
  EXPECT_EQ(emitted.load(), 0);
  pool.stop();  // LeakSanitizer fails the test if the runner were still alive and owned
}

}  // namespace
}  // namespace infergate::gateway
