#pragma once

// The configured upstreams as the request pipeline uses them: for each, what serves it —
// the builtin model repository (in-process), or its fleet of endpoints (fleet.h: each
// gRPC endpoint with its own channels) and, for HTTP, one HttpUpstreamClient per worker
// loop; for plaintext gRPC, one GrpcLoopClient per worker loop too.
//
// Built once at start from the validated configuration (index i = config.upstreams[i],
// the numbering routing::RouteTable uses), shared read-only by every thread; the clients
// are thread-safe (gRPC) or used only on their own loop (HTTP).
//
// Shutdown order: shutdownGrpc() cancels gRPC calls in flight while the loops still run
// (their completions post to the loops); once the worker loops have stopped, abandonHttp()
// drops the calls of the loops' clients (HTTP, and gRPC's native) still in flight, and
// those clients are destroyed with the set.
//
// Reloads: build() takes the set it replaces; an upstream whose configuration is unchanged
// keeps its fleet (endpoints, health, connections) and HTTP clients; a changed one keeps
// the state of the endpoints it still lists, and its sequence bindings.
//
// TLS: build() reads and checks each upstream's `tls` files (tls/client_credentials.h),
// at start and on every reload; one that does not load fails the build. Changed files
// (a renewed client certificate, a new CA bundle) count as a changed transport: new
// connections. An upstream with insecure_skip_verify logs the warning
// `upstream_tls_insecure` each time a set is built.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"
#include "gateway/http/worker_pool.h"
#include "gateway/upstream/builtin/repository.h"
#include "gateway/upstream/fleet.h"
#include "gateway/upstream/host_addresses.h"
#include "gateway/upstream/grpc_client_native.h"
#include "gateway/upstream/http_client.h"
#include "tls/client_credentials.h"

namespace infergate::gateway::upstream {

class Upstream {
 public:
  using Protocol = config::UpstreamConfig::Protocol;

  const config::UpstreamConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }
  Protocol protocol() const { return config_.protocol; }

  // kBuiltin only (null otherwise).
  const std::shared_ptr<builtin::ModelRepository>& repository() const { return repository_; }
  // kGrpc / kHttp: the endpoints and the choice among them (null for kBuiltin).
  const std::shared_ptr<UpstreamFleet>& fleet() const { return fleet_; }
  // kHttp only: the client of `loop` (a worker loop of the pool the set was built with).
  const std::shared_ptr<HttpUpstreamClient>& http(http::EventLoop& loop) const;
  // kGrpc: the worker's own client of `loop` (grpc_client_native.h; TLS too), for
  // requests that arrived on that loop; null for any other upstream or thread's loop.
  std::shared_ptr<GrpcLoopClient> grpcOnLoop(http::EventLoop& loop) const;
  // kGrpc / kHttp with `tls`: its files as read when the set was built (null: plaintext).
  const std::shared_ptr<const tls::ClientTls>& clientTls() const { return tls_; }

  // The upstream's own per-request limit (timeout_ms), 0 = none.
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(config_.timeout_ms); }

  // Whether requests can be served: builtin always; otherwise some endpoint is routable
  // and was found healthy by its checks (or checks are off).
  bool reachable() const;

 private:
  friend class UpstreamSet;
  explicit Upstream(config::UpstreamConfig config) : config_(std::move(config)) {}

  config::UpstreamConfig config_;
  std::shared_ptr<builtin::ModelRepository> repository_;
  std::shared_ptr<UpstreamFleet> fleet_;
  std::vector<std::pair<http::EventLoop*, std::shared_ptr<HttpUpstreamClient>>> http_;
  std::vector<std::pair<http::EventLoop*, std::shared_ptr<GrpcLoopClient>>> grpc_loop_;
  std::shared_ptr<const tls::ClientTls> tls_;
};

class UpstreamSet {
 public:
  // Errors: INVALID_ARGUMENT for a builtin upstream naming unknown demo models, or a `tls`
  // file that does not load ("FILE:LINE:COL: upstreams[u].tls.ca: PATH: ...").
  // `previous`: the set this one replaces (a reload), whose state is carried over.
  // `hosts`: the addresses discovery resolves for host-name endpoints, with which the
  // worker's own clients serve those too (null: grpc++ and libcurl resolve them).
  static codecs::StatusOr<std::unique_ptr<UpstreamSet>> build(
      const std::vector<config::UpstreamConfig>& upstreams, http::WorkerPool& pool,
      const UpstreamSet* previous = nullptr, std::shared_ptr<const HostAddresses> hosts = nullptr);
  // One builtin upstream named `name` serving `repository` (tests, embeddings).
  static std::unique_ptr<UpstreamSet> builtinOnly(
      std::string name, std::shared_ptr<builtin::ModelRepository> repository);
  ~UpstreamSet();

  size_t size() const { return upstreams_.size(); }
  Upstream& at(size_t index) const { return *upstreams_[index]; }
  // The upstream named `name`, or null.
  Upstream* find(std::string_view name) const;
  auto begin() const { return upstreams_.begin(); }
  auto end() const { return upstreams_.end(); }

  // Cancels every gRPC upstream call in flight and waits for their callbacks.
  void shutdownGrpc();
  // Ends every HTTP upstream call in flight without calling back (HttpUpstreamClient::
  // abandonAll); after the worker loops have stopped.
  void abandonHttp();

 private:
  std::vector<std::unique_ptr<Upstream>> upstreams_;
};

}  // namespace infergate::gateway::upstream
