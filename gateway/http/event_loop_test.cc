#include "gateway/http/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gateway/http/loop_thread_testing.h"

namespace infergate::gateway::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;


TEST(EventLoop, TasksTheLoopPostsItselfRunAfterTheCurrentOneInOrder) {
  LoopThread t;
  std::vector<std::string> order;  // loop thread only
  std::promise<void> done;
  t.loop().post([&] {
    t.loop().post([&] { order.push_back("self 1"); });
    t.loop().post([&] {
      order.push_back("self 2");
      t.loop().post([&] { done.set_value(); });  // posted from a self-posted task too
    });
    order.push_back("outer");
  });
  ASSERT_EQ(done.get_future().wait_for(5s), std::future_status::ready);
  t.run([&] { EXPECT_EQ(order, (std::vector<std::string>{"outer", "self 1", "self 2"})); });
}

TEST(EventLoop, PostsFromTheLoopAndFromOtherThreadsAtOnceAllRun) {
  LoopThread t;
  constexpr int kEach = 2000;
  std::atomic<int> ran{0};
  std::thread remote([&] {
    for (int i = 0; i < kEach; ++i) t.loop().post([&] { ++ran; });
  });
  for (int i = 0; i < kEach; ++i) {
    t.loop().post([&] { t.loop().post([&] { ++ran; }); });  // each one posts again from the loop
  }
  remote.join();
  const auto until = Clock::now() + 5s;
  while (ran.load() < 2 * kEach && Clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(ran.load(), 2 * kEach);
}

TEST(LoopTimer, FiresOnceAfterItsTime) {
  LoopThread t;
  std::atomic<int> fired{0};
  std::unique_ptr<LoopTimer> timer;
  Clock::time_point armed;
  std::promise<Clock::time_point> first;
  t.run([&] {
    timer = std::make_unique<LoopTimer>(t.loop(), [&] {
      if (fired++ == 0) first.set_value(Clock::now());
    });
    armed = Clock::now();
    timer->arm(30ms);
  });
  auto f = first.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_GE(f.get() - armed, 30ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fired.load(), 1);
  t.run([&] { timer.reset(); });
}

TEST(LoopTimer, ArmingAgainLaterPushesTheTimeBackAndEarlierBringsItForward) {
  LoopThread t;
  std::promise<Clock::time_point> fired;
  std::unique_ptr<LoopTimer> timer;
  Clock::time_point armed;
  t.run([&] {
    timer = std::make_unique<LoopTimer>(t.loop(), [&] { fired.set_value(Clock::now()); });
    timer->arm(20ms);
    armed = Clock::now();
    timer->arm(150ms);  // later: the first time no longer counts
  });
  auto f = fired.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_GE(f.get() - armed, 150ms);

  std::promise<Clock::time_point> again;
  t.run([&] {
    timer = std::make_unique<LoopTimer>(t.loop(), [&] { again.set_value(Clock::now()); });
    timer->arm(10s);
    armed = Clock::now();
    timer->arm(20ms);  // earlier: honoured
  });
  auto g = again.get_future();
  ASSERT_EQ(g.wait_for(5s), std::future_status::ready);
  EXPECT_LT(g.get() - armed, 5s);
  t.run([&] { timer.reset(); });
}

TEST(LoopTimer, ADisarmedTimerNeverFiresAndCanBeArmedAgain) {
  LoopThread t;
  std::atomic<int> fired{0};
  std::unique_ptr<LoopTimer> timer;
  t.run([&] {
    timer = std::make_unique<LoopTimer>(t.loop(), [&] { ++fired; });
    timer->arm(20ms);
    timer->disarm();
  });
  std::this_thread::sleep_for(120ms);
  EXPECT_EQ(fired.load(), 0);
  t.run([&] { timer->arm(10ms); });
  std::this_thread::sleep_for(120ms);
  EXPECT_EQ(fired.load(), 1);
  t.run([&] { timer.reset(); });
}

}  // namespace
}  // namespace infergate::gateway::http
