#include "gateway/telemetry/families.h"

#include <limits>

namespace infergate::gateway::telemetry {

void FamilyBuilder::histogram(Labels labels, const HistogramSnapshot& snapshot) {
  prometheus::ClientMetric& m = add(std::move(labels));
  uint64_t cumulative = 0;
  m.histogram.bucket.reserve(kLatencyBuckets);
  for (size_t i = 0; i < kLatencyBuckets; ++i) {
    cumulative += snapshot.counts[i];
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < kLatencyBounds.size() ? static_cast<double>(kLatencyBounds[i]) / 1e9
                                              : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back(b);
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = static_cast<double>(snapshot.sum_ns) / 1e9;
}

}  // namespace infergate::gateway::telemetry
