#pragma once

// Private to config/: the checks that look across entries and sections, run on the
// structs the loader built: clashing listener addresses, duplicate upstream names,
// targets and mirrors naming no upstream, split weights that do not add up to 100,
// routes shadowed by an earlier one, nothing to serve. The loader runs them; they never
// see YAML.

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_errors.h"

namespace infergate::config {

// Where one kept upstream was written.
struct UpstreamMarks {
  size_t index = 0;     // in the file's `upstreams` sequence (entries dropped leave gaps)
  SourceLocation name;  // the `name` value
};

// Where the parts of one kept route were written.
struct RouteMarks {
  size_t index = 0;        // in the file's `routes` sequence (entries dropped leave gaps)
  std::string model_path;  // "routes[1].match.model" or "routes[1].match.model_prefix"
  SourceLocation model;    // that value
  // Parallel to RouteConfig::targets: "routes[1].upstream", "routes[1].split[0].upstream".
  std::vector<std::string> target_paths;
  // The `split` value, set only when every entry of it was read (so its weights are
  // checked against 100 only when they are all known).
  std::optional<SourceLocation> split;
  SourceLocation mirror;  // the `mirror` value, when given
  SourceLocation name;    // the `name` value, when given
};

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
  // Parallel to GatewayConfig::upstreams / ::routes.
  std::vector<UpstreamMarks> upstream_marks;
  std::vector<RouteMarks> route_marks;
};

void checkConfig(const GatewayConfig& config, const LoadMarks& marks, ConfigErrors& errors);

// The security checks across sections (auth_reader.cc): principal names the access rules
// and rate limits use, client_cert principals without a listener asking for certificates.
void checkAuth(const GatewayConfig& config, ConfigErrors& errors);

}  // namespace infergate::config
