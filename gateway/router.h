#pragma once

// The routing step of the pipeline (DESIGN.md "The pipeline"): a request's model, version
// and headers -> the route, the upstream chosen by the route's split, the names to ask
// the upstream for (rewrite), the deadline, and the mirror. Owns the route table snapshot
// and the upstreams.
//
//   decide(model, version, headers, caller)
//     no route          NOT_FOUND "no route for model 'm'" (HTTP 404)
//     route's auth      UNAUTHENTICATED / PERMISSION_DENIED when the caller fails it
//     otherwise         a Decision; `table` keeps the snapshot alive for the request
//
// Forwarded headers: forwardedHeaders() picks the client headers / gRPC metadata that
// travel upstream (config `forward.headers`), never hop-by-hop ones; the upstream's own
// `headers` are added by its client.
//
// Reload: reload() builds a new RouterSnapshot (table, upstreams, forward list) from a
// validated configuration, carrying over the state of the upstreams it keeps
// (UpstreamSet::build), and swaps it in atomically. A Decision holds the snapshot it was
// made from, so a request in flight finishes on the upstreams it started with.
//
// Threads: decide() and the accessors from any thread; the snapshot pointer is read with
// an atomic load. reload() from any thread (serialized inside).

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"
#include "gateway/http/http_message.h"
#include "gateway/security.h"
#include "gateway/telemetry/request_info.h"
#include "gateway/telemetry/request_metrics.h"
#include "gateway/upstream/host_addresses.h"
#include "gateway/upstream/upstream_set.h"
#include "routing/route_table.h"
#include "shm/region_registry.h"

namespace infergate::gateway {

// One loaded configuration.
struct RouterSnapshot {
  std::shared_ptr<const config::GatewayConfig> config;
  std::shared_ptr<const routing::RouteTable> table;
  std::unique_ptr<upstream::UpstreamSet> upstreams;
  std::string config_hash;  // of the file's text (admin API, metrics)
  uint64_t generation = 0;  // 1 for the first, +1 per reload
  // The first letters of config->forward.headers' entries: a request's fields that start
  // with none of them (most: Host, Content-Type, ...) are passed over before being
  // lowercased. `any`: an entry "*" (or an empty one) may match any name.
  struct ForwardStarts {
    std::array<bool, 256> letters{};
    bool any = false;
  } forward_starts;
};

struct Decision {
  std::shared_ptr<const RouterSnapshot> snapshot;
  const routing::Route* route = nullptr;
  upstream::Upstream* upstream = nullptr;
  upstream::Upstream* mirror = nullptr;  // null: none
  std::string client_model, client_version;      // as the client asked
  std::string upstream_model, upstream_version;  // as the upstream is asked
  std::chrono::milliseconds timeout{0};          // route's, else upstream's; 0 = none
  // For the fleet: the upstream model, the hash header's value, the deadline. Frontends
  // add the request's sequence (pick.sequence) where they read it.
  upstream::PickContext pick;

  bool rewrites() const {
    return client_model != upstream_model || client_version != upstream_version;
  }
  // The version an answer shows the client in place of the upstream's: the one it asked
  // for when the route rewrote it; otherwise "" and the upstream's own stands, as a
  // direct call shows it (Triton answers the version it resolved: '1' for '01').
  std::string_view versionShown() const {
    return client_version != upstream_version ? std::string_view(client_version) : std::string_view();
  }
  // The mirror's placement: the route's model and deadline, never a sequence (shadow
  // traffic must not bind sequences on the mirror's endpoints, nor fail for them).
  upstream::PickContext mirrorPick() const {
    upstream::PickContext p;
    p.model = upstream_model;
    p.deadline = pick.deadline;
    return p;
  }
};

// HTTP request headers as routing::RequestHeaders (case-insensitive names).
class HttpRequestHeaders final : public routing::RequestHeaders {
 public:
  explicit HttpRequestHeaders(const http::HeaderList& headers) : headers_(headers) {}
  std::optional<std::string_view> find(std::string_view name) const override {
    const std::string_view* v = headers_.find(name);
    return v ? std::optional<std::string_view>(*v) : std::nullopt;
  }

 private:
  const http::HeaderList& headers_;
};

using HeaderPairs = std::vector<std::pair<std::string, std::string>>;

// Whether `lowercase_name` is a hop-by-hop header or one the client layer sets itself
// (Host, Content-Length, ...), never forwarded.
bool isHopByHopHeader(std::string_view lowercase_name);

class Router {
 public:
  // Builds the route table and the upstreams. Errors: as RouteTable::build and
  // UpstreamSet::build.
  // `hosts`: the addresses of host-name endpoints, as the gateway's discovery resolves
  // them (UpstreamSet::build); null: grpc++ and libcurl resolve those names.
  static codecs::StatusOr<std::unique_ptr<Router>> create(const config::GatewayConfig& config,
                                                          http::WorkerPool& pool,
                                                          std::shared_ptr<upstream::HostAddresses> hosts = nullptr);
  // Swaps in `config` (validated by the loader). `prepare` sees the new snapshot before it
  // is swapped in (discovery fills its dns: endpoints). On an error the current snapshot
  // stays.
  codecs::Status reload(const config::GatewayConfig& config,
                        const std::function<void(const RouterSnapshot&)>& prepare = nullptr);

  // A router with one builtin upstream ("builtin") serving `repository`, and one route
  // taking every model to it: the frontends' tests, and any embedding without a config.
  static std::unique_ptr<Router> builtinOnly(std::shared_ptr<builtin::ModelRepository> repository,
                                             http::WorkerPool& pool);

  // `caller`: checked against the route's `auth` rule (UNAUTHENTICATED / PERMISSION_DENIED).
  codecs::StatusOr<Decision> decide(std::string_view model, std::string_view version,
                                    const routing::RequestHeaders* headers, const Caller& caller) const;

  std::shared_ptr<const RouterSnapshot> snapshot() const { return snapshot_.load(); }
  // What create() was given (null: none); discovery fills it.
  const std::shared_ptr<upstream::HostAddresses>& hosts() const { return hosts_; }
  std::shared_ptr<const routing::RouteTable> table() const { return snapshot()->table; }

  // The configured client headers of an HTTP request, lowercase names: by the current
  // snapshot, or by `held` (a Decision's: no second load of the snapshot per request).
  HeaderPairs forwardedHeaders(const http::HeaderList& headers) const {
    return forwardedHeaders(*snapshot(), headers);
  }
  static HeaderPairs forwardedHeaders(const RouterSnapshot& held, const http::HeaderList& headers);
  // The same for gRPC metadata (already lowercase); `-bin` keys are kept only toward gRPC.
  template <typename Metadata>
  HeaderPairs forwardedMetadata(const Metadata& metadata, bool toward_grpc) const {
    // Loaded once per request, and held: a reload may drop the snapshot meanwhile.
    const std::shared_ptr<const RouterSnapshot> held = snapshot();
    const config::ForwardConfig& forward = held->config->forward;
    HeaderPairs out;
    for (const auto& [key, value] : metadata) {
      std::string_view k(key.data(), key.size());
      if (!forwards(forward, k) || (!toward_grpc && k.ends_with("-bin"))) continue;
      out.emplace_back(std::string(k), std::string(value.data(), value.size()));
    }
    return out;
  }
  // Whether `forward` lets header / metadata `lowercase_name` travel upstream.
  static bool forwards(const config::ForwardConfig& forward, std::string_view lowercase_name);

  // The client shared-memory regions registered at the gateway: one table for the process,
  // whatever the reloads (its policy follows the loaded config's `shm:` section).
  shm::RegionRegistry& regions() const { return *regions_; }

  // Stops the gRPC upstream calls in flight (see UpstreamSet::shutdownGrpc).
  void shutdown() { snapshot()->upstreams->shutdownGrpc(); }
  // Drops the HTTP upstream calls still in flight (see UpstreamSet::abandonHttp); once the
  // worker loops have stopped.
  void abandonHttp() { snapshot()->upstreams->abandonHttp(); }

 private:
  explicit Router(http::WorkerPool* pool)
      : pool_(pool), regions_(std::make_shared<shm::RegionRegistry>()) {}
  codecs::StatusOr<std::shared_ptr<const RouterSnapshot>> build(const config::GatewayConfig& config,
                                                                 const RouterSnapshot* previous) const;

  http::WorkerPool* pool_;
  std::shared_ptr<upstream::HostAddresses> hosts_;
  std::mutex reload_mu_;
  std::atomic<std::shared_ptr<const RouterSnapshot>> snapshot_;
  std::shared_ptr<shm::RegionRegistry> regions_;
};

// The registry's rules from the config's `shm:` section; the handoff pools' key prefixes
// are reserved.
shm::RegistryPolicy registryPolicy(const config::GatewayConfig& config);

// A short, stable hash of a configuration's text, for the admin API and metrics labels.
std::string configHash(std::string_view text);

// The HTTP header that carries Triton's restricted-API key `key` over gRPC
// ("triton-grpc-protocol-<key>") and back: gRPC metadata named so becomes the HTTP header
// `<key>` toward an HTTP upstream.
inline constexpr std::string_view kGrpcRestrictedPrefix = "triton-grpc-protocol-";
HeaderPairs metadataToHttpHeaders(HeaderPairs metadata);

// ---- telemetry ----

// The request-metrics label set of a routed request: the client's names, the route's
// name, the upstream's name and protocol.
telemetry::SeriesKey seriesKeyOf(telemetry::Protocol protocol, const Decision& d);
// Reads x-request-id, traceparent and tracestate from HTTP headers into `info`.
void readTraceHeaders(const http::HeaderList& headers, telemetry::RequestInfo& info);
// The same from gRPC metadata (lowercase keys).
template <typename Metadata>
void readTraceMetadata(const Metadata& metadata, telemetry::RequestInfo& info) {
  auto find = [&](std::string_view key) -> std::string_view {
    auto it = metadata.find(typename Metadata::key_type(key.data(), key.size()));
    return it == metadata.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
  };
  info.request_id = std::string(find("x-request-id"));
  if (std::string_view tp = find("traceparent"); !tp.empty()) {
    info.trace = telemetry::parseTraceContext(tp, find("tracestate"));
  }
}
// The headers / metadata toward an upstream, stamped for tracing: where `forward.headers`
// lets traceparent through, it carries the gateway's span (the client's value replaced; an
// invalid one dropped) and tracestate goes as it came; x-request-id is the request's id (the client's, else one the gateway made up,
// which is also set in `info` so that the client gets it back).
void stampTraceHeaders(HeaderPairs& headers, telemetry::RequestInfo& info);

// ---- what every forwarding path says of an upstream's answer ----

// `status` with every quoted 'upstream_model' in its message written as 'client_model',
// so that a rewrite stays invisible in errors; unchanged when the names are the same.
codecs::Status publicStatus(const codecs::Status& status, std::string_view upstream_model,
                            std::string_view client_model);
std::string publicMessage(std::string_view message, std::string_view upstream_model,
                          std::string_view client_model);
// An answer that broke the protocol: INVALID_ARGUMENT stamped ErrorOrigin::kUpstream
// (HTTP 502 / gRPC UNAVAILABLE), "upstream 'u' answered a malformed <what>: <why>".
codecs::Status upstreamGarbage(std::string_view upstream, std::string_view what,
                               const codecs::Status& why);
// An HTTP upstream's error answer as the status it stands for: its own `{"error"}`
// message, the code from its HTTP status (codeForHttpStatus).
codecs::Status httpErrorAnswer(int http_status, std::string_view body, std::string_view upstream);
// "/v2/models/<model>[/versions/<version>]<suffix>", the names as they are: for names that
// came from an HTTP path or the configuration.
std::string modelPath(std::string_view model, std::string_view version, std::string_view suffix);
// The same path for names that did not come from an HTTP path (a gRPC client's): the version
// read as Triton reads it (" 1" and "01" are "1"; "abc" or "-1" answer Triton's
// INVALID_ARGUMENT), and a name that cannot travel verbatim as one path segment
// (codecs::isVerbatimPathSegment) answered as Triton answers an unknown model, NOT_FOUND: no
// Triton HTTP server can serve it, and an HTTP client would send another path than the one
// the route decided on ("a/../b" reaches model b, "a?x" model a).
codecs::StatusOr<std::string> httpModelPath(std::string_view model, std::string_view version,
                                            std::string_view suffix);
// NOT_FOUND "Request for unknown model: '<model>' is not found" (Triton's text).
codecs::Status unknownModel(std::string_view model);

}  // namespace infergate::gateway
