#pragma once

// YAML -> GatewayConfig, validated. The only way into config/ for the rest of the gateway;
// yaml-cpp stays behind this header (its exceptions are caught inside config/).
//
// Every error names where it is, one per line, all of them at once:
//   demo.yaml:3:20: listeners.http.address: port 70000 is out of range (0-65535)
//   demo.yaml:9:5: upstreams[0].protocol: missing required key "protocol" (...)
// Lines and columns are 1-based, as an editor shows them; lines are sorted by position.
// The schema, its defaults and its checks are in config/README.md.
//
// Both functions are pure apart from reading the file, and safe to call from any thread.

#include <string>
#include <string_view>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::config {

// Reads `path` and parses it (errors name `path` as the file). A file that cannot be read
// is NOT_FOUND (missing) or FAILED_PRECONDITION (anything else: a directory, no
// permission, over 16 MiB), "cannot read PATH: reason". An invalid file is one
// INVALID_ARGUMENT whose message has one line per error.
codecs::StatusOr<GatewayConfig> loadConfigFile(const std::string& path);

// Parses YAML text; errors name `source_name` as the file. INVALID_ARGUMENT as above.
codecs::StatusOr<GatewayConfig> parseConfig(std::string_view yaml_text,
                                            std::string_view source_name);

}  // namespace infergate::config
