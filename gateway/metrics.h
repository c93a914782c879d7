#pragma once

// The gateway's metrics registry (prometheus-cpp), declared once, here, as a list. Every
// part of the gateway records into it; the metrics listener serves it at GET /metrics in
// the Prometheus text format. The observability issue fills the list out.
//
// Thread-safety: prometheus-cpp counters and histograms are safe to update from any
// thread; families are created once at construction.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace infergate::gateway {

class Metrics {
 public:
  explicit Metrics(bool cuda_built_in);

  // One finished HTTP request: by endpoint (the route kind) and status code. `endpoint`
  // must be a string with static storage (a literal): the series are cached by it.
  void recordHttpRequest(std::string_view endpoint, int status, std::chrono::nanoseconds elapsed);
  // One finished gRPC call: by method (e.g. "ModelInfer") and canonical code name.
  void recordGrpcRequest(std::string_view method, std::string_view code,
                         std::chrono::nanoseconds elapsed);
  void connectionOpened() { open_connections_->Increment(); }
  void connectionClosed() { open_connections_->Decrement(); }

  // The whole registry in the Prometheus text exposition format.
  std::string serialize() const;

  prometheus::Registry& registry() { return *registry_; }
  // A collectable read at every scrape besides the registry (state-backed metrics such as
  // shm_metrics.h's). Add before the metrics listener starts.
  void addCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
    collectables_.push_back(std::move(collectable));
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* http_requests_;
  prometheus::Family<prometheus::Histogram>* http_duration_;
  prometheus::Family<prometheus::Counter>* grpc_requests_;
  prometheus::Family<prometheus::Histogram>* grpc_duration_;
  prometheus::Gauge* open_connections_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;

  // prometheus-cpp's Family::Add builds label maps and metric objects before it finds an
  // existing series (about ten allocations): the series of each (endpoint, status) are
  // looked up once and kept here.
  struct HttpSeries {
    prometheus::Counter* requests;
    prometheus::Histogram* duration;
  };
  struct HttpKey {
    const char* endpoint;
    int status;
    bool operator==(const HttpKey&) const = default;
  };
  struct HttpKeyHash {
    size_t operator()(const HttpKey& k) const {
      return std::hash<const void*>()(k.endpoint) * 31 + static_cast<size_t>(k.status);
    }
  };
  std::mutex http_series_mutex_;
  std::unordered_map<HttpKey, HttpSeries, HttpKeyHash> http_series_;
};

// Buckets for request latencies: 25 us to 30 s, roughly x2.5 per step.
const prometheus::Histogram::BucketBoundaries& latencyBuckets();

}  // namespace infergate::gateway
