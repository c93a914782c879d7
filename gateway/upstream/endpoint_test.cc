// The fleet layer's parts below UpstreamFleet: the endpoint's passive and active health
// as a state machine on time points the test passes in (endpoint.h), and the Housekeeper
// thread (fleet.h) that runs the fleet's timers and destroys its last endpoints.
// Built into upstream_fleet_test with fleet_test.cc.
//
// No mocks and no sleeps: the Housekeeper's answers come through futures and condition
// variables bounded by kWait.

#include "gateway/upstream/endpoint.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gateway/upstream/fleet.h"
#include "gateway/upstream/fleet_test_util.h"

namespace infergate::gateway::upstream {
namespace {

using namespace std::chrono_literals;
using testing::Clock;
using testing::kA;
using testing::kWait;
using testing::outlier;
using testing::tcp;

config::HealthCheckConfig healthCheck(uint32_t healthy_threshold, uint32_t unhealthy_threshold) {
  config::HealthCheckConfig check;
  check.healthy_threshold = healthy_threshold;
  check.unhealthy_threshold = unhealthy_threshold;
  return check;
}

// =========================================================================================
// Endpoint: the state machine, on fixed time points
// =========================================================================================

class EndpointTest : public ::testing::Test {
 protected:
  EndpointTest() { config_.protocol = config::UpstreamConfig::Protocol::kHttp; }
  Endpoint make() { return Endpoint(config_, tcp(1), 0); }

  // `n` failures at `now` (not trials).
  static void fail(Endpoint& e, int n, Clock::time_point now, const config::OutlierConfig& o) {
    for (int i = 0; i < n; ++i) e.recordOutcome(Outcome::kFailure, false, now, o);
  }

  // `e` ejected at t0_ by `o.consecutive_failures` failures, then the half-open trial
  // claimed at `open`: a success when claimTrial() granted it, as the trial.
  ::testing::AssertionResult ejectThenClaimTrial(Endpoint& e, const config::OutlierConfig& o,
                                                 Clock::time_point open) {
    fail(e, static_cast<int>(o.consecutive_failures), t0_, o);
    bool trial = false;
    if (!e.claimTrial(open, &trial)) return ::testing::AssertionFailure() << "no claim granted";
    if (!trial) return ::testing::AssertionFailure() << "a claim granted, but not as the trial";
    return ::testing::AssertionSuccess();
  }

  config::UpstreamConfig config_;
  const Clock::time_point t0_ = Clock::time_point(1h);
};

TEST_F(EndpointTest, HttpEndpointHasNoGrpcClientAndStartsRoutableAndUnknown) {
  Endpoint e(config_, tcp(1), 1);
  EXPECT_EQ(e.grpc(), nullptr);
  EXPECT_EQ(e.key(), kA);
  EXPECT_EQ(e.tier(), 1);
  EXPECT_EQ(e.activeHealth(), ActiveHealth::kUnknown);
  EXPECT_TRUE(e.routable(t0_));
  EXPECT_FALSE(e.ejected(t0_));
  EXPECT_FALSE(e.ejectedUntil().has_value());
  bool trial = true;
  EXPECT_TRUE(e.claimTrial(t0_, &trial));  // not half open: everyone may go
  EXPECT_FALSE(trial);
}

TEST_F(EndpointTest, EjectsExactlyAtConsecutiveFailures) {
  const auto o = outlier(3, 1000, 30000);
  Endpoint e(config_, tcp(1), 0);
  fail(e, 2, t0_, o);
  EXPECT_TRUE(e.routable(t0_));
  // A success in between starts the count again.
  e.recordOutcome(Outcome::kSuccess, false, t0_, o);
  fail(e, 2, t0_, o);
  EXPECT_FALSE(e.ejectedUntil().has_value());
  EXPECT_TRUE(e.routable(t0_));
  // Neither does a neutral outcome count.
  e.recordOutcome(Outcome::kNeutral, false, t0_, o);
  EXPECT_FALSE(e.ejectedUntil().has_value());
  fail(e, 1, t0_, o);
  ASSERT_TRUE(e.ejectedUntil().has_value());
  EXPECT_EQ(*e.ejectedUntil(), t0_ + 1000ms);
  EXPECT_TRUE(e.ejected(t0_ + 999ms));
  EXPECT_FALSE(e.routable(t0_ + 999ms));
  EXPECT_FALSE(e.ejected(t0_ + 1000ms));
  // More failures of the same burst (in flight when it happened) do not eject again.
  fail(e, 5, t0_ + 10ms, o);
  EXPECT_EQ(*e.ejectedUntil(), t0_ + 1000ms);
  Endpoint::Counters c = e.counters();
  EXPECT_EQ(c.ejections, 1u);
  EXPECT_EQ(c.requests, 12u);
  EXPECT_EQ(c.failures, 10u);
  EXPECT_EQ(c.consecutive_failures, 8u);  // 2 + 1 + 5 (the neutral one neither counts nor resets)
}

TEST_F(EndpointTest, EjectionDoublesAfterEachFailedTrialUpToTheMax) {
  const auto o = outlier(2, 100, 1000);
  Endpoint e(config_, tcp(1), 0);
  fail(e, 2, t0_, o);
  ASSERT_TRUE(e.ejectedUntil().has_value());
  Clock::time_point until = *e.ejectedUntil();
  EXPECT_EQ(until, t0_ + 100ms);
  const std::chrono::milliseconds expected[] = {200ms, 400ms, 800ms, 1000ms, 1000ms};
  for (auto length : expected) {
    bool trial = false;
    EXPECT_FALSE(e.claimTrial(until - 1ns, &trial)) << "still ejected";
    ASSERT_TRUE(e.claimTrial(until, &trial));
    ASSERT_TRUE(trial);
    const Clock::time_point failed_at = until + 5ms;
    e.recordOutcome(Outcome::kFailure, true, failed_at, o);
    ASSERT_TRUE(e.ejectedUntil().has_value());
    EXPECT_EQ(*e.ejectedUntil(), failed_at + length) << "after a trial failed at +" << length.count();
    until = *e.ejectedUntil();
    EXPECT_FALSE(e.routable(until - 1ms));
  }
  EXPECT_EQ(e.counters().ejections, 6u);
  EXPECT_EQ(e.counters().readmissions, 0u);
  // Readmitted, the next ejection starts from the base again.
  bool trial = false;
  ASSERT_TRUE(e.claimTrial(until, &trial));
  e.recordOutcome(Outcome::kSuccess, true, until, o);
  EXPECT_FALSE(e.ejectedUntil().has_value());
  fail(e, 2, until + 1s, o);
  ASSERT_TRUE(e.ejectedUntil().has_value());
  EXPECT_EQ(*e.ejectedUntil(), until + 1s + 100ms);
}

TEST_F(EndpointTest, HalfOpenTrialGoesToExactlyOneClaimant) {
  const auto o = outlier(1, 100, 1000);
  Endpoint e(config_, tcp(1), 0);
  fail(e, 1, t0_, o);
  const Clock::time_point open = t0_ + 100ms;
  EXPECT_TRUE(e.routable(open));  // half open: routable while nobody holds the trial
  EXPECT_FALSE(e.ejected(open));
  bool trial = false;
  ASSERT_TRUE(e.claimTrial(open, &trial));
  EXPECT_TRUE(trial);
  EXPECT_FALSE(e.routable(open + 1ms));
  for (int i = 0; i < 10; ++i) {
    bool other = true;
    EXPECT_FALSE(e.claimTrial(open + 1ms, &other));
    EXPECT_FALSE(other);
  }
  // From many threads at once, still one.
  Endpoint f(config_, tcp(2), 0);
  fail(f, 1, t0_, o);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 100; ++j) {
        bool t = false;
        if (f.claimTrial(open, &t) && t) granted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 1);
}

TEST_F(EndpointTest, SuccessfulTrialReadmits) {
  const auto o = outlier(3, 100, 1000);
  Endpoint e(config_, tcp(1), 0);
  const Clock::time_point open = t0_ + 100ms;
  ASSERT_TRUE(ejectThenClaimTrial(e, o, open));
  // A request sent before the ejection succeeding is no trial: nothing changes.
  e.recordOutcome(Outcome::kSuccess, false, open, o);
  EXPECT_TRUE(e.ejectedUntil().has_value());
  EXPECT_FALSE(e.routable(open));
  e.recordOutcome(Outcome::kSuccess, true, open + 1ms, o);
  EXPECT_FALSE(e.ejectedUntil().has_value());
  EXPECT_TRUE(e.routable(open + 1ms));
  bool again = true;
  EXPECT_TRUE(e.claimTrial(open + 1ms, &again));
  EXPECT_FALSE(again);
  Endpoint::Counters c = e.counters();
  EXPECT_EQ(c.readmissions, 1u);
  EXPECT_EQ(c.ejections, 1u);
  EXPECT_EQ(c.consecutive_failures, 0u);
  // The count starts over: two failures do not eject, the third does.
  fail(e, 2, open + 2ms, o);
  EXPECT_TRUE(e.routable(open + 2ms));
  fail(e, 1, open + 2ms, o);
  EXPECT_FALSE(e.routable(open + 2ms));
}

TEST_F(EndpointTest, NeutralTrialFreesTheTrialForAnotherClaimant) {
  const auto o = outlier(3, 100, 1000);
  Endpoint e(config_, tcp(1), 0);
  const Clock::time_point open = t0_ + 100ms;
  ASSERT_TRUE(ejectThenClaimTrial(e, o, open));
  e.recordOutcome(Outcome::kNeutral, true, open, o);
  // Still half open (not readmitted), with the trial free again.
  EXPECT_TRUE(e.ejectedUntil().has_value());
  EXPECT_TRUE(e.routable(open));
  bool second = false;
  ASSERT_TRUE(e.claimTrial(open, &second));
  EXPECT_TRUE(second);
  bool third = true;
  EXPECT_FALSE(e.claimTrial(open, &third));
  EXPECT_EQ(e.counters().readmissions, 0u);
  EXPECT_EQ(e.counters().ejections, 1u);
}

TEST_F(EndpointTest, ZeroConsecutiveFailuresNeverEjects) {
  const auto o = outlier(0, 100, 1000);
  Endpoint e(config_, tcp(1), 0);
  fail(e, 1000, t0_, o);
  EXPECT_FALSE(e.ejectedUntil().has_value());
  EXPECT_TRUE(e.routable(t0_));
  EXPECT_EQ(e.counters().ejections, 0u);
  EXPECT_EQ(e.counters().failures, 1000u);
}

// A reload turned passive ejection off while the endpoint was ejected (the endpoint is
// kept, the outlier settings come from the new fleet): its trial, failing, must not leave
// the trial taken for good, which would keep the endpoint out of every pick.
TEST_F(EndpointTest, TrialEndingAfterEjectionWasTurnedOffReadmits) {
  Endpoint e(config_, tcp(1), 0);
  const Clock::time_point open = t0_ + 100ms;
  ASSERT_TRUE(ejectThenClaimTrial(e, outlier(3, 100, 1000), open));
  e.recordOutcome(Outcome::kFailure, true, open, outlier(0, 100, 1000));
  EXPECT_TRUE(e.routable(open + 1s));
  EXPECT_FALSE(e.ejectedUntil().has_value());
  EXPECT_EQ(e.counters().ejections, 1u);
}

TEST_F(EndpointTest, FirstProbeDecidesAnUnknownEndpoint) {
  const config::HealthCheckConfig check = healthCheck(3, 3);
  Endpoint good(config_, tcp(1), 0);
  EXPECT_TRUE(good.recordProbe(true, check));
  EXPECT_EQ(good.activeHealth(), ActiveHealth::kHealthy);
  EXPECT_FALSE(good.recordProbe(true, check));  // no change

  Endpoint bad(config_, tcp(2), 0);
  EXPECT_TRUE(bad.recordProbe(false, check));
  EXPECT_EQ(bad.activeHealth(), ActiveHealth::kUnhealthy);
  EXPECT_FALSE(bad.routable(t0_));
  bool trial = false;
  EXPECT_EQ(bad.counters().probes_bad, 1u);
  EXPECT_STREQ(activeHealthName(bad.activeHealth()), "unhealthy");
  EXPECT_TRUE(bad.claimTrial(t0_, &trial));  // not ejected: claimTrial has no say
}

TEST_F(EndpointTest, HealthyTurnsUnhealthyOnlyAfterThresholdBadProbesInARow) {
  const config::HealthCheckConfig check = healthCheck(2, 3);
  Endpoint e(config_, tcp(1), 0);
  ASSERT_TRUE(e.recordProbe(true, check));
  EXPECT_FALSE(e.recordProbe(false, check));
  EXPECT_FALSE(e.recordProbe(false, check));
  EXPECT_FALSE(e.recordProbe(true, check));  // the streak is broken
  EXPECT_FALSE(e.recordProbe(false, check));
  EXPECT_FALSE(e.recordProbe(false, check));
  EXPECT_EQ(e.activeHealth(), ActiveHealth::kHealthy);
  EXPECT_TRUE(e.routable(t0_));
  EXPECT_EQ(e.counters().bad_streak, 2u);
  EXPECT_TRUE(e.recordProbe(false, check));
  EXPECT_EQ(e.activeHealth(), ActiveHealth::kUnhealthy);
  EXPECT_FALSE(e.routable(t0_));
  EXPECT_EQ(e.counters().probes_bad, 5u);
  EXPECT_EQ(e.counters().probes_good, 2u);
}

TEST_F(EndpointTest, UnhealthyTurnsHealthyOnlyAfterThresholdGoodProbesAndReadmits) {
  const config::HealthCheckConfig check = healthCheck(3, 1);
  const auto o = outlier(2, 60000, 60000);
  Endpoint e(config_, tcp(1), 0);
  fail(e, 2, t0_, o);  // passively ejected for a minute
  ASSERT_TRUE(e.ejectedUntil().has_value());
  ASSERT_TRUE(e.recordProbe(false, check));
  ASSERT_EQ(e.activeHealth(), ActiveHealth::kUnhealthy);
  EXPECT_FALSE(e.recordProbe(true, check));
  EXPECT_FALSE(e.recordProbe(true, check));
  EXPECT_FALSE(e.recordProbe(false, check));  // the streak is broken
  EXPECT_FALSE(e.recordProbe(true, check));
  EXPECT_FALSE(e.recordProbe(true, check));
  EXPECT_EQ(e.activeHealth(), ActiveHealth::kUnhealthy);
  EXPECT_EQ(e.counters().good_streak, 2u);
  EXPECT_TRUE(e.recordProbe(true, check));
  EXPECT_EQ(e.activeHealth(), ActiveHealth::kHealthy);
  // Back from unhealthy: the passive ejection is over too.
  EXPECT_FALSE(e.ejectedUntil().has_value());
  EXPECT_TRUE(e.routable(t0_ + 1ms));
  EXPECT_EQ(e.counters().readmissions, 1u);
  EXPECT_EQ(e.counters().consecutive_failures, 0u);
}

TEST_F(EndpointTest, TryReserveRespectsTheCap) {
  Endpoint e(config_, tcp(1), 0);
  EXPECT_TRUE(e.tryReserve(2));
  EXPECT_TRUE(e.tryReserve(2));
  EXPECT_FALSE(e.tryReserve(2));
  EXPECT_EQ(e.outstanding(), 2u);
  e.unreserve();
  EXPECT_EQ(e.outstanding(), 1u);
  EXPECT_TRUE(e.tryReserve(2));
  EXPECT_FALSE(e.tryReserve(2));
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(e.tryReserve(0));  // 0: no cap
  EXPECT_EQ(e.outstanding(), 102u);
}

TEST_F(EndpointTest, QueueSignalIsOutstandingPlusTheScrapedQueue) {
  Endpoint e(config_, tcp(1), 0);
  ASSERT_TRUE(e.tryReserve(0));
  ASSERT_TRUE(e.tryReserve(0));
  EXPECT_EQ(e.queueSignal(), 2u);
  e.setScrapedQueue(7);
  EXPECT_EQ(e.queueSignal(), 9u);
  e.unreserve();
  EXPECT_EQ(e.queueSignal(), 8u);  // moves with every request between scrapes
  e.setScrapedQueue(0);
  EXPECT_EQ(e.queueSignal(), 1u);
  e.setScrapedQueue(std::nullopt);
  EXPECT_EQ(e.queueSignal(), 1u);
}

// =========================================================================================
// Housekeeper
// =========================================================================================

// Holds the housekeeper's thread in a task until release() (or the destructor), so that
// the tasks a test adds meanwhile are all queued before any runs.
class HousekeeperHold {
 public:
  HousekeeperHold() {
    auto released = released_.get_future().share();
    auto holding = std::make_shared<std::promise<void>>();
    auto held = holding->get_future();
    Housekeeper::instance().post([released, holding] {
      holding->set_value();
      released.wait_for(kWait);
    });
    EXPECT_EQ(held.wait_for(kWait), std::future_status::ready);
  }
  ~HousekeeperHold() { release(); }
  void release() {
    if (!done_) released_.set_value();
    done_ = true;
  }

 private:
  std::promise<void> released_;
  bool done_ = false;
};

TEST(Housekeeper, RunsTasksInTimeOrder) {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<int> order;
  auto record = [&](int n) {
    return [&, n] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(n);
      changed.notify_all();
    };
  };
  {
    HousekeeperHold hold;
    const Clock::time_point base = Clock::now();
    Housekeeper::instance().at(base + 30ms, record(3));
    Housekeeper::instance().at(base + 10ms, record(1));
    Housekeeper::instance().at(base + 20ms, record(2));
    Housekeeper::instance().post(record(0));
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(changed.wait_for(lock, kWait, [&] { return order.size() == 4; }));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Housekeeper, CancelledTaskDoesNotRun) {
  std::atomic<bool> cancelled_ran{false}, kept_ran{false};
  uint64_t later = 0;
  {
    HousekeeperHold hold;
    const Clock::time_point now = Clock::now();
    uint64_t cancelled = Housekeeper::instance().at(now, [&] { cancelled_ran = true; });
    Housekeeper::instance().at(now, [&] { kept_ran = true; });
    later = Housekeeper::instance().at(now + 1h, [&] { cancelled_ran = true; });
    Housekeeper::instance().cancel(cancelled);
    Housekeeper::instance().cancel(987654321);  // unknown: ignored
  }
  Housekeeper::instance().drain();  // does not wait for the task an hour away
  EXPECT_TRUE(kept_ran.load());
  EXPECT_FALSE(cancelled_ran.load());
  Housekeeper::instance().cancel(later);
}

TEST(Housekeeper, DrainWaitsForDueTasks) {
  std::atomic<int> ran{0};
  {
    HousekeeperHold hold;
    for (int i = 0; i < 100; ++i) Housekeeper::instance().post([&] { ran.fetch_add(1); });
  }
  Housekeeper::instance().drain();
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace infergate::gateway::upstream
