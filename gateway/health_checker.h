#pragma once

// Active health checks of every remote endpoint, the load signal of load-aware upstreams,
// and the gateway's readiness as far as its upstreams go.
//
//   every health_check.interval_ms (readiness.probe_interval_ms when 0), on one worker
//   loop, each endpoint of each remote upstream is asked whether it is ready: gRPC
//   ServerReady through that loop's own client (grpc_client_native.h: the connection
//   ModelInfer takes; grpc++'s channels only for an endpoint it does not reach), HTTP GET
//   /v2/health/ready; and, when
//   health_check.model is set, that model's ready too. The answer (ready within
//   timeout_ms, or not) goes to Endpoint::recordProbe, whose thresholds decide the
//   endpoint's active health. One probe per endpoint at a time.
//
//   load_balancing.policy load_aware with metrics_port: every metrics_interval_ms each
//   endpoint's GET http://HOST:metrics_port/metrics is read and the sum of
//   nv_inference_pending_request_count is added to its queue signal (the gateway's own
//   outstanding count); when that fails the outstanding count alone is used until it
//   works again. The scrape is plaintext HTTP even for an upstream with `tls` (Triton's
//   metrics port has no TLS); the probes above use the upstream's own clients, with its
//   TLS.
//
//   After each answer the readiness policy decides ServerHealth::upstreams_ready:
//     all_routes  every route has a reachable upstream among its targets
//     any_route   at least one route has
//     always      true
//   (Upstream::reachable: a routable endpoint that its checks found healthy.)
//
// The checker follows reloads: each round reads the router's current snapshot; endpoints
// kept by a reload keep their health.
//
// Threads: start() and stop() from the owning thread; the rounds run on `loop`.

#include <memory>

#include "config/config.h"
#include "gateway/http/event_loop.h"
#include "gateway/router.h"
#include "gateway/server_info.h"

namespace infergate::gateway {

class HealthChecker {
 public:
  // The readiness policy and default interval are read from the router's current
  // configuration, so a reload changes them too.
  HealthChecker(std::shared_ptr<Router> router, http::EventLoop& loop,
                std::shared_ptr<ServerHealth> health);
  ~HealthChecker();

  // Judges at once from what is known, then checks on the intervals. The loop must run.
  void start();
  // No new probes; answers still in flight are ignored. Blocks until the loop has dropped
  // the timer, so the loop must still run. Idempotent.
  void stop();
  // Judges readiness again now (after a reload); any thread.
  void rejudge();

 private:
  struct State;
  std::shared_ptr<State> state_;
  bool running_ = false;
};

// The verdict of `policy` for `table` given each upstream's reachability (by index).
bool upstreamsReady(config::ReadinessConfig::Policy policy, const routing::RouteTable& table,
                    const std::vector<bool>& reachable);

}  // namespace infergate::gateway
