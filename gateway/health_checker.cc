#include "gateway/health_checker.h"

#include <algorithm>
#include <future>
#include <unordered_map>

#include "codecs/grpc_byte_buffer.h"
#include "config/listen_address.h"
#include "gateway/handoff_registrar.h"
#include "grpc_service.pb.h"
#include "routing/queue_signal.h"

namespace infergate::gateway {
namespace {

using Clock = std::chrono::steady_clock;
using upstream::Endpoint;
using upstream::Upstream;

constexpr std::chrono::milliseconds kMinTick{10};
constexpr std::chrono::milliseconds kMaxTick{1000};
constexpr std::chrono::milliseconds kHandoffTick{100};
constexpr std::string_view kService = "/inference.GRPCInferenceService/";

std::chrono::milliseconds checkInterval(const config::UpstreamConfig& u,
                                        const config::ReadinessConfig& readiness) {
  uint64_t ms = u.health_check.interval_ms ? u.health_check.interval_ms : readiness.probe_interval_ms;
  return std::chrono::milliseconds(std::max<uint64_t>(ms, 1));
}

bool scrapes(const config::UpstreamConfig& u) {
  return u.load_balancing.policy == config::LoadBalancingConfig::Policy::kLoadAware &&
         u.load_balancing.metrics_port != 0;
}

template <typename Response>
bool answeredReady(bool ok, const grpc::ByteBuffer& answer) {
  if (!ok || !answer.Valid()) return false;
  codecs::StatusOr<codecs::Buffer> flat = codecs::fromByteBuffer(answer);
  Response typed;
  return flat.ok() && typed.ParseFromArray(flat->data(), static_cast<int>(flat->size())) &&
         typed.ready();
}

}  // namespace

bool upstreamsReady(config::ReadinessConfig::Policy policy, const routing::RouteTable& table,
                    const std::vector<bool>& reachable) {
  using Policy = config::ReadinessConfig::Policy;
  if (policy == Policy::kAlways) return true;
  size_t served = 0;
  for (const routing::Route& route : table.routes()) {
    bool any = false;
    for (const routing::Route::Target& t : route.targets) any = any || reachable[t.upstream];
    served += any ? 1 : 0;
  }
  if (policy == Policy::kAnyRoute) return served > 0;
  return served == table.routes().size();
}

// Lives on the loop: the timer, each endpoint's schedule. Probe callbacks hold it.
struct HealthChecker::State : std::enable_shared_from_this<State> {
  struct Schedule {
    std::shared_ptr<Endpoint> endpoint;
    Clock::time_point next_probe{};
    Clock::time_point next_scrape{};
    bool probing = false;
    bool scraping = false;
    bool seen = false;  // in the current snapshot (pruning)
  };

  std::shared_ptr<Router> router;
  http::EventLoop& loop;
  std::shared_ptr<ServerHealth> health;
  std::unique_ptr<http::LoopTimer> timer;
  std::shared_ptr<upstream::HttpUpstreamClient> metrics_client;  // load-aware scrapes
  std::shared_ptr<HandoffRegistrar> registrar;  // shared-memory handoff registrations
  std::unordered_map<const Endpoint*, Schedule> schedules;
  bool stopped = false;

  State(std::shared_ptr<Router> r, http::EventLoop& l, std::shared_ptr<ServerHealth> h)
      : router(std::move(r)), loop(l), health(std::move(h)),
        registrar(std::make_shared<HandoffRegistrar>(l)) {}

  void judge() {
    std::shared_ptr<const RouterSnapshot> snapshot = router->snapshot();
    std::vector<bool> reachable;
    for (const auto& u : *snapshot->upstreams) reachable.push_back(u->reachable());
    health->upstreams_ready.store(
        upstreamsReady(snapshot->config->readiness.policy, *snapshot->table, reachable));
  }

  std::chrono::milliseconds tick() const {
    std::chrono::milliseconds t = kMaxTick;
    std::shared_ptr<const RouterSnapshot> snapshot = router->snapshot();
    const config::ReadinessConfig& readiness = snapshot->config->readiness;
    for (const auto& u : *snapshot->upstreams) {
      if (!u->config().isRemote()) continue;
      if (u->config().health_check.enabled) t = std::min(t, checkInterval(u->config(), readiness));
      // Handoff registrations wait for a round: keep rounds short where there are some.
      if (u->config().colocated && u->config().handoff.enabled) t = std::min(t, kHandoffTick);
      if (scrapes(u->config())) {
        t = std::min(t, std::chrono::milliseconds(u->config().load_balancing.metrics_interval_ms));
      }
    }
    return std::max(t, kMinTick);
  }

  // Loop thread: probes and scrapes what is due, then sleeps one tick. "Due" allows a
  // quarter tick early: the loop's timer may fire a little before the planned time, and
  // a probe missed by a hair would otherwise wait a whole extra tick.
  void round() {
    if (stopped) return;
    const std::chrono::milliseconds period = tick();
    const Clock::time_point now = Clock::now();
    const Clock::time_point due = now + period / 4;
    std::shared_ptr<const RouterSnapshot> snapshot = router->snapshot();
    const config::ReadinessConfig& readiness = snapshot->config->readiness;
    for (auto& [key, schedule] : schedules) schedule.seen = false;
    for (const auto& u : *snapshot->upstreams) {
      if (!u->fleet()) continue;
      const config::UpstreamConfig& c = u->config();
      // Held by name: a range-for over *endpoints() would let the list go while it runs
      // (discovery swaps it from its own thread).
      std::shared_ptr<const upstream::UpstreamFleet::EndpointList> endpoints = u->fleet()->endpoints();
      for (const std::shared_ptr<Endpoint>& e : *endpoints) {
        Schedule& s = schedules[e.get()];
        s.endpoint = e;
        s.seen = true;
        if (c.health_check.enabled && !s.probing && due >= s.next_probe) {
          s.probing = true;
          s.next_probe = now + checkInterval(c, readiness);
          probe(*u, e);
        }
        if (scrapes(c) && !s.scraping && due >= s.next_scrape &&
            e->address().kind == config::ListenAddress::Kind::kTcp) {
          s.scraping = true;
          s.next_scrape = now + std::chrono::milliseconds(c.load_balancing.metrics_interval_ms);
          scrape(c, e);
        }
      }
    }
    // Endpoints no longer listed (a reload, a DNS change) are forgotten; a probe still in
    // flight finds no schedule and is dropped.
    std::erase_if(schedules, [](const auto& entry) { return !entry.second.seen; });
    registrar->round(*snapshot->upstreams);
    judge();
    timer->arm(period);
  }

  void probe(const Upstream& u, const std::shared_ptr<Endpoint>& e) {
    const config::HealthCheckConfig& check = u.config().health_check;
    const auto timeout = std::chrono::milliseconds(check.timeout_ms);
    auto done = [self = shared_from_this(), e, check](bool ready) {
      self->loop.post([self, e, check, ready] { self->probed(e, check, ready); });
    };
    if (u.protocol() == Upstream::Protocol::kGrpc) {
      upstream::GrpcCallOptions options;
      options.deadline = std::chrono::system_clock::now() + timeout;
      const bool server = check.model.empty();
      const std::string method = codecs::strCat(kService, server ? "ServerReady" : "ModelReady");
      grpc::ByteBuffer request;
      if (server) {
        request = codecs::toByteBuffer(inference::ServerReadyRequest());
      } else {
        inference::ModelReadyRequest model;
        model.set_name(check.model);
        model.set_version(check.version);
        request = codecs::toByteBuffer(model);
      }
      auto ready = [server](bool ok, const grpc::ByteBuffer& answer) {
        return server ? answeredReady<inference::ServerReadyResponse>(ok, answer)
                      : answeredReady<inference::ModelReadyResponse>(ok, answer);
      };
      // The worker's own client where it reaches the endpoint: the connection ModelInfer
      // takes, and no grpc++ call (about 200k instructions each) on the worker's loop. It
      // keeps no reconnect backoff: a probe opens a connection when there is none, so a
      // replica that is back is seen at its first probe, and one that refuses fails it at once.
      if (std::shared_ptr<upstream::GrpcLoopClient> native = u.grpcOnLoop(loop);
          native != nullptr && native->serves(e->address())) {
        native->unary(e->address(), method, codecs::MovableByteBuffer(request), options,
                      [self = shared_from_this(), e, check, ready](codecs::Status status,
                                                                   codecs::MovableByteBuffer answer) {
                        self->probed(e, check, ready(status.ok(), answer.grpc()));
                      });
        return;
      }
      // grpc++ (an endpoint the worker's client does not reach). A replica that is back
      // must be seen at its first probe: its channels may still sit in a reconnect backoff
      // from the failures, and a probe failing at once would delay re-admission by a whole
      // interval. So a probe of an endpoint not known healthy resets the backoff and waits
      // (up to its timeout) for the connection; a probe of a healthy one fails at once when
      // it cannot connect, so a death is seen quickly.
      const bool doubtful = e->activeHealth() != upstream::ActiveHealth::kHealthy;
      if (doubtful) e->grpc()->resetConnectBackoff();
      options.wait_for_ready = doubtful;
      e->grpc()->unary(method, request, std::move(options),
                       [done, ready](grpc::Status status, grpc::ByteBuffer answer) {
                         done(ready(status.ok(), answer));
                       });
      return;
    }
    upstream::HttpUpstreamRequest request;
    request.method = "GET";
    request.target = check.model.empty() ? "/v2/health/ready"
                                         : modelPath(check.model, check.version, "/ready");
    request.timeout = timeout;
    upstream::HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [self = shared_from_this(), e, check](
                                codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
      self->probed(e, check, r.ok() && r->status == 200);
    };
    u.http(loop)->send(e->address(), std::move(request), std::move(callbacks));
  }

  void probed(const std::shared_ptr<Endpoint>& e, const config::HealthCheckConfig& check, bool ready) {
    auto it = schedules.find(e.get());
    if (it != schedules.end()) it->second.probing = false;
    if (stopped) return;
    e->recordProbe(ready, check);
    judge();
  }

  void scrape(const config::UpstreamConfig& c, const std::shared_ptr<Endpoint>& e) {
    if (!metrics_client) {
      // Plaintext for every upstream, `tls` or not: Triton's metrics port serves no TLS.
      upstream::HttpClientOptions options;
      options.upstream_name = "metrics";
      options.max_connections_per_endpoint = 1;
      options.hosts = router->hosts();  // a host-name endpoint's metrics port: the same name
      metrics_client = std::make_shared<upstream::HttpUpstreamClient>(loop, options);
    }
    config::ListenAddress at = e->address();
    at.port = c.load_balancing.metrics_port;
    at.text = config::formatHostPort(at.host, at.port);
    upstream::HttpUpstreamRequest request;
    request.method = "GET";
    request.target = "/metrics";
    request.timeout = std::chrono::milliseconds(c.load_balancing.metrics_interval_ms);
    upstream::HttpUpstreamCallbacks callbacks;
    callbacks.on_complete = [self = shared_from_this(), e](
                                codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
      auto it = self->schedules.find(e.get());
      if (it != self->schedules.end()) it->second.scraping = false;
      std::optional<uint64_t> pending;
      if (r.ok() && r->status == 200) {
        codecs::StatusOr<uint64_t> sum = routing::pendingRequestsFromMetrics(r->body.view());
        if (sum.ok()) pending = *sum;
      }
      e->setScrapedQueue(pending);
    };
    metrics_client->send(at, std::move(request), std::move(callbacks));
  }
};

HealthChecker::HealthChecker(std::shared_ptr<Router> router, http::EventLoop& loop,
                             std::shared_ptr<ServerHealth> health)
    : state_(std::make_shared<State>(std::move(router), loop, std::move(health))) {}

HealthChecker::~HealthChecker() { stop(); }

void HealthChecker::start() {
  state_->judge();
  running_ = true;  // even with readiness `always`: routing depends on the checks
  state_->loop.post([state = state_] {
    state->timer = std::make_unique<http::LoopTimer>(state->loop, [state] { state->round(); });
    state->round();
  });
}

void HealthChecker::rejudge() {
  state_->loop.post([state = state_] {
    if (!state->stopped) state->judge();
  });
}

void HealthChecker::stop() {
  if (!running_) return;
  running_ = false;
  std::promise<void> dropped;
  state_->loop.post([state = state_, &dropped] {
    state->stopped = true;
    state->registrar->stop();
    state->timer.reset();
    state->metrics_client.reset();  // on its loop; pending scrapes are cancelled
    state->schedules.clear();
    dropped.set_value();
  });
  dropped.get_future().wait();
}

}  // namespace infergate::gateway
