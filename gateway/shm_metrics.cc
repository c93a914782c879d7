#include "gateway/shm_metrics.h"

namespace infergate::gateway {
namespace {

prometheus::MetricFamily family(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void add(prometheus::MetricFamily& f, std::vector<prometheus::ClientMetric::Label> labels,
         double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

}  // namespace

std::vector<prometheus::MetricFamily> ShmMetrics::Collect() const {
  using prometheus::MetricType;
  auto regions = family("infergate_shm_regions",
                        "Client shared-memory regions registered at the gateway", MetricType::Gauge);
  auto bytes = family("infergate_shm_handoff_bytes_total",
                      "Tensor bytes exchanged with a colocated endpoint, by how they travelled",
                      MetricType::Counter);
  auto ready = family("infergate_shm_handoff_pool_ready",
                      "1 when the endpoint has the gateway's handoff pool registered",
                      MetricType::Gauge);
  auto refused = family("infergate_shm_handoff_refused",
                        "1 when the endpoint refuses client shared memory (Triton needs "
                        "--allow-client-shm=true); tensors then go inline",
                        MetricType::Gauge);
  auto refusals = family("infergate_shm_handoff_registration_refusals_total",
                         "Pool or region registrations the endpoint refused", MetricType::Counter);
  auto full = family("infergate_shm_handoff_pool_full_total",
                     "Tensors that found no room in the handoff pool and went inline",
                     MetricType::Counter);
  auto retries = family("infergate_shm_handoff_inline_retries_total",
                        "Requests sent again inline after the endpoint refused a reference",
                        MetricType::Counter);

  const shm::RegionRegistry& registry = router_->regions();
  for (shm::RegionKind kind : {shm::RegionKind::kSystem, shm::RegionKind::kCuda}) {
    auto rows = registry.status(kind, std::nullopt);
    add(regions, {{"kind", std::string(shm::kindName(kind))}},
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
      const std::vector<prometheus::ClientMetric::Label> at = {{"upstream", u->name()},
                                                               {"endpoint", e->key()}};
      auto with = [&at](const char* path) {
        auto labels = at;
        labels.push_back({"path", path});
        return labels;
      };
      add(bytes, with("pool_in"), static_cast<double>(c.pool_bytes_in));
      add(bytes, with("pool_out"), static_cast<double>(c.pool_bytes_out));
      add(bytes, with("passthrough"), static_cast<double>(c.passthrough_bytes));
      add(bytes, with("inline"), static_cast<double>(c.inline_bytes));
      add(ready, at, c.pool_ready ? 1 : 0);
      add(refused, at, c.refused ? 1 : 0);
      add(refusals, at, static_cast<double>(c.refusals));
      add(full, at, static_cast<double>(c.pool_full));
      add(retries, at, static_cast<double>(c.inline_retries));
    }
  }
  std::vector<prometheus::MetricFamily> out;
  for (auto* f : {&regions, &bytes, &ready, &refused, &refusals, &full, &retries}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace infergate::gateway
