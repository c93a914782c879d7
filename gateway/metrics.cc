#include "gateway/metrics.h"

#include <prometheus/text_serializer.h>

#include "codecs/status.h"
#include "gateway/allocator.h"
#include "gateway/telemetry/families.h"

namespace infergate::gateway {

Metrics::Metrics(bool cuda_built_in, std::shared_ptr<telemetry::RequestMetrics> requests)
    : registry_(std::make_shared<prometheus::Registry>()), requests_(std::move(requests)) {
  prometheus::BuildGauge()
      .Name("infergate_build_info")
      .Help("Build information: version, git commit, whether CUDA support is built in, and "
            "the malloc in use")
      .Register(*registry_)
      .Add({{"version", INFERGATE_VERSION_STRING},
            {"git_commit", INFERGATE_GIT_COMMIT},
            {"cuda", cuda_built_in ? "true" : "false"},
            {"allocator", std::string(mallocName())}})
      .Set(1);
  auto& reloads = prometheus::BuildCounter()
                      .Name("infergate_config_reloads_total")
                      .Help("Configuration reloads (admin API, SIGHUP, file watch), by result")
                      .Register(*registry_);
  reload_ok_ = &reloads.Add({{"result", "success"}});
  reload_failed_ = &reloads.Add({{"result", "failure"}});
}

std::string Metrics::serialize() const {
  prometheus::TextSerializer serializer;
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  auto addConnections = [&families](const char* listener, const char* what,
                                     const std::function<ConnectionStats()>& read) {
    telemetry::FamilyBuilder connections(codecs::strCat("infergate_", listener, "_open_connections"),
                                         codecs::strCat("Client ", what, " connections open now"),
                                         prometheus::MetricType::Gauge);
    telemetry::FamilyBuilder refused(
        codecs::strCat("infergate_", listener, "_connections_refused_total"),
        codecs::strCat("Client ", what, " connections closed at accept, by the limit they were over"),
        prometheus::MetricType::Counter);
    const ConnectionStats stats = read ? read() : ConnectionStats{};
    connections.gauge({}, static_cast<double>(stats.open));
    refused.counter({{"limit", "max_connections"}}, static_cast<double>(stats.refused_over_total));
    refused.counter({{"limit", "max_connections_per_client"}},
                    static_cast<double>(stats.refused_over_per_client));
    telemetry::FamilyBuilder send_timeouts(
        codecs::strCat("infergate_", listener, "_send_timeouts_total"),
        codecs::strCat("Client ", what, " connections closed (gRPC: or streams reset) because the client "
                       "took none of the bytes waiting for it for limits.send_timeout_ms"),
        prometheus::MetricType::Counter);
    send_timeouts.counter({}, static_cast<double>(stats.send_timeouts));
    families.push_back(connections.take());
    families.push_back(refused.take());
    families.push_back(send_timeouts.take());
  };
  addConnections("http", "HTTP", connection_stats_);
  addConnections("grpc", "gRPC", grpc_connection_stats_);
  telemetry::FamilyBuilder reset_floods(
      "infergate_grpc_reset_floods_total",
      "Client gRPC connections closed (GOAWAY ENHANCE_YOUR_CALM) because the client reset streams "
      "faster than limits.grpc_reset_burst and limits.grpc_resets_per_second allow",
      prometheus::MetricType::Counter);
  reset_floods.counter({}, static_cast<double>(grpc_connection_stats_ ? grpc_connection_stats_().reset_floods : 0));
  families.push_back(reset_floods.take());
  telemetry::FamilyBuilder answers("infergate_grpc_stream_answer_bytes",
                                   "Bytes of ModelStreamInfer answers waiting in the gateway for their clients",
                                   prometheus::MetricType::Gauge);
  answers.gauge({}, static_cast<double>(stream_answer_bytes_ ? stream_answer_bytes_() : 0));
  families.push_back(answers.take());
  if (requests_) {
    for (prometheus::MetricFamily& f : requests_->Collect()) families.push_back(std::move(f));
  }
  for (const auto& c : collectables_) {
    for (prometheus::MetricFamily& f : c->Collect()) families.push_back(std::move(f));
  }
  return serializer.Serialize(families);
}

}  // namespace infergate::gateway
