#include "routing/retry_budget.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace infergate::routing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = RetryBudget::Clock;

// Synthetic time: no test reads the clock. Second 1000, exactly.
const Clock::time_point kStart = Clock::time_point() + seconds(1000);

// How many tryRetry() at `now` say yes before the first no (at most `limit` tried).
size_t retriesAllowed(RetryBudget& budget, Clock::time_point now, size_t limit = 100000) {
  size_t allowed = 0;
  while (allowed < limit && budget.tryRetry(now)) ++allowed;
  return allowed;
}

void recordRequests(RetryBudget& budget, Clock::time_point now, size_t n) {
  for (size_t i = 0; i < n; ++i) budget.recordRequest(now);
}

TEST(RetryBudget, MinimumPerSecondAllowedWithoutRequests) {
  RetryBudget budget(20, 3);
  EXPECT_EQ(retriesAllowed(budget, kStart), 30u);  // 3 per second over the 10 s window
  EXPECT_EQ(budget.exhausted(), 1u);
}

TEST(RetryBudget, NothingAllowedWithZeroBudgetAndZeroMinimum) {
  RetryBudget budget(0, 0);
  recordRequests(budget, kStart, 1000);
  EXPECT_FALSE(budget.tryRetry(kStart));
  EXPECT_EQ(budget.exhausted(), 1u);
}

TEST(RetryBudget, PercentOfRecentRequests) {
  RetryBudget budget(20, 1);
  recordRequests(budget, kStart, 1000);
  EXPECT_EQ(retriesAllowed(budget, kStart), 200u);
  // More requests raise the allowance by their share only.
  recordRequests(budget, kStart + milliseconds(500), 100);
  EXPECT_EQ(retriesAllowed(budget, kStart + milliseconds(500)), 20u);
}

TEST(RetryBudget, TheLargerOfPercentAndMinimum) {
  RetryBudget budget(10, 5);  // minimum 50 over the window
  recordRequests(budget, kStart, 300);  // 10% = 30 < 50
  EXPECT_EQ(retriesAllowed(budget, kStart), 50u);
}

TEST(RetryBudget, RequestsAcrossTheWindowAllCount) {
  RetryBudget budget(50, 0);
  for (int s = 0; s < 10; ++s) recordRequests(budget, kStart + seconds(s), 10);
  EXPECT_EQ(retriesAllowed(budget, kStart + seconds(9) + milliseconds(999)), 50u);
}

TEST(RetryBudget, WindowSlides) {
  RetryBudget budget(20, 1);
  recordRequests(budget, kStart, 1000);
  EXPECT_EQ(retriesAllowed(budget, kStart), 200u);
  // Nine seconds on, the 1000 requests and the 200 retries are still in the window.
  EXPECT_FALSE(budget.tryRetry(kStart + seconds(9) + milliseconds(999)));
  // Ten seconds on, both have left it: the minimum (10) applies again.
  EXPECT_EQ(retriesAllowed(budget, kStart + seconds(10)), 10u);
}

TEST(RetryBudget, OldRetriesLeaveTheWindowBeforeNewRequests) {
  RetryBudget budget(10, 0);
  recordRequests(budget, kStart, 100);
  EXPECT_EQ(retriesAllowed(budget, kStart), 10u);
  recordRequests(budget, kStart + seconds(5), 100);
  // At +5 s: 200 requests, 10 retries: 10 more.
  EXPECT_EQ(retriesAllowed(budget, kStart + seconds(5)), 10u);
  // At +10 s: the first second left: 100 requests, 10 retries (of +5 s) in the window.
  EXPECT_FALSE(budget.tryRetry(kStart + seconds(10)));
  // At +15 s: everything left.
  recordRequests(budget, kStart + seconds(15), 50);
  EXPECT_EQ(retriesAllowed(budget, kStart + seconds(15)), 5u);
}

TEST(RetryBudget, AQuietSpellLongerThanTheRingResetsIt) {
  // Buckets are reused by slot: after 35 s of nothing, the slot of second 35 must not
  // count what it held at second 5 or 15 or 25.
  RetryBudget budget(100, 0);
  recordRequests(budget, kStart + seconds(5), 40);
  EXPECT_EQ(retriesAllowed(budget, kStart + seconds(5)), 40u);
  EXPECT_FALSE(budget.tryRetry(kStart + seconds(35)));
  recordRequests(budget, kStart + seconds(35), 3);
  EXPECT_EQ(retriesAllowed(budget, kStart + seconds(35)), 3u);
}

TEST(RetryBudget, ExhaustedCountsEveryRefusal) {
  RetryBudget budget(0, 1);
  EXPECT_EQ(budget.exhausted(), 0u);
  EXPECT_EQ(retriesAllowed(budget, kStart), 10u);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(budget.tryRetry(kStart));
  EXPECT_EQ(budget.exhausted(), 5u);
}

TEST(RetryBudget, AStaleCallerDoesNotWipeANewerSecond) {
  // A thread whose `now` is ten seconds behind lands on the slot of the current second;
  // it must not reset that bucket.
  RetryBudget budget(100, 0);
  recordRequests(budget, kStart + seconds(10), 20);
  budget.recordRequest(kStart);  // same slot, older second
  EXPECT_EQ(retriesAllowed(budget, kStart + seconds(10)), 21u);
}

TEST(RetryBudget, TimeBeforeTheClocksEpochWorks) {
  RetryBudget budget(100, 0);
  Clock::time_point early = Clock::time_point() - seconds(3) + milliseconds(200);
  recordRequests(budget, early, 4);
  EXPECT_EQ(retriesAllowed(budget, early), 4u);
}

TEST(RetryBudget, ConcurrentRequestsAreAllCounted) {
  // Within one second no bucket is reset, so no count may be lost.
  RetryBudget budget(100, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] { recordRequests(budget, kStart + milliseconds(10), 5000); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(retriesAllowed(budget, kStart + milliseconds(20)), 20000u);
}

}  // namespace
}  // namespace infergate::routing
