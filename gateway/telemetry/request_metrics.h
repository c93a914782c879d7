#pragma once

// The request metrics: per inference request, by model, version, route, upstream and the
// protocols on both sides; per API call, by endpoint (HTTP) or method (gRPC). Recorded on
// the request path without a lock (sharded.h), read at scrape time by Collect().
//
// Families (all declared in request_metrics.cc's Collect, with their help strings):
//   labels L = {model, version, route, upstream, protocol, upstream_protocol}
//   infergate_requests_total{L, code}            counter  code: "200" / "OK" ...
//   infergate_requests_in_flight{L}              gauge
//   infergate_request_duration_seconds{L}        histogram  end to end
//   infergate_upstream_duration_seconds{L}       histogram  remote upstreams: the last
//                                                           attempt, sent -> answered
//   infergate_gateway_overhead_seconds{L}        histogram  end to end - upstream
//   infergate_transcode_duration_seconds{L}      histogram  decoded requests only
//   infergate_request_bytes_total{L}, infergate_response_bytes_total{L}   counters
//   Triton's names, per {model, version} (the client's names):
//   nv_inference_request_success, nv_inference_request_failure{reason},
//   nv_inference_count, nv_inference_exec_count, nv_inference_request_duration_us,
//   nv_inference_queue_duration_us (counters), nv_inference_pending_request_count (gauge)
//   API calls:
//   infergate_http_requests_total{endpoint, code}, infergate_http_request_duration_seconds
//   infergate_grpc_requests_total{method, code}, infergate_grpc_request_duration_seconds
//
// Series are created on first sight and live as long as the RequestMetrics (Prometheus
// expects a counter to stay). Their number is capped (`max_series`): past the cap a new
// label set is counted under model "_overflow" of its route and upstream, so a client
// inventing model names cannot grow the gateway's memory.
//
// Cost on the request path: series() looks the label set up in a per-thread cache (no
// lock; the shared table's mutex only on a thread's first sight of a label set);
// started() and finish() are relaxed atomic adds on the thread's shard.
//
// Threads: every method from any thread.

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/telemetry/request_info.h"
#include "gateway/telemetry/sharded.h"

namespace infergate::gateway::telemetry {

// An answer's status as a small index: an HTTP status or a gRPC code.
struct Outcome {
  uint8_t index = 0;
  bool operator==(const Outcome&) const = default;
};
inline constexpr size_t kOutcomes = 22;
Outcome httpOutcome(int status);  // statuses outside the table count as "other"
// An HTTP answer cut short after its head (RequestInfo::cut): "cut", a failure.
Outcome cutOutcome();
Outcome grpcOutcome(int code);    // 0..16; anything else "other"
// The `code` label of `outcome` for `protocol` ("404", "NOT_FOUND", "other").
std::string_view outcomeLabel(Protocol protocol, Outcome outcome);
bool outcomeSucceeded(Protocol protocol, Outcome outcome);

// The label set of one request series.
struct SeriesKey {
  Protocol protocol = Protocol::kHttp;
  UpstreamProtocol upstream_protocol = UpstreamProtocol::kBuiltin;
  std::string_view model, version, route, upstream;
};

class RequestSeries {
 public:
  struct Labels {
    Protocol protocol;
    UpstreamProtocol upstream_protocol;
    std::string model, version, route, upstream;
  };
  explicit RequestSeries(Labels labels) : labels_(std::move(labels)) {}
  const Labels& labels() const { return labels_; }

  void started() { shard().in_flight.fetch_add(1, std::memory_order_relaxed); }
  // One request that started() finished with `outcome`; see RequestMetrics::finish.
  void finished(Outcome outcome, const RequestInfo& info, Clock::duration total);

  struct Totals {
    std::array<uint64_t, kOutcomes> outcomes{};
    int64_t in_flight = 0;
    uint64_t request_bytes = 0, response_bytes = 0;
    uint64_t success_ns = 0, success_queue_ns = 0;  // Triton's duration counters
    HistogramSnapshot total, upstream, overhead, transcode;
  };
  Totals totals() const;

 private:
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, kOutcomes> outcomes{};
    std::atomic<int64_t> in_flight{0};
    std::atomic<uint64_t> request_bytes{0}, response_bytes{0};
    std::atomic<uint64_t> success_ns{0}, success_queue_ns{0};
    HistogramCells total, upstream, overhead, transcode;
  };
  Shard& shard() { return shards_[shardIndex()]; }

  const Labels labels_;
  std::array<Shard, kShards> shards_;
};

class RequestMetrics final : public prometheus::Collectable {
 public:
  explicit RequestMetrics(size_t max_series = 2000);
  ~RequestMetrics() override;
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // The series of `key` (created on first sight; never null).
  RequestSeries* series(const SeriesKey& key);
  // A routed inference request: its series, counted in flight from now.
  void started(RequestInfo& info, RequestSeries* series) {
    info.series = series;
    series->started();
  }
  // The request of `info` finished with `outcome` now: counted in its series (when it has
  // one); the in-flight count started() raised goes back down.
  static void finish(const RequestInfo& info, Outcome outcome, Clock::time_point now) {
    if (info.series) info.series->finished(outcome, info, now - info.start);
  }

  // One API call (any endpoint, inference ones included): `endpoint` names the HTTP
  // endpoint or gRPC method and must have static storage (a literal: the per-thread cache
  // knows it by its address).
  void apiCall(Protocol protocol, std::string_view endpoint, Outcome outcome,
               std::chrono::nanoseconds elapsed);

  std::vector<prometheus::MetricFamily> Collect() const override;
  size_t seriesCount() const;

 private:
  struct ApiSeries;
  struct Cache;
  Cache& cache() const;
  RequestSeries* lookupShared(const SeriesKey& key);
  ApiSeries* apiSeries(Protocol protocol, std::string_view endpoint);

  const uint64_t id_;  // tells this instance's thread caches from another's
  const size_t max_series_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<RequestSeries>> series_;  // guarded
  std::vector<RequestSeries*> order_;                                      // guarded
  std::unordered_map<std::string, std::unique_ptr<ApiSeries>> api_;         // guarded
  std::vector<ApiSeries*> api_order_;                                      // guarded
};

}  // namespace infergate::gateway::telemetry
