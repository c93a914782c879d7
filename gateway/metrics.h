#pragma once

// The gateway's metrics, declared in one place each and served together at GET /metrics
// (the metrics listener) in the Prometheus text format:
//
//   here                 infergate_build_info{version, git_commit, cuda},
//                        infergate_{http,grpc}_open_connections,
//                        infergate_{http,grpc}_connections_refused_total{limit},
//                        infergate_{http,grpc}_send_timeouts_total,
//                        infergate_config_reloads_total{result}  (prometheus-cpp objects:
//                        none is touched per request)
//   telemetry/request_metrics.h   per request and per API call, lock-free on the
//                                 request path (null when `observability.request_metrics`
//                                 is off)
//   router_metrics.h     config info, upstream and endpoint health and counters
//   shm_metrics.h        shared-memory regions and the handoff
// The last two are collectables read at scrape time from the state they describe.
//
// Thread-safety: every method from any thread.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gateway/telemetry/request_metrics.h"

namespace infergate::gateway {

class Metrics {
 public:
  // `requests` null: no per-request metrics.
  Metrics(bool cuda_built_in, std::shared_ptr<telemetry::RequestMetrics> requests);

  // A listener's connections, as read at each scrape: infergate_<listener>_open_connections,
  // _connections_refused_total{limit} and _send_timeouts_total.
  struct ConnectionStats {
    size_t open = 0;
    uint64_t refused_over_total = 0;       // limits.max_connections
    uint64_t refused_over_per_client = 0;  // limits.max_connections_per_client
    uint64_t send_timeouts = 0;            // closed (gRPC streams: reset) for limits.send_timeout_ms
    uint64_t reset_floods = 0;             // gRPC: closed for limits.grpc_reset_burst / _per_second
  };
  // infergate_http_open_connections and infergate_http_connections_refused_total read
  // `stats` at each scrape. Set before the metrics listener starts.
  void setConnectionStats(std::function<ConnectionStats()> stats) {
    connection_stats_ = std::move(stats);
  }
  // The same for the gRPC listener (infergate_grpc_...): the native server's.
  void setGrpcConnectionStats(std::function<ConnectionStats()> stats) {
    grpc_connection_stats_ = std::move(stats);
  }
  // infergate_grpc_stream_answer_bytes reads `bytes` at each scrape: ModelStreamInfer
  // answers waiting in the gateway for their clients. Set before the metrics listener starts.
  void setGrpcStreamAnswerBytes(std::function<uint64_t()> bytes) { stream_answer_bytes_ = std::move(bytes); }
  void reloaded(bool ok) { (ok ? reload_ok_ : reload_failed_)->Increment(); }

  telemetry::RequestMetrics* requests() const { return requests_.get(); }

  // The whole registry in the Prometheus text exposition format.
  std::string serialize() const;

  // A collectable read at every scrape besides the registry. Add before the metrics
  // listener starts.
  void addCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
    collectables_.push_back(std::move(collectable));
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<telemetry::RequestMetrics> requests_;
  std::function<ConnectionStats()> connection_stats_;
  std::function<uint64_t()> stream_answer_bytes_;
  std::function<ConnectionStats()> grpc_connection_stats_;
  prometheus::Counter* reload_ok_;
  prometheus::Counter* reload_failed_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
};

}  // namespace infergate::gateway
