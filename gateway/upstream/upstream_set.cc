#include "gateway/upstream/upstream_set.h"

namespace infergate::gateway::upstream {
namespace {

bool sameHeaders(const std::vector<config::HeaderValue>& a, const std::vector<config::HeaderValue>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
  }
  return true;
}

// Whether connections made under `a` serve `b` as well: then a reload keeps them.
bool sameTransport(const config::UpstreamConfig& a, const config::UpstreamConfig& b) {
  return a.protocol == b.protocol && a.channels == b.channels &&
         a.connect_timeout_ms == b.connect_timeout_ms && a.max_connections == b.max_connections &&
         sameHeaders(a.headers, b.headers);
}

}  // namespace

const std::shared_ptr<HttpUpstreamClient>& Upstream::http(http::EventLoop& loop) const {
  for (const auto& [owner, client] : http_) {
    if (owner == &loop) return client;
  }
  // Every request runs on a worker loop of the pool the set was built with.
  std::abort();
}

bool Upstream::reachable() const {
  if (!fleet_) return true;
  const auto now = Endpoint::Clock::now();
  const bool checked = config_.health_check.enabled;
  // Held by name: a range-for over *endpoints() would let the list go while it runs.
  std::shared_ptr<const UpstreamFleet::EndpointList> endpoints = fleet_->endpoints();
  for (const auto& e : *endpoints) {
    if (!e->routable(now)) continue;
    if (!checked || e->activeHealth() == ActiveHealth::kHealthy) return true;
  }
  return false;
}

codecs::StatusOr<std::unique_ptr<UpstreamSet>> UpstreamSet::build(
    const std::vector<config::UpstreamConfig>& upstreams, http::WorkerPool& pool,
    const UpstreamSet* previous) {
  auto set = std::make_unique<UpstreamSet>();
  for (const config::UpstreamConfig& c : upstreams) {
    std::unique_ptr<Upstream> u(new Upstream(c));
    const Upstream* before = previous ? previous->find(c.name) : nullptr;
    const bool same = before && sameTransport(before->config(), c);
    switch (c.protocol) {
      case Upstream::Protocol::kBuiltin:
        if (codecs::Status names = builtin::ModelRepository::checkDemoNames(c.models); !names.ok()) {
          return codecs::invalidArgument(config::formatLocation(c.where), ": upstream '", c.name,
                                         "': ", codecs::messageOf(names));
        }
        u->repository_ = builtin::ModelRepository::createDemo(c.models);
        break;
      case Upstream::Protocol::kGrpc:
      case Upstream::Protocol::kHttp: {
        // Sequence bindings survive any change; endpoints (with their connections and
        // health) only when the transport is the same.
        std::shared_ptr<routing::AffinityTable> affinity =
            before && before->fleet() ? before->fleet()->sharedAffinity() : nullptr;
        std::shared_ptr<const UpstreamFleet::EndpointList> kept =
            same && before->fleet() ? before->fleet()->endpoints() : nullptr;
        u->fleet_ = UpstreamFleet::create(c, std::move(affinity), kept.get());
        if (c.protocol == Upstream::Protocol::kGrpc) break;
        if (same) {
          u->http_ = before->http_;
          break;
        }
        HttpClientOptions options;
        options.upstream_name = c.name;
        options.max_connections_per_endpoint = c.max_connections;
        options.connect_timeout = std::chrono::milliseconds(c.connect_timeout_ms);
        for (size_t i = 0; i < pool.size(); ++i) {
          http::EventLoop& loop = pool.loop(i);
          // A client lives on its loop and dies there, in a task of its own: the last
          // reference may go anywhere, even inside one of the client's own callbacks (a
          // call finishing after a reload dropped the old set), where deleting it would
          // pull the client from under its caller. Once the loop has stopped, the task dies
          // with the loop, still on a live event base.
          std::shared_ptr<HttpUpstreamClient> client(
              new HttpUpstreamClient(loop, options), [&loop](HttpUpstreamClient* c) {
                auto owned = std::make_shared<std::unique_ptr<HttpUpstreamClient>>(c);
                loop.post([owned] { owned->reset(); });
              });
          u->http_.emplace_back(&loop, std::move(client));
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
  auto set = std::make_unique<UpstreamSet>();
  set->upstreams_.push_back(std::move(u));
  return set;
}

// gRPC calls are not cancelled here: a reload's new set may share these endpoints, and an
// endpoint shuts its own channels down when its last request is gone (fleet.h).
UpstreamSet::~UpstreamSet() = default;

Upstream* UpstreamSet::find(std::string_view name) const {
  for (const auto& u : upstreams_) {
    if (u->name() == name) return u.get();
  }
  return nullptr;
}

void UpstreamSet::shutdownGrpc() {
  for (auto& u : upstreams_) {
    if (u->fleet_ && u->protocol() == Upstream::Protocol::kGrpc) u->fleet_->shutdownGrpc();
  }
}

}  // namespace infergate::gateway::upstream
