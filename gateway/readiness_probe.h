#pragma once

// Whether the gateway is ready, as far as its upstreams go (config `readiness`):
//
//   every probe_interval_ms, on one worker loop, each remote upstream is asked if it is
//   ready: gRPC ServerReady on one of its channels, HTTP GET /v2/health/ready on each
//   endpoint; an upstream is reachable when an answer said ready. Builtin upstreams
//   always are. Then the policy decides ServerHealth::upstreams_ready:
//     all_routes  every route has a reachable upstream among its targets
//     any_route   at least one route has
//     always      true (the probe does not run)
//
// Until the first round of answers is in, remote upstreams count as unreachable: a pod
// is not ready before its upstreams are. Probes never block a request; they only change
// what /v2/health/ready, ServerReady and grpc.health say.
//
// Threads: start() and stop() from the owning thread; the rounds run on `loop`.

#include <memory>

#include "config/config.h"
#include "gateway/http/event_loop.h"
#include "gateway/router.h"
#include "gateway/server_info.h"

namespace infergate::gateway {

class ReadinessProbe {
 public:
  ReadinessProbe(std::shared_ptr<Router> router, http::EventLoop& loop,
                 config::ReadinessConfig config, std::shared_ptr<ServerHealth> health);
  ~ReadinessProbe();

  // Judges at once from what is known, then probes every interval. The loop must run.
  void start();
  // No new rounds; answers still in flight are ignored. Blocks until the loop has
  // dropped the timer, so the loop must still run. Idempotent.
  void stop();

 private:
  struct State;
  std::shared_ptr<State> state_;
  bool running_ = false;  // a timer lives on the loop
};

// The verdict of `policy` for `table` given each upstream's reachability (by index).
bool upstreamsReady(config::ReadinessConfig::Policy policy, const routing::RouteTable& table,
                    const std::vector<bool>& reachable);

}  // namespace infergate::gateway
