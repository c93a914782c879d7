#pragma once

// Metrics of the router's state, read at scrape time from the current snapshot (nothing
// on the request path): the loaded configuration, and per upstream and endpoint the
// fleet's health and counters (upstream/fleet.h, upstream/endpoint.h).
//
//   infergate_config_info{hash, generation}                        gauge 1
//   infergate_upstream_endpoint_state{upstream, endpoint, state}    gauge, one-hot over
//       healthy | unhealthy | unknown | ejected. `ejected` wins while a passive ejection
//       runs (no request goes there, whatever the probes say); otherwise the probes'
//       verdict (unknown: never probed, or checks are off)
//   infergate_upstream_endpoint_requests_total / _failures_total / _ejections_total
//   infergate_upstream_endpoint_outstanding{upstream, endpoint}     gauge
//   infergate_upstream_retries_total{upstream}, _retry_budget_exhausted_total, _shed_total
//   infergate_upstream_affinity_lost_total{upstream}
//   infergate_upstream_queued{upstream}                             gauge
//   infergate_upstream_queue_wait_seconds{upstream}                 histogram
//
// Every family is present in each scrape, empty when no upstream has endpoints (builtin
// only), so that dashboards find their names.
//
// Threads: Collect() from the metrics listener's loop; it reads atomics.

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <memory>
#include <vector>

#include "gateway/router.h"

namespace infergate::gateway {

class RouterMetrics final : public prometheus::Collectable {
 public:
  explicit RouterMetrics(std::shared_ptr<Router> router) : router_(std::move(router)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::shared_ptr<Router> router_;
};

}  // namespace infergate::gateway
