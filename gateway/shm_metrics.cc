#include "gateway/shm_metrics.h"

#include "gateway/telemetry/families.h"

namespace infergate::gateway {
using prometheus::MetricType;
using telemetry::FamilyBuilder;
using telemetry::Labels;

std::vector<prometheus::MetricFamily> ShmMetrics::Collect() const {
  FamilyBuilder regions("infergate_shm_regions",
                        "Client shared-memory regions registered at the gateway", MetricType::Gauge);
  FamilyBuilder bytes("infergate_shm_handoff_bytes_total",
                      "Tensor bytes exchanged with a colocated endpoint, by how they travelled",
                      MetricType::Counter);
  FamilyBuilder in_place("infergate_shm_handoff_pool_in_place_bytes_total",
                         "Input bytes read from the client's socket straight into the handoff "
                         "pool, with no copy (part of path=\"pool_in\")",
                         MetricType::Counter);
  FamilyBuilder in_use("infergate_shm_handoff_pool_bytes_in_use",
                       "Bytes of the handoff pool held by requests in flight (of "
                       "infergate_shm_handoff_pool_bytes)",
                       MetricType::Gauge);
  FamilyBuilder size("infergate_shm_handoff_pool_bytes", "Size of the endpoint's handoff pool",
                     MetricType::Gauge);
  FamilyBuilder ready("infergate_shm_handoff_pool_ready",
                      "1 when the endpoint has the gateway's handoff pool registered",
                      MetricType::Gauge);
  FamilyBuilder refused("infergate_shm_handoff_refused",
                        "1 when the endpoint refuses client shared memory (Triton needs "
                        "--allow-client-shm=true); tensors then go inline",
                        MetricType::Gauge);
  FamilyBuilder refusals("infergate_shm_handoff_registration_refusals_total",
                         "Pool or region registrations the endpoint refused", MetricType::Counter);
  FamilyBuilder full("infergate_shm_handoff_pool_full_total",
                     "Tensors that found no room in the handoff pool and went inline",
                     MetricType::Counter);
  FamilyBuilder retries("infergate_shm_handoff_inline_retries_total",
                        "Requests sent again inline after the endpoint refused a reference",
                        MetricType::Counter);

  const shm::RegionRegistry& registry = router_->regions();
  for (shm::RegionKind kind : {shm::RegionKind::kSystem, shm::RegionKind::kCuda}) {
    auto rows = registry.status(kind, std::nullopt);
    regions.gauge({{"kind", std::string(shm::kindName(kind))}},
                  rows.ok() ? static_cast<double>(rows->size()) : 0);
  }
  std::shared_ptr<const RouterSnapshot> snapshot = router_->snapshot();
  for (const auto& u : *snapshot->upstreams) {
    if (!u->fleet()) continue;
    // Held by name: discovery may swap the list meanwhile.
    std::shared_ptr<const upstream::UpstreamFleet::EndpointList> endpoints = u->fleet()->endpoints();
    for (const std::shared_ptr<upstream::Endpoint>& e : *endpoints) {
      const upstream::EndpointHandoff* h = e->handoff();
      if (h == nullptr) continue;
      const upstream::EndpointHandoff::Counters c = h->counters();
      const Labels at = {{"upstream", u->name()}, {"endpoint", e->key()}};
      auto with = [&at](const char* path) {
        auto labels = at;
        labels.push_back({"path", path});
        return labels;
      };
      bytes.counter(with("pool_in"), static_cast<double>(c.pool_bytes_in));
      bytes.counter(with("pool_out"), static_cast<double>(c.pool_bytes_out));
      in_place.counter(at, static_cast<double>(c.pool_bytes_in_place));
      bytes.counter(with("passthrough"), static_cast<double>(c.passthrough_bytes));
      bytes.counter(with("inline"), static_cast<double>(c.inline_bytes));
      ready.gauge(at, c.pool_ready ? 1 : 0);
      size.gauge(at, static_cast<double>(c.pool_bytes));
      in_use.gauge(at, static_cast<double>(c.pool_bytes_in_use));
      refused.gauge(at, c.refused ? 1 : 0);
      refusals.counter(at, static_cast<double>(c.refusals));
      full.counter(at, static_cast<double>(c.pool_full));
      retries.counter(at, static_cast<double>(c.inline_retries));
    }
  }
  std::vector<prometheus::MetricFamily> out;
  for (FamilyBuilder* f : {&regions, &bytes, &in_place, &size, &in_use, &ready, &refused, &refusals,
                           &full, &retries}) {
    out.push_back(f->take());
  }
  return out;
}

}  // namespace infergate::gateway
