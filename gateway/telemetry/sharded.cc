#include "gateway/telemetry/sharded.h"

#include <algorithm>

namespace infergate::gateway::telemetry {

size_t shardIndex() {
  static std::atomic<size_t> next{0};
  thread_local const size_t index = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return index;
}

size_t latencyBucket(int64_t nanoseconds) {
  // The first bound >= the value: a value equal to a bound belongs to that bound's bucket
  // (Prometheus buckets are "less than or equal").
  return static_cast<size_t>(
      std::lower_bound(kLatencyBounds.begin(), kLatencyBounds.end(), nanoseconds) -
      kLatencyBounds.begin());
}

}  // namespace infergate::gateway::telemetry
