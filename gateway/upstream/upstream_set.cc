#include "gateway/upstream/upstream_set.h"

#include "gateway/telemetry/log.h"

namespace infergate::gateway::upstream {
namespace {

bool sameHeaders(const std::vector<config::HeaderValue>& a, const std::vector<config::HeaderValue>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
  }
  return true;
}

// Both plaintext, or TLS with the same settings and the same file contents (a renewed
// certificate makes new connections).
bool sameTls(const tls::ClientTls* a, const tls::ClientTls* b) {
  if (a == nullptr || b == nullptr) return a == b;
  return tls::sameClientTls(*a, *b);
}

// Whether connections made under `a` serve `b` as well: then a reload keeps them.
bool sameTransport(const Upstream& a, const config::UpstreamConfig& b, const tls::ClientTls* b_tls) {
  const config::UpstreamConfig& c = a.config();
  return c.protocol == b.protocol && c.channels == b.channels &&
         c.connect_timeout_ms == b.connect_timeout_ms && c.max_connections == b.max_connections &&
         sameHeaders(c.headers, b.headers) && sameTls(a.clientTls().get(), b_tls);
}

// The upstream's TLS as the native clients' context (`alpn`: what the client offers).
codecs::StatusOr<std::shared_ptr<const tls::ClientContext>> clientContext(
    const config::UpstreamConfig& c, std::shared_ptr<const tls::ClientTls> loaded, const char* alpn) {
  codecs::StatusOr<std::shared_ptr<const tls::ClientContext>> context =
      tls::ClientContext::create(std::move(loaded), {alpn});
  if (!context.ok()) {
    return codecs::invalidArgument(config::formatLocation(c.tls->where), ": upstream '", c.name, "': ",
                                   codecs::messageOf(context.status()));
  }
  return context;
}

codecs::StatusOr<HttpClientOptions> httpClientOptions(const config::UpstreamConfig& c,
                                                      const std::shared_ptr<const tls::ClientTls>& loaded,
                                                      std::shared_ptr<const HostAddresses> hosts) {
  HttpClientOptions options;
  options.upstream_name = c.name;
  options.hosts = std::move(hosts);
  options.max_connections_per_endpoint = c.max_connections;
  options.connect_timeout = std::chrono::milliseconds(c.connect_timeout_ms);
  if (loaded != nullptr) {
    options.tls.emplace();
    options.tls->server_name = loaded->config.server_name;
    options.tls->ca_pem = loaded->ca_pem;
    options.tls->cert_pem = loaded->cert_pem;
    options.tls->key_pem = loaded->key_pem;
    options.tls->verify = !loaded->config.insecure_skip_verify;
    INFERGATE_ASSIGN_OR_RETURN(options.tls->context, clientContext(c, loaded, "http/1.1"));
  }
  return options;
}

// The upstream's TLS files, read and checked (null for plaintext). A file that does not
// load refuses the start or the reload, naming where the setting is.
codecs::StatusOr<std::shared_ptr<const tls::ClientTls>> loadTls(const config::UpstreamConfig& c) {
  if (!c.tls) return std::shared_ptr<const tls::ClientTls>();
  codecs::StatusOr<std::shared_ptr<const tls::ClientTls>> loaded = tls::loadClientTls(c.name, *c.tls);
  if (!loaded.ok()) {
    return codecs::invalidArgument(config::formatLocation(c.tls->where), ": ",
                                   codecs::messageOf(loaded.status()));
  }
  return loaded;
}

// A client of one loop lives on that loop and dies there, in a task of its own: the last
// reference may go anywhere, even inside one of the client's own callbacks (a call
// finishing after a reload dropped the old set), where deleting it would pull the client
// from under its caller. Once the loop has stopped, the task dies with the loop, still on
// a live event base.
template <typename Client>
std::shared_ptr<Client> onItsLoop(http::EventLoop& loop, Client* client) {
  return std::shared_ptr<Client>(client, [&loop](Client* c) {
    auto owned = std::make_shared<std::unique_ptr<Client>>(c);
    loop.post([owned] { owned->reset(); });
  });
}

}  // namespace

std::shared_ptr<GrpcLoopClient> Upstream::grpcOnLoop(http::EventLoop& loop) const {
  for (const auto& [owner, client] : grpc_loop_) {
    if (owner == &loop) return client;
  }
  return nullptr;
}

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
    const UpstreamSet* previous, std::shared_ptr<const HostAddresses> hosts) {
  auto set = std::make_unique<UpstreamSet>();
  for (const config::UpstreamConfig& c : upstreams) {
    std::unique_ptr<Upstream> u(new Upstream(c));
    const Upstream* before = previous ? previous->find(c.name) : nullptr;
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
        INFERGATE_ASSIGN_OR_RETURN(u->tls_, loadTls(c));
        const bool same = before && sameTransport(*before, c, u->tls_.get());
        // Sequence bindings survive any change; endpoints (with their connections and
        // health) only when the transport is the same.
        std::shared_ptr<routing::AffinityTable> affinity =
            before && before->fleet() ? before->fleet()->sharedAffinity() : nullptr;
        std::shared_ptr<const UpstreamFleet::EndpointList> kept =
            same && before->fleet() ? before->fleet()->endpoints() : nullptr;
        u->fleet_ = UpstreamFleet::create(c, std::move(affinity), kept.get());
        if (c.protocol == Upstream::Protocol::kGrpc) {
          if (same) {
            u->grpc_loop_ = before->grpc_loop_;
          } else {
            GrpcLoopClientOptions options;
            options.upstream_name = c.name;
            if (u->tls_) {
              INFERGATE_ASSIGN_OR_RETURN(options.tls, clientContext(c, u->tls_, "h2"));
            }
            for (const config::HeaderValue& h : c.headers) options.headers.emplace_back(h.name, h.value);
            options.connect_timeout = std::chrono::milliseconds(c.connect_timeout_ms);
            options.hosts = hosts;
            for (size_t i = 0; i < pool.size(); ++i) {
              u->grpc_loop_.emplace_back(&pool.loop(i), onItsLoop(pool.loop(i), new GrpcLoopClient(pool.loop(i), options)));
            }
          }
          break;
        }
        if (same) {
          u->http_ = before->http_;
          break;
        }
        INFERGATE_ASSIGN_OR_RETURN(const HttpClientOptions options, httpClientOptions(c, u->tls_, hosts));
        for (size_t i = 0; i < pool.size(); ++i) {
          http::EventLoop& loop = pool.loop(i);
          u->http_.emplace_back(&loop, onItsLoop(loop, new HttpUpstreamClient(loop, options)));
        }
        break;
      }
    }
    set->upstreams_.push_back(std::move(u));
  }
  // Once the whole set is built: a refused build logs nothing.
  for (const auto& u : set->upstreams_) {
    if (u->tls_ && u->tls_->config.insecure_skip_verify) {
      telemetry::logEvent(telemetry::Level::kWarning, "upstream_tls_insecure",
                          {{"upstream", u->name()},
                           {"detail", "insecure_skip_verify: the upstream's certificate and name "
                                      "are not verified"}});
    }
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

void UpstreamSet::abandonHttp() {
  for (auto& u : upstreams_) {
    for (auto& [loop, client] : u->http_) client->abandonAll();
    for (auto& [loop, client] : u->grpc_loop_) client->abandonAll();
  }
}

void UpstreamSet::shutdownGrpc() {
  for (auto& u : upstreams_) {
    if (u->fleet_ && u->protocol() == Upstream::Protocol::kGrpc) u->fleet_->shutdownGrpc();
  }
}

}  // namespace infergate::gateway::upstream
