#pragma once

// Private to config/: the checks that look across sections (duplicate names and
// addresses, routes to missing upstreams, unreachable routes, nothing to serve), run on
// the structs the loader built. The loader runs them; they never see YAML.

#include <optional>
#include <vector>

#include "config/config.h"
#include "config/config_errors.h"

namespace infergate::config {

// Positions the checks point at beyond the structs' own `where`, filled by the loader.
// A section "written" was present in the file, even if it had errors of its own (so a
// bad listener is not also reported as "no listener").
struct LoadMarks {
  SourceLocation file_start;                     // 1:1 of the file
  std::optional<SourceLocation> listeners, upstreams, routes;  // each section's value
  bool frontend_listener_written = false;        // listeners.http or listeners.grpc
  bool upstream_written = false;
  bool route_written = false;
  bool upstream_names_known = true;  // false: an upstream's name could not be read, so
                                     // "route to a missing upstream" is not reported
  // Parallel to GatewayConfig::upstreams / ::routes. An entry the loader had to drop
  // (no name, say) leaves a gap, so each keeps its index in the file's sequence.
  std::vector<size_t> upstream_indices;
  std::vector<SourceLocation> upstream_names;
  std::vector<size_t> route_indices;
  std::vector<SourceLocation> route_models;
  std::vector<SourceLocation> route_upstreams;
};

void checkConfig(const GatewayConfig& config, const LoadMarks& marks, ConfigErrors& errors);

}  // namespace infergate::config
