#pragma once

// The routing step of the pipeline (DESIGN.md "The pipeline"): a request's model, version
// and headers -> the route, the upstream chosen by the route's split, the names to ask
// the upstream for (rewrite), the deadline, and the mirror. Owns the route table snapshot
// and the upstreams.
//
//   decide(model, version, headers)
//     no route          NOT_FOUND "no route for model 'm'" (HTTP 404)
//     otherwise         a Decision; `table` keeps the snapshot alive for the request
//
// Forwarded headers: forwardedHeaders() picks the client headers / gRPC metadata that
// travel upstream (config `forward.headers`), never hop-by-hop ones; the upstream's own
// `headers` are added by its client.
//
// Threads: decide() and the accessors from any thread; the table pointer is read with an
// atomic load, so a reload may swap it while requests run.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"
#include "gateway/http/http_message.h"
#include "gateway/upstream/upstream_set.h"
#include "routing/route_table.h"

namespace infergate::gateway {

struct Decision {
  std::shared_ptr<const routing::RouteTable> table;
  const routing::Route* route = nullptr;
  upstream::Upstream* upstream = nullptr;
  upstream::Upstream* mirror = nullptr;  // null: none
  std::string client_model, client_version;      // as the client asked
  std::string upstream_model, upstream_version;  // as the upstream is asked
  std::chrono::milliseconds timeout{0};          // route's, else upstream's; 0 = none

  bool rewrites() const {
    return client_model != upstream_model || client_version != upstream_version;
  }
};

// HTTP request headers as routing::RequestHeaders (case-insensitive names).
class HttpRequestHeaders final : public routing::RequestHeaders {
 public:
  explicit HttpRequestHeaders(const http::HeaderList& headers) : headers_(headers) {}
  std::optional<std::string_view> find(std::string_view name) const override {
    const std::string* v = headers_.find(name);
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
  static codecs::StatusOr<std::unique_ptr<Router>> create(const config::GatewayConfig& config,
                                                          http::WorkerPool& pool);

  // A router with one builtin upstream ("builtin") serving `repository`, and one route
  // taking every model to it: the frontends' tests, and any embedding without a config.
  static std::unique_ptr<Router> builtinOnly(std::shared_ptr<builtin::ModelRepository> repository,
                                             http::WorkerPool& pool);

  codecs::StatusOr<Decision> decide(std::string_view model, std::string_view version,
                                    const routing::RequestHeaders* headers) const;

  std::shared_ptr<const routing::RouteTable> table() const { return std::atomic_load(&table_); }
  upstream::UpstreamSet& upstreams() const { return *upstreams_; }

  // The configured client headers of an HTTP request, lowercase names.
  HeaderPairs forwardedHeaders(const http::HeaderList& headers) const;
  // The same for gRPC metadata (already lowercase); `-bin` keys are kept only toward gRPC.
  template <typename Metadata>
  HeaderPairs forwardedMetadata(const Metadata& metadata, bool toward_grpc) const {
    HeaderPairs out;
    for (const auto& [key, value] : metadata) {
      std::string_view k(key.data(), key.size());
      if (!forwards(k) || (!toward_grpc && k.ends_with("-bin"))) continue;
      out.emplace_back(std::string(k), std::string(value.data(), value.size()));
    }
    return out;
  }
  bool forwards(std::string_view lowercase_name) const;

  // Stops the gRPC upstream calls in flight (see UpstreamSet::shutdownGrpc).
  void shutdown() { upstreams_->shutdownGrpc(); }

 private:
  Router() = default;

  std::shared_ptr<const routing::RouteTable> table_;
  std::unique_ptr<upstream::UpstreamSet> upstreams_;
  config::ForwardConfig forward_;
};

// The HTTP header that carries Triton's restricted-API key `key` over gRPC
// ("triton-grpc-protocol-<key>") and back: gRPC metadata named so becomes the HTTP header
// `<key>` toward an HTTP upstream.
inline constexpr std::string_view kGrpcRestrictedPrefix = "triton-grpc-protocol-";
HeaderPairs metadataToHttpHeaders(HeaderPairs metadata);

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
// "/v2/models/<model>[/versions/<version>]<suffix>".
std::string modelPath(std::string_view model, std::string_view version, std::string_view suffix);

}  // namespace infergate::gateway
