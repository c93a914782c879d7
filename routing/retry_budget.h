#pragma once

// The retry budget of one upstream: retries may be at most budget_percent of the requests
// (first attempts) of the last 10 seconds, but min_retries_per_second per second are
// always allowed, counted over the same window (10 * min_retries_per_second). So a fleet
// that fails everything sees its load grow by budget_percent at most, not by
// max_retries times, while a quiet upstream can still retry a little.
//
//   every first attempt:      recordRequest(now)
//   before each retry:        tryRetry(now) -> true: go (the retry is counted); false: fail
//   metrics:                  exhausted() -> how many retries were refused, ever
//
// allowed(now) = max(requests in window * budget_percent / 100, 10 * min_retries_per_second)
// tryRetry() says yes while the retries in the window are below allowed(now).
//
// The window is kWindowSeconds one-second buckets, indexed by the second of `now` modulo
// kWindowSeconds: the current second (so far) and the nine before it. Each bucket holds
// its second and two counters. A bucket whose second is older than the one being written
// is reset by whoever first sees it; older buckets are skipped when summing, so a quiet
// spell needs no timer.
//
// Threads: shared by every worker thread; lock-free (atomics only), no allocation. Two
// small races are accepted, both harmless for a limit that is a rate guard, not an account:
//  - a reset is a compare-and-swap of the bucket's second followed by zeroing its
//    counters; a count added by another thread in between is lost, and a reader in
//    between sees the old counts once. Either happens at most once per second, to a few
//    counts of one bucket of ten.
//  - tryRetry() reads the window, then counts its retry: threads racing at the limit may
//    overshoot it by at most one retry each.
//
// Time is the caller's (`now`, any Clock::time_point): tests pass synthetic time points.
// A count whose `now` is older than its slot's current second (a caller ten seconds
// behind the others) is added to that newer second rather than resetting it.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace infergate::routing {

class RetryBudget {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int64_t kWindowSeconds = 10;

  RetryBudget(uint32_t budget_percent, uint32_t min_retries_per_second);
  RetryBudget(const RetryBudget&) = delete;
  RetryBudget& operator=(const RetryBudget&) = delete;

  // Counts a first attempt.
  void recordRequest(Clock::time_point now);
  // True: a retry may go, and is counted. False: the budget is spent (counted in exhausted()).
  bool tryRetry(Clock::time_point now);
  // How many tryRetry() calls said no, ever.
  uint64_t exhausted() const { return exhausted_.load(std::memory_order_relaxed); }

 private:
  struct alignas(64) Bucket {
    std::atomic<int64_t> second{INT64_MIN};  // the second it counts; INT64_MIN: never used
    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> retries{0};
  };

  // The bucket of `second`, reset first when it still holds an older second.
  Bucket& current(int64_t second);

  uint64_t budget_percent_;
  uint64_t min_retries_;  // over the whole window
  std::array<Bucket, kWindowSeconds> buckets_;
  std::atomic<uint64_t> exhausted_{0};
};

}  // namespace infergate::routing
