#pragma once

// Carries out the shared-memory handoff's registrations (upstream/endpoint_handoff.h) on
// the health checker's loop, once per round: for each colocated endpoint with a handoff,
//
//   endpoint unhealthy or ejected   its registrations are presumed lost (endpointDown):
//                                   registered again once it is back
//   otherwise                       its queued Work is sent: the pool's registration,
//                                   client regions passed through, their unregistrations
//
// over the upstream's protocol: SystemSharedMemoryRegister / CudaSharedMemoryRegister /
// SystemSharedMemoryUnregister on the endpoint's own gRPC channels, or POST
// /v2/{system,cuda}sharedmemory/region/<name>/(register|unregister) over HTTP. An answer
// of UNIMPLEMENTED / 501 means the upstream refuses client shared memory (Triton without
// --allow-client-shm=true).
//
// Threads: round() on the loop; gRPC answers are posted back to it.

#include <memory>

#include "gateway/http/event_loop.h"
#include "gateway/upstream/upstream_set.h"

namespace infergate::gateway {

class HandoffRegistrar : public std::enable_shared_from_this<HandoffRegistrar> {
 public:
  explicit HandoffRegistrar(http::EventLoop& loop) : loop_(loop) {}

  void round(const upstream::UpstreamSet& upstreams);
  void stop() { stopped_ = true; }

 private:
  void send(const upstream::Upstream& u, const std::shared_ptr<upstream::Endpoint>& e,
            upstream::EndpointHandoff::Work work);
  void done(const std::shared_ptr<upstream::Endpoint>& e, const upstream::EndpointHandoff::Work& work,
            bool ok, bool refused, const std::string& error);

  http::EventLoop& loop_;
  bool stopped_ = false;
};

}  // namespace infergate::gateway
