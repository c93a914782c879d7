#pragma once

// The running gateway: from a validated configuration to listening sockets, worker
// loops, the frontends and the metrics listener; and back down on shutdown.
//
//   start()     binds every listener (port 0 picks a free port once, shared by all
//               workers), starts the loops and gRPC, then marks the server ready
//   readyLine() one JSON line naming every bound address, for tests and scripts
//   shutdown()  not ready; stops accepting; lets requests in flight finish (grace);
//               closes the rest
//
// Threading: start() and shutdown() from the main thread; everything else runs on the
// worker loops and grpc's threads.

#include <chrono>
#include <memory>
#include <string>

#include "codecs/status.h"
#include "config/config.h"

namespace infergate::gateway {

class GatewayServer {
 public:
  explicit GatewayServer(config::GatewayConfig config);
  ~GatewayServer();

  codecs::Status start();
  // {"event":"ready","pid":N,"http":"127.0.0.1:8000","grpc":"...","metrics":"..."}
  // (listeners not configured are absent).
  std::string readyLine() const;
  void shutdown(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infergate::gateway
