#include "gateway/readiness_probe.h"

#include <future>

#include "codecs/grpc_byte_buffer.h"
#include "grpc_service.pb.h"

namespace infergate::gateway {

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

// Lives on the loop: the timer, and the round's answers (a round's callbacks hold it).
struct ReadinessProbe::State : std::enable_shared_from_this<State> {
  std::shared_ptr<Router> router;
  http::EventLoop& loop;
  config::ReadinessConfig config;
  std::shared_ptr<ServerHealth> health;
  std::unique_ptr<http::LoopTimer> timer;
  bool stopped = false;
  uint64_t round = 0;
  std::vector<bool> answered_ready;  // this round, by upstream index
  size_t pending = 0;

  State(std::shared_ptr<Router> r, http::EventLoop& l, config::ReadinessConfig c,
        std::shared_ptr<ServerHealth> h)
      : router(std::move(r)), loop(l), config(c), health(std::move(h)) {}

  std::vector<bool> reachability() const {
    std::vector<bool> out;
    for (const auto& u : router->upstreams()) out.push_back(u->reachable());
    return out;
  }

  void judge() {
    health->upstreams_ready.store(
        upstreamsReady(config.policy, *router->table(), reachability()));
  }

  // Loop thread.
  void probe() {
    if (stopped) return;
    upstream::UpstreamSet& set = router->upstreams();
    ++round;
    answered_ready.assign(set.size(), false);
    pending = 1;  // held until every probe is sent
    for (size_t i = 0; i < set.size(); ++i) {
      upstream::Upstream& u = set.at(i);
      if (u.protocol() == upstream::Upstream::Protocol::kGrpc) {
        ++pending;
        upstream::GrpcCallOptions options;
        options.deadline = std::chrono::system_clock::now() +
                           std::chrono::milliseconds(config.probe_interval_ms);
        std::string request = inference::ServerReadyRequest().SerializeAsString();
        u.grpc()->unary(
            "/inference.GRPCInferenceService/ServerReady",
            codecs::toByteBuffer(codecs::BufferChain(codecs::Buffer::fromString(std::move(request)))),
            std::move(options),
            [self = shared_from_this(), i, round = round](grpc::Status status, grpc::ByteBuffer answer) {
              bool ready = false;
              if (status.ok()) {
                auto flat = codecs::fromByteBuffer(answer);
                inference::ServerReadyResponse typed;
                ready = flat.ok() && typed.ParseFromArray(flat->data(), static_cast<int>(flat->size())) &&
                        typed.ready();
              }
              self->loop.post([self, i, round, ready] { self->answer(round, i, ready); });
            });
      } else if (u.protocol() == upstream::Upstream::Protocol::kHttp) {
        for (const config::ListenAddress& endpoint : u.config().endpoints) {
          ++pending;
          upstream::HttpUpstreamRequest request;
          request.method = "GET";
          request.target = "/v2/health/ready";
          request.timeout = std::chrono::milliseconds(config.probe_interval_ms);
          upstream::HttpUpstreamCallbacks callbacks;
          callbacks.on_complete = [self = shared_from_this(), i, round = round](
                                      codecs::StatusOr<upstream::HttpUpstreamResponse> r) {
            self->answer(round, i, r.ok() && r->status == 200);
          };
          u.http(loop).send(endpoint, std::move(request), std::move(callbacks));
        }
      }
    }
    answer(round, SIZE_MAX, false);  // releases the hold
  }

  void answer(uint64_t of_round, size_t upstream, bool ready) {
    if (stopped || of_round != round) return;
    if (upstream != SIZE_MAX && ready) answered_ready[upstream] = true;
    if (--pending > 0) return;
    upstream::UpstreamSet& set = router->upstreams();
    for (size_t i = 0; i < set.size(); ++i) {
      if (set.at(i).protocol() != upstream::Upstream::Protocol::kBuiltin) {
        set.at(i).setReachable(answered_ready[i]);
      }
    }
    judge();
    timer->arm(std::chrono::milliseconds(config.probe_interval_ms));
  }
};

ReadinessProbe::ReadinessProbe(std::shared_ptr<Router> router, http::EventLoop& loop,
                               config::ReadinessConfig config, std::shared_ptr<ServerHealth> health)
    : state_(std::make_shared<State>(std::move(router), loop, config, std::move(health))) {}

ReadinessProbe::~ReadinessProbe() { stop(); }

void ReadinessProbe::start() {
  state_->judge();
  if (state_->config.policy == config::ReadinessConfig::Policy::kAlways) return;
  bool remote = false;
  for (const auto& u : state_->router->upstreams()) remote = remote || u->config().isRemote();
  if (!remote) return;
  running_ = true;
  state_->loop.post([state = state_] {
    state->timer = std::make_unique<http::LoopTimer>(state->loop, [state] { state->probe(); });
    state->probe();
  });
}

void ReadinessProbe::stop() {
  if (!running_) return;
  running_ = false;
  std::promise<void> dropped;
  state_->loop.post([state = state_, &dropped] {
    state->stopped = true;
    state->timer.reset();
    dropped.set_value();
  });
  dropped.get_future().wait();
}

}  // namespace infergate::gateway
