#pragma once

// Private to config/: the readers of one `upstreams` entry, one `routes` entry and a
// header map, split out of config_loader.cc (which reads the small sections, runs
// yaml-cpp and defines readBoolean). Like every YamlReader read, each records its own
// errors and returns what it could read, so one pass reports every mistake in the file.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/config_checks.h"
#include "config/yaml_reader.h"

namespace infergate::config {

inline constexpr uint64_t kMaxTimeoutMs = 86400000;  // 24 hours, for every *_ms key

// The names Triton's python backend gives its own shared-memory objects start with this
// (after the leading '/'). A client allowed to register such a key could read and write
// that backend's tensors, and a handoff pool named so could collide with them.
inline constexpr std::string_view kTritonReservedShmPrefix = "triton_python_backend_shm_region";

// Who a header map is for: the rules differ.
enum class HeaderUse {
  kMatch,         // routes[].match.headers: compared with a request's headers or metadata
  kHttpUpstream,  // upstreams[].headers of an http upstream (or one of unknown protocol)
  kGrpcUpstream,  // upstreams[].headers of a grpc upstream: sent as gRPC metadata
};

// A YAML 1.2 boolean (true/True/TRUE, false/False/FALSE); anything else is an error,
// "expected a boolean, got a string" (so `yes` and `"true"` are refused).
std::optional<bool> readBoolean(YamlReader& reader, const YamlValue& value);

// A file path read from the config (TLS certificates, keys, CA bundles): a non-empty
// string, "a path is required" otherwise. A relative path is resolved against the
// directory of the config file (resolveConfigPath). The file is not opened here.
std::optional<std::string> readConfigPath(YamlReader& reader, const YamlValue& value);

// `path` as the gateway opens it: unchanged when absolute, or when `config_source` names
// no directory ("demo.yaml": relative to the working directory, as written); otherwise
// joined to the directory of `config_source` ("/etc/infergate/infergate.yaml" and
// "tls/server.pem" give "/etc/infergate/tls/server.pem").
std::string resolveConfigPath(std::string_view config_source, std::string_view path);

// `text` with ASCII letters lowercased.
std::string asciiLowercase(std::string_view text);

// Empty when `name` is an HTTP field name (an RFC 9110 token); otherwise the error.
std::string headerNameProblem(std::string_view name);

// A mapping of header name -> string value, names stored lowercase. An entry with an
// error is left out; then `*complete` (when given) turns false.
std::vector<HeaderValue> readHeaderValues(YamlReader& reader, const YamlValue& value,
                                          HeaderUse use, bool* complete = nullptr);

// One `upstreams` entry. nullopt when it has no readable name (it is then not kept);
// `names_known` turns false when a name was written but could not be read, as a route
// may mean it. On success `marks.name` is set (the caller sets `marks.index`).
std::optional<UpstreamConfig> readUpstream(YamlReader& reader, const YamlValue& value,
                                           UpstreamMarks& marks, bool& names_known);

// One `routes` entry. nullopt when its match or its targets could not be read: a route
// with a half-read match must not take part in the unreachable-route check. The caller
// sets `marks.index`; the rest of `marks` is filled here.
std::optional<RouteConfig> readRoute(YamlReader& reader, const YamlValue& value,
                                     RouteMarks& marks);

// `listeners: [http, grpc]` (shm, access rules): sets `http` and `grpc` to whether each is
// listed (both false first); unknown or repeated names are errors. The number of items
// read, or nullopt when `value` is not a sequence (then nothing changes).
std::optional<size_t> readListenerList(YamlReader& reader, const YamlValue& value, bool& http, bool& grpc);

// `routes[].auth` and each `auth.api_groups` entry: public | authenticated | deny | a list
// of principals, or a mapping {allow: ..., listeners: [http, grpc]}. auth_reader.cc.
// `listeners_allowed`: false where `listeners` means nothing (the admin API's rule).
std::optional<AccessRule> readAccessRule(YamlReader& reader, const YamlValue& value,
                                         bool listeners_allowed = true);
// The `auth` section into `auth`; the `rate_limits` section into `out`.
void readAuth(YamlReader& reader, const YamlValue& value, AuthConfig& auth);
void readRateLimits(YamlReader& reader, const YamlValue& value, std::vector<RateLimitConfig>& out);

}  // namespace infergate::config
