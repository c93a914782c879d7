#pragma once

// The routing table: which upstream answers a request, decided from the model name, the
// model version and the request's headers (HTTP) or metadata (gRPC).
//
//   config::GatewayConfig --RouteTable::build()--> shared_ptr<const RouteTable>
//   frontend: RouteRequest{model, version, headers} --match()--> const Route* (or none)
//             route->pick(draw) -> the upstream's index; route->upstreamModel(...) etc.
//
// A RouteTable is an immutable snapshot: built once, never changed, read from every
// thread without locks; a reload builds a new one and swaps the pointer, and requests in
// flight keep the snapshot they matched against (they hold the shared_ptr).
//
// Matching: routes are tried in file order and the first whose every condition holds
// wins (exact model, model prefix or any model; version if given; each header if given).
// Exact names are indexed, so a table of thousands of exact routes costs one hash lookup
// plus the prefix and catch-all routes written before the hit.
//
// Upstreams are numbered by their position in GatewayConfig::upstreams; the table knows
// only names and numbers, the gateway owns the clients.

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::routing {

// The request's headers or metadata, as the frontend has them. `name` is lowercase.
class RequestHeaders {
 public:
  virtual ~RequestHeaders() = default;
  // The first value of header `name`, or nullopt.
  virtual std::optional<std::string_view> find(std::string_view name) const = 0;
};

struct RouteRequest {
  std::string_view model;
  std::string_view version;                // "" when the client named none
  const RequestHeaders* headers = nullptr;  // null: no headers (header conditions fail)
};

struct Route {
  struct Target {
    size_t upstream = 0;  // index into GatewayConfig::upstreams / RouteTable::upstreams()
    uint32_t weight = 0;
  };

  size_t index = 0;  // position in GatewayConfig::routes
  std::string name;  // config `name`, else "routes[N]": the metrics' and logs' label
  config::RouteMatch match;
  std::vector<Target> targets;  // weights sum to 100 (one target: 100)
  std::optional<size_t> mirror;  // upstream index
  std::string rewrite_model;     // "" = keep
  std::string rewrite_version;   // "" = keep
  std::chrono::milliseconds timeout{0};  // 0 = none at the route level
  std::string description;  // "routes[2] (model_prefix llm-)", for logs and errors

  // Whether the route's conditions hold for `request`.
  bool matches(const RouteRequest& request) const;
  // The target for a uniform random draw (any uint64_t): weight w of a total of 100 is
  // chosen for w% of the draws. With one target, that target.
  size_t pick(uint64_t draw) const;
  // The model name / version the upstream is asked for.
  std::string_view upstreamModel(std::string_view client_model) const {
    return rewrite_model.empty() ? client_model : std::string_view(rewrite_model);
  }
  std::string_view upstreamVersion(std::string_view client_version) const {
    return rewrite_version.empty() ? client_version : std::string_view(rewrite_version);
  }
  bool rewrites() const { return !rewrite_model.empty() || !rewrite_version.empty(); }
};

class RouteTable {
 public:
  // Errors: INVALID_ARGUMENT when a route names an upstream that is not in the config, or
  // its targets are missing or do not weigh 100 in all (the loader refuses such files;
  // this guards hand-built configs).
  static codecs::StatusOr<std::shared_ptr<const RouteTable>> build(
      const config::GatewayConfig& config);

  // The first route that matches, or nullptr.
  const Route* match(const RouteRequest& request) const;

  const std::vector<Route>& routes() const { return routes_; }
  // Upstream names by index.
  const std::vector<std::string>& upstreams() const { return upstream_names_; }

 private:
  // Lets exact_ be searched with the request's string_view: match() never allocates.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };

  std::vector<Route> routes_;
  std::vector<std::string> upstream_names_;
  // Exact model name -> every route with that exact name, by index (several when they
  // differ in version or headers).
  std::unordered_map<std::string, std::vector<size_t>, NameHash, std::equal_to<>> exact_;
  // Indices of prefix and catch-all routes, in order.
  std::vector<size_t> general_;
};

}  // namespace infergate::routing
