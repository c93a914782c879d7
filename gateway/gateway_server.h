#pragma once

// The running gateway: from a validated configuration to listening sockets, worker
// loops, the frontends and the metrics listener; and back down on shutdown.
//
//   start()     binds every listener (port 0 picks a free port once, shared by all
//               workers), starts the loops and gRPC, then marks the server ready
//   readyLine() one JSON line naming every bound address, for tests and scripts
//   reload()    reads the config file again (config.source); a valid one whose
//               listeners, workers and limits are unchanged is swapped in (Router::reload)
//               while requests run; otherwise the error is reported and the old one serves.
//               Also on a file change (lifecycle.watch_config) and POST /admin/reload.
//               Each outcome is logged as one JSON line on stderr.
//   shutdown()  not ready; stops accepting; lets requests in flight finish (grace);
//               closes the rest
//
// Threading: start(), reload() and shutdown() from the main thread; reloads from the file
// watch and the admin API run on the server's control thread (one at a time); everything
// else runs on the worker loops and grpc's threads.

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
  codecs::Status reload();
  void shutdown(std::chrono::milliseconds grace);
  // lifecycle.drain_timeout_ms of the configuration serving now (a reload may change it).
  std::chrono::milliseconds drainTimeout() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace infergate::gateway
