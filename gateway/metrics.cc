#include "gateway/metrics.h"

#include <prometheus/text_serializer.h>

namespace infergate::gateway {

const prometheus::Histogram::BucketBoundaries& latencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,    0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
  return buckets;
}

Metrics::Metrics(bool cuda_built_in) : registry_(std::make_shared<prometheus::Registry>()) {
  auto& build = prometheus::BuildGauge()
                    .Name("infergate_build_info")
                    .Help("Build information: version and whether CUDA support is built in")
                    .Register(*registry_);
  build.Add({{"version", INFERGATE_VERSION_STRING}, {"cuda", cuda_built_in ? "true" : "false"}})
      .Set(1);
  http_requests_ = &prometheus::BuildCounter()
                        .Name("infergate_http_requests_total")
                        .Help("HTTP requests answered, by endpoint and status code")
                        .Register(*registry_);
  http_duration_ = &prometheus::BuildHistogram()
                        .Name("infergate_http_request_duration_seconds")
                        .Help("Time from a whole HTTP request read to its response queued")
                        .Register(*registry_);
  grpc_requests_ = &prometheus::BuildCounter()
                        .Name("infergate_grpc_requests_total")
                        .Help("gRPC calls finished, by method and status code")
                        .Register(*registry_);
  grpc_duration_ = &prometheus::BuildHistogram()
                        .Name("infergate_grpc_request_duration_seconds")
                        .Help("Time from a gRPC call's start to its finish")
                        .Register(*registry_);
  open_connections_ = &prometheus::BuildGauge()
                           .Name("infergate_http_open_connections")
                           .Help("Client HTTP connections open now")
                           .Register(*registry_)
                           .Add({});
}

void Metrics::recordHttpRequest(std::string_view endpoint, int status,
                                std::chrono::nanoseconds elapsed) {
  HttpSeries series;
  {
    std::lock_guard<std::mutex> lock(http_series_mutex_);
    HttpKey key{endpoint.data(), status};
    auto it = http_series_.find(key);
    if (it == http_series_.end()) {
      std::string ep(endpoint);
      HttpSeries added{&http_requests_->Add({{"endpoint", ep}, {"code", std::to_string(status)}}),
                       &http_duration_->Add({{"endpoint", ep}}, latencyBuckets())};
      it = http_series_.emplace(key, added).first;
    }
    series = it->second;
  }
  series.requests->Increment();
  series.duration->Observe(std::chrono::duration<double>(elapsed).count());
}

void Metrics::recordGrpcRequest(std::string_view method, std::string_view code,
                                std::chrono::nanoseconds elapsed) {
  std::string m(method);
  grpc_requests_->Add({{"method", m}, {"code", std::string(code)}}).Increment();
  grpc_duration_->Add({{"method", m}}, latencyBuckets())
      .Observe(std::chrono::duration<double>(elapsed).count());
}

std::string Metrics::serialize() const {
  prometheus::TextSerializer serializer;
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (const auto& c : collectables_) {
    for (prometheus::MetricFamily& f : c->Collect()) families.push_back(std::move(f));
  }
  return serializer.Serialize(families);
}

}  // namespace infergate::gateway
