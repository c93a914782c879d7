#include "routing/retry_budget.h"

#include <algorithm>

namespace infergate::routing {
namespace {

int64_t secondOf(RetryBudget::Clock::time_point now) {
  return std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
}

// The slot of `second` in the ring, for negative seconds too.
size_t slotOf(int64_t second) {
  int64_t slot = second % RetryBudget::kWindowSeconds;
  return static_cast<size_t>(slot < 0 ? slot + RetryBudget::kWindowSeconds : slot);
}

}  // namespace

RetryBudget::RetryBudget(uint32_t budget_percent, uint32_t min_retries_per_second)
    : budget_percent_(budget_percent),
      min_retries_(uint64_t{min_retries_per_second} * kWindowSeconds) {}

RetryBudget::Bucket& RetryBudget::current(int64_t second) {
  Bucket& bucket = buckets_[slotOf(second)];
  int64_t seen = bucket.second.load(std::memory_order_acquire);
  // Only a newer second resets a bucket; of the threads that see it stale, the one whose
  // compare-and-swap wins zeroes it (see the header for the race this leaves).
  if (seen < second &&
      bucket.second.compare_exchange_strong(seen, second, std::memory_order_acq_rel)) {
    bucket.requests.store(0, std::memory_order_relaxed);
    bucket.retries.store(0, std::memory_order_relaxed);
  }
  return bucket;
}

void RetryBudget::recordRequest(Clock::time_point now) {
  current(secondOf(now)).requests.fetch_add(1, std::memory_order_relaxed);
}

bool RetryBudget::tryRetry(Clock::time_point now) {
  int64_t second = secondOf(now);
  Bucket& bucket = current(second);
  uint64_t requests = 0;
  uint64_t retries = 0;
  for (const Bucket& b : buckets_) {
    int64_t of = b.second.load(std::memory_order_acquire);
    if (of > second - kWindowSeconds && of <= second) {
      requests += b.requests.load(std::memory_order_relaxed);
      retries += b.retries.load(std::memory_order_relaxed);
    }
  }
  uint64_t allowed = std::max(requests * budget_percent_ / 100, min_retries_);
  if (retries >= allowed) {
    exhausted_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  bucket.retries.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace infergate::routing
