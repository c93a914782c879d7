#pragma once

// An HTTP/1.1 server on a WorkerPool: listening sockets on every loop, the connections
// they accept, and graceful shutdown. The handler runs on the loop that owns the
// connection (see HttpConnection).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gateway/http/connection_caps.h"
#include "gateway/http/http_connection.h"
#include "gateway/http/listen_socket.h"
#include "gateway/http/worker_pool.h"
#include "tls/server_context.h"

namespace infergate::gateway::http {

class HttpServer {
 public:
  HttpServer(WorkerPool& pool, HttpLimits limits, size_t max_connections, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds `spec` (before start()); returns the bound address, e.g. "127.0.0.1:38211".
  codecs::StatusOr<BoundSockets> listen(const ListenSpec& spec);
  // Observes every response (metrics, access logs); set before start().
  void setObserver(ResponseObserver observer) { observer_ = std::move(observer); }
  // Looks at every request at headers-complete (see HeadersGate); set before start().
  void setHeadersGate(HeadersGate gate) { gate_ = std::move(gate); }
  // Serves TLS on every socket of this server: each accepted connection takes the
  // source's context current at that moment. Set before start().
  void setTls(std::shared_ptr<tls::ServerContextSource> tls) { tls_ = std::move(tls); }
  // At most `cap` open connections from one client address (IPv4, or IPv6 with an
  // IPv4-mapped address counted as the IPv4 one); Unix-socket clients are not counted.
  // Past the cap, or past max_connections, an accepted connection is closed at once.
  // Set before start().
  void setMaxConnectionsPerClient(size_t cap) { caps_.setMaxPerClient(cap); }
  // Starts accepting on every loop. The pool may already be running.
  void start();
  // Stops accepting, lets connections finish the requests they have (closing each when
  // idle), and after `grace` closes whatever is left. Blocks; not on a loop thread.
  void shutdown(std::chrono::milliseconds grace);
  // The first half of shutdown(), on its own: closes the listening sockets (a new client is
  // refused at once and can go elsewhere) and lets each connection finish the request it
  // has. Idempotent; shutdown() then waits for them.
  void stopAccepting();

  size_t connectionCount() const { return caps_.open(); }
  // Connections closed at accept: over max_connections, over the per-client cap.
  uint64_t refusedOverTotal() const { return caps_.refusedOverTotal(); }
  uint64_t refusedOverClient() const { return caps_.refusedOverClient(); }
  // Connections closed for the send timeout (HttpLimits::send_timeout).
  uint64_t sendTimeouts() const { return caps_.sendTimeouts(); }

 private:
  struct Worker;
  struct Acceptor {
    HttpServer* server;
    Worker* worker;
    int fd;
    bool is_unix;
    event* ev = nullptr;
  };
  struct Worker {
    EventLoop* loop;
    std::vector<std::unique_ptr<Acceptor>> acceptors;
    std::unordered_map<HttpConnection*, std::shared_ptr<HttpConnection>> connections;
  };

  static void onAccept(evutil_socket_t fd, short, void* arg);
  void accept(Acceptor& acceptor);
  void runOnEveryLoop(const std::function<void(Worker&)>& fn);

  WorkerPool& pool_;
  HttpLimits limits_;
  ConnectionCaps caps_;
  HttpHandler handler_;
  ResponseObserver observer_;
  HeadersGate gate_;
  std::shared_ptr<tls::ServerContextSource> tls_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<int> listen_fds_;
  bool started_ = false;
};

}  // namespace infergate::gateway::http
