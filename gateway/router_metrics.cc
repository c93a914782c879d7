#include "gateway/router_metrics.h"

#include "gateway/telemetry/families.h"

namespace infergate::gateway {

using prometheus::MetricType;
using telemetry::FamilyBuilder;
using telemetry::Labels;

std::vector<prometheus::MetricFamily> RouterMetrics::Collect() const {
  FamilyBuilder config("infergate_config_info",
                       "The configuration being served: a hash of its file's text and its "
                       "generation (1 at start, +1 per successful reload)",
                       MetricType::Gauge);
  FamilyBuilder state("infergate_upstream_endpoint_state",
                      "1 for the endpoint's current state (healthy, unhealthy, unknown, "
                      "ejected), 0 for the others",
                      MetricType::Gauge);
  FamilyBuilder requests("infergate_upstream_endpoint_requests_total",
                         "Requests the endpoint finished (all attempts)", MetricType::Counter);
  FamilyBuilder failures("infergate_upstream_endpoint_failures_total",
                         "Requests that failed at the endpoint (connect error, UNAVAILABLE, "
                         "HTTP 5xx)",
                         MetricType::Counter);
  FamilyBuilder ejections("infergate_upstream_endpoint_ejections_total",
                          "Passive ejections of the endpoint (consecutive failures)",
                          MetricType::Counter);
  FamilyBuilder outstanding("infergate_upstream_endpoint_outstanding",
                            "Requests in flight on the endpoint", MetricType::Gauge);
  FamilyBuilder retries("infergate_upstream_retries_total",
                        "Attempts sent again to another endpoint after one that never reached "
                        "its upstream",
                        MetricType::Counter);
  FamilyBuilder exhausted("infergate_upstream_retry_budget_exhausted_total",
                          "Retries the upstream's retry budget refused", MetricType::Counter);
  FamilyBuilder shed("infergate_upstream_shed_total",
                     "Requests refused at the upstream's in-flight cap (queue full or waited "
                     "too long)",
                     MetricType::Counter);
  FamilyBuilder affinity("infergate_upstream_affinity_lost_total",
                         "Sequence requests whose endpoint was gone", MetricType::Counter);
  FamilyBuilder queued("infergate_upstream_queued",
                       "Requests waiting for a slot on the upstream now", MetricType::Gauge);
  FamilyBuilder queue_wait("infergate_upstream_queue_wait_seconds",
                           "Time requests waited for their first slot on the upstream",
                           MetricType::Histogram);

  std::shared_ptr<const RouterSnapshot> snapshot = router_->snapshot();
  config.gauge({{"hash", snapshot->config_hash},
                {"generation", std::to_string(snapshot->generation)}},
               1);
  const auto now = upstream::Endpoint::Clock::now();
  for (const auto& u : *snapshot->upstreams) {
    if (!u->fleet()) continue;
    const upstream::UpstreamFleet& fleet = *u->fleet();
    const upstream::UpstreamFleet::Counters fc = fleet.counters();
    const Labels at_upstream = {{"upstream", u->name()}};
    retries.counter(at_upstream, static_cast<double>(fc.retries));
    exhausted.counter(at_upstream, static_cast<double>(fc.retries_refused));
    shed.counter(at_upstream, static_cast<double>(fc.shed));
    affinity.counter(at_upstream, static_cast<double>(fc.affinity_lost));
    queued.gauge(at_upstream, static_cast<double>(fc.queued));
    queue_wait.histogram(at_upstream, fleet.queueWait());
    // Held by name: discovery may swap the list meanwhile.
    std::shared_ptr<const upstream::UpstreamFleet::EndpointList> endpoints = fleet.endpoints();
    for (const std::shared_ptr<upstream::Endpoint>& e : *endpoints) {
      const upstream::Endpoint::Counters c = e->counters();
      const Labels at = {{"upstream", u->name()}, {"endpoint", e->key()}};
      const char* current = e->ejected(now) ? "ejected" : upstream::activeHealthName(e->activeHealth());
      for (const char* name : {"healthy", "unhealthy", "unknown", "ejected"}) {
        Labels labels = at;
        labels.push_back({"state", name});
        state.gauge(std::move(labels), std::string_view(current) == name ? 1 : 0);
      }
      requests.counter(at, static_cast<double>(c.requests));
      failures.counter(at, static_cast<double>(c.failures));
      ejections.counter(at, static_cast<double>(c.ejections));
      outstanding.gauge(at, static_cast<double>(e->outstanding()));
    }
  }
  std::vector<prometheus::MetricFamily> out;
  for (FamilyBuilder* f : {&config, &state, &requests, &failures, &ejections, &outstanding,
                           &retries, &exhausted, &shed, &affinity, &queued, &queue_wait}) {
    out.push_back(f->take());
  }
  return out;
}

}  // namespace infergate::gateway
