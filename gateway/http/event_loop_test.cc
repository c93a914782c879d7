#include "gateway/http/event_loop.h"

#include <gtest/gtest.h>

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
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

// The loop thread's voluntary context switches so far (each sleep in epoll_wait is one).
long voluntarySwitches(pid_t tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
  }
  ADD_FAILURE() << "no voluntary_ctxt_switches for thread " << tid;
  return 0;
}

// Work that comes within the window finds the loop awake: it never went to sleep in
// epoll between the posts. Without the window each post wakes a sleeping thread (this
// test then sees about one switch per post, and fails). The window is long (2 s) so that
// a slow machine's gaps between posts stay inside it.
TEST(EventLoop, ABusyPollingLoopStaysAwakeBetweenCloseEventsAndStillStops) {
  constexpr int kPosts = 40;
  auto t = std::make_unique<LoopThread>(std::chrono::seconds(2));
  pid_t tid = 0;
  t->run([&] { tid = static_cast<pid_t>(::gettid()); });
  std::atomic<int> ran{0};
  const long before = voluntarySwitches(tid);
  for (int i = 0; i < kPosts; ++i) {
    t->loop().post([&] { ++ran; });
    std::this_thread::sleep_for(1ms);
  }
  // A timer fires on a polling loop as on a sleeping one.
  std::promise<void> fired;
  std::unique_ptr<LoopTimer> timer;
  t->run([&] {
    timer = std::make_unique<LoopTimer>(t->loop(), [&] { fired.set_value(); });
    timer->arm(5ms);
  });
  ASSERT_EQ(fired.get_future().wait_for(5s), std::future_status::ready);
  const long during = voluntarySwitches(tid) - before;
  t->run([&] { timer.reset(); });
  EXPECT_EQ(ran.load(), kPosts);
  EXPECT_LT(during, kPosts / 4) << "the loop slept between posts " << during << " times";
  t.reset();  // stop() and join inside the window (a loop that missed the exit would poll,
              // then sleep in epoll for good: the test would hang, not pass)
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

// armLoosely() reads the coarse clock, which lags the precise one by a tick or a few: the
// timer fires once, near the time asked (within 60 ms, fifteen 4 ms ticks, either side),
// whether it is armed loosely alone, after an earlier precise arm (which then fires first
// and finds it pushed back), or pushed back loosely again.
TEST(LoopTimer, ALooselyArmedTimerFiresOnceNearItsTime) {
  LoopThread t;
  for (int i = 0; i < 3; ++i) {
    std::atomic<int> fired{0};
    std::promise<Clock::time_point> first;
    std::unique_ptr<LoopTimer> timer;
    Clock::time_point armed;
    t.run([&] {
      timer = std::make_unique<LoopTimer>(t.loop(), [&] {
        if (fired++ == 0) first.set_value(Clock::now());
      });
      if (i == 1) timer->arm(5ms);  // a precise time, then pushed back loosely
      if (i == 2) timer->armLoosely(50ms);
      armed = Clock::now();
      timer->armLoosely(200ms);
    });
    auto f = first.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    const auto after = f.get() - armed;
    EXPECT_GE(after, 140ms) << "round " << i;
    EXPECT_LT(after, 4s) << "round " << i;
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(fired.load(), 1) << "round " << i;
    t.run([&] { timer.reset(); });
  }
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
