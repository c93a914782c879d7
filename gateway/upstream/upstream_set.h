#pragma once

// The configured upstreams as the request pipeline uses them: for each, what serves it —
// the builtin model repository (in-process), one GrpcUpstreamClient, or one
// HttpUpstreamClient per worker loop — plus its endpoints (round robin) and whether the
// readiness probe last found it reachable.
//
// Built once at start from the validated configuration (index i = config.upstreams[i],
// the numbering routing::RouteTable uses), shared read-only by every thread; the clients
// are thread-safe (gRPC) or used only on their own loop (HTTP).
//
// Shutdown order: shutdownGrpc() cancels gRPC calls in flight while the loops still run
// (their completions post to the loops); the HTTP clients are destroyed with the set,
// after the worker loops have stopped.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "codecs/status.h"
#include "config/config.h"
#include "gateway/http/worker_pool.h"
#include "gateway/upstream/builtin/repository.h"
#include "gateway/upstream/grpc_client.h"
#include "gateway/upstream/http_client.h"

namespace infergate::gateway::upstream {

class Upstream {
 public:
  using Protocol = config::UpstreamConfig::Protocol;

  const config::UpstreamConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }
  Protocol protocol() const { return config_.protocol; }

  // kBuiltin only (null otherwise).
  const std::shared_ptr<builtin::ModelRepository>& repository() const { return repository_; }
  // kGrpc only (null otherwise).
  GrpcUpstreamClient* grpc() const { return grpc_.get(); }
  // kHttp only: the client of `loop` (a worker loop of the pool the set was built with).
  HttpUpstreamClient& http(http::EventLoop& loop) const;
  // kHttp: the endpoint for the next request (round robin).
  const config::ListenAddress& nextEndpoint() const;

  // The upstream's own per-request limit (timeout_ms), 0 = none.
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(config_.timeout_ms); }

  // What the readiness probe last saw; builtin upstreams are always reachable.
  bool reachable() const { return reachable_.load(std::memory_order_relaxed); }
  void setReachable(bool reachable) { reachable_.store(reachable, std::memory_order_relaxed); }

 private:
  friend class UpstreamSet;
  explicit Upstream(config::UpstreamConfig config) : config_(std::move(config)) {}

  config::UpstreamConfig config_;
  std::shared_ptr<builtin::ModelRepository> repository_;
  std::unique_ptr<GrpcUpstreamClient> grpc_;
  std::vector<std::pair<http::EventLoop*, std::unique_ptr<HttpUpstreamClient>>> http_;
  mutable std::atomic<size_t> next_endpoint_{0};
  std::atomic<bool> reachable_{false};
};

class UpstreamSet {
 public:
  // Errors: INVALID_ARGUMENT for a builtin upstream naming unknown demo models.
  static codecs::StatusOr<std::unique_ptr<UpstreamSet>> build(
      const std::vector<config::UpstreamConfig>& upstreams, http::WorkerPool& pool);
  // One builtin upstream named `name` serving `repository` (tests, embeddings).
  static std::unique_ptr<UpstreamSet> builtinOnly(
      std::string name, std::shared_ptr<builtin::ModelRepository> repository);
  ~UpstreamSet();

  size_t size() const { return upstreams_.size(); }
  Upstream& at(size_t index) const { return *upstreams_[index]; }
  auto begin() const { return upstreams_.begin(); }
  auto end() const { return upstreams_.end(); }

  // Cancels every gRPC upstream call in flight and waits for their callbacks.
  void shutdownGrpc();

 private:
  std::vector<std::unique_ptr<Upstream>> upstreams_;
};

}  // namespace infergate::gateway::upstream
