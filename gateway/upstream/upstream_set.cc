#include "gateway/upstream/upstream_set.h"

namespace infergate::gateway::upstream {

HttpUpstreamClient& Upstream::http(http::EventLoop& loop) const {
  for (const auto& [owner, client] : http_) {
    if (owner == &loop) return *client;
  }
  // Every request runs on a worker loop of the pool the set was built with.
  std::abort();
}

const config::ListenAddress& Upstream::nextEndpoint() const {
  size_t i = next_endpoint_.fetch_add(1, std::memory_order_relaxed);
  return config_.endpoints[i % config_.endpoints.size()];
}

codecs::StatusOr<std::unique_ptr<UpstreamSet>> UpstreamSet::build(
    const std::vector<config::UpstreamConfig>& upstreams, http::WorkerPool& pool) {
  auto set = std::make_unique<UpstreamSet>();
  for (const config::UpstreamConfig& c : upstreams) {
    std::unique_ptr<Upstream> u(new Upstream(c));
    switch (c.protocol) {
      case Upstream::Protocol::kBuiltin:
        if (codecs::Status names = builtin::ModelRepository::checkDemoNames(c.models); !names.ok()) {
          return codecs::invalidArgument(config::formatLocation(c.where), ": upstream '", c.name,
                                         "': ", codecs::messageOf(names));
        }
        u->repository_ = builtin::ModelRepository::createDemo(c.models);
        u->setReachable(true);
        break;
      case Upstream::Protocol::kGrpc:
        u->grpc_ = std::make_unique<GrpcUpstreamClient>(c);
        break;
      case Upstream::Protocol::kHttp: {
        HttpClientOptions options;
        options.upstream_name = c.name;
        options.max_connections_per_endpoint = c.max_connections;
        options.connect_timeout = std::chrono::milliseconds(c.connect_timeout_ms);
        for (size_t i = 0; i < pool.size(); ++i) {
          http::EventLoop& loop = pool.loop(i);
          u->http_.emplace_back(&loop, std::make_unique<HttpUpstreamClient>(loop, options));
        }
        break;
      }
    }
    set->upstreams_.push_back(std::move(u));
  }
  return set;
}

std::unique_ptr<UpstreamSet> UpstreamSet::builtinOnly(
    std::string name, std::shared_ptr<builtin::ModelRepository> repository) {
  config::UpstreamConfig c;
  c.name = std::move(name);
  c.protocol = Upstream::Protocol::kBuiltin;
  std::unique_ptr<Upstream> u(new Upstream(std::move(c)));
  u->repository_ = std::move(repository);
  u->setReachable(true);
  auto set = std::make_unique<UpstreamSet>();
  set->upstreams_.push_back(std::move(u));
  return set;
}

UpstreamSet::~UpstreamSet() { shutdownGrpc(); }

void UpstreamSet::shutdownGrpc() {
  for (auto& u : upstreams_) {
    if (u->grpc_) u->grpc_->shutdown();
  }
}

}  // namespace infergate::gateway::upstream
