#pragma once

// Builds one prometheus::MetricFamily from values read at scrape time: the metrics that
// are not prometheus-cpp objects (sharded.h's cells, state read from the router) are
// turned into the registry's exposition types here, the same way everywhere.

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <string>
#include <vector>

#include "gateway/telemetry/sharded.h"

namespace infergate::gateway::telemetry {

using Labels = std::vector<prometheus::ClientMetric::Label>;

class FamilyBuilder {
 public:
  FamilyBuilder(std::string name, std::string help, prometheus::MetricType type) {
    family_.name = std::move(name);
    family_.help = std::move(help);
    family_.type = type;
  }

  void counter(Labels labels, double value) {
    prometheus::ClientMetric& m = add(std::move(labels));
    m.counter.value = value;
  }
  void gauge(Labels labels, double value) {
    prometheus::ClientMetric& m = add(std::move(labels));
    m.gauge.value = value;
  }
  // Cumulative buckets in seconds, as Prometheus reads them, ending with +Inf.
  void histogram(Labels labels, const HistogramSnapshot& snapshot);

  prometheus::MetricFamily take() { return std::move(family_); }

 private:
  prometheus::ClientMetric& add(Labels labels) {
    family_.metric.emplace_back();
    family_.metric.back().label = std::move(labels);
    return family_.metric.back();
  }

  prometheus::MetricFamily family_;
};

}  // namespace infergate::gateway::telemetry
