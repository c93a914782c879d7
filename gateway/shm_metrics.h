#pragma once

// Shared-memory metrics, read at scrape time from the state they describe (no counter is
// touched twice on the request path): the client regions registered at the gateway, and
// per colocated endpoint the handoff's byte counters, refusals and fallbacks
// (upstream/endpoint_handoff.h). Added to the Metrics registry's output (metrics.h).
//
//   infergate_shm_regions{kind}                                  gauge
//   infergate_shm_handoff_bytes_total{upstream,endpoint,path}    counter; path = pool_in,
//                                                                pool_out, passthrough, inline
//   infergate_shm_handoff_pool_ready{upstream,endpoint}          gauge 0/1
//   infergate_shm_handoff_refused{upstream,endpoint}             gauge 0/1: the upstream
//                                                                refuses client shm
//   infergate_shm_handoff_registration_refusals_total{...}       counter
//   infergate_shm_handoff_pool_full_total{...}                   counter
//   infergate_shm_handoff_inline_retries_total{...}              counter
//
// Every family is in each scrape, empty when no endpoint has a handoff.
//
// Threads: Collect() from the metrics listener's loop; it reads the router's current
// snapshot and atomics.

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <memory>
#include <vector>

#include "gateway/router.h"

namespace infergate::gateway {

class ShmMetrics final : public prometheus::Collectable {
 public:
  explicit ShmMetrics(std::shared_ptr<Router> router) : router_(std::move(router)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::shared_ptr<Router> router_;
};

}  // namespace infergate::gateway
