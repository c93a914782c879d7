#pragma once

// In-process upstreams and the scaffolding around them, shared by the tests of the
// upstream clients and of the fleet (grpc_client_test, http_client_test, fleet_test).
// Everything listens on loopback, port 0 (or a Unix socket a test names): no mocks.
//
//   GrpcTestUpstream   the project's gRPC frontend serving the builtin demo models
//                      ("simple", "sleep", "repeat_int32", ...); its port, its address,
//                      and how many inferences it ran for a model. serialized() turns a
//                      message into the grpc::ByteBuffer the raw clients send.
//   HttpTestUpstream   the project's HttpServer on a one-loop WorkerPool, answering with
//                      the handler the test gives (run on that loop): listen, start,
//                      stop (also from the destructor).
//   LoopThread         an EventLoop on its own thread, for the HTTP client, which lives
//                      on a loop; run() runs a task there and waits for it.
//   freePort()         a loopback port nothing listens on.
//   KeepingRelay       an AnswerRelay taking blocks that keeps its pieces until letGo();
//                      sendRelayed() sends a request to it through an HttpUpstreamClient.
//
// The HTTP side is defined here (target infergate_upstream_test_servers); the gRPC side
// in upstream_test_servers.cc (infergate_upstream_test_servers_grpc), so that a test
// using only the HTTP side compiles and links none of the gRPC frontend.
// Waits are bounded by kTestWait, a bound for the slowest machine, never a
// synchronisation.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "codecs/status.h"
#include "gateway/http/event_loop.h"
#include "gateway/http/loop_thread_testing.h"
#include "gateway/http/http_server.h"
#include "gateway/http/listen_socket.h"
#include "gateway/http/worker_pool.h"
#include "gateway/upstream/http_client.h"

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace grpc {
class ByteBuffer;
}  // namespace grpc

namespace infergate::gateway::builtin {
class ModelRepository;
}  // namespace infergate::gateway::builtin

namespace infergate::gateway::frontends {
class GrpcFrontend;
struct GrpcFrontendOptions;
}  // namespace infergate::gateway::frontends

namespace infergate::gateway::upstream::testing {

inline constexpr std::chrono::seconds kTestWait{30};

// ---- gRPC -----------------------------------------------------------------------------

// One gRPC upstream: the gRPC frontend serving the builtin demo models, on `address`
// ("127.0.0.1:0" for a free loopback port, "unix:/path", or a fixed "127.0.0.1:N").
// Binding failures are test failures (the port is then 0).
class GrpcTestUpstream {
 public:
  GrpcTestUpstream();
  explicit GrpcTestUpstream(std::string address);
  GrpcTestUpstream(std::string address, frontends::GrpcFrontendOptions options);
  ~GrpcTestUpstream();  // shuts the frontend down at once, then its pool
  GrpcTestUpstream(const GrpcTestUpstream&) = delete;
  GrpcTestUpstream& operator=(const GrpcTestUpstream&) = delete;

  int port() const;
  // The bound address, as the frontend reports it.
  const std::string& address() const { return address_; }
  // Inferences the upstream ran for `model` (its statistics).
  uint64_t inferences(const std::string& model) const;

 private:
  http::WorkerPool pool_;
  std::shared_ptr<builtin::ModelRepository> repository_;
  std::unique_ptr<frontends::GrpcFrontend> frontend_;
  std::string address_;
};

// `message` serialized, as the raw gRPC clients send it.
grpc::ByteBuffer serialized(const google::protobuf::MessageLite& message);

// ---- HTTP -----------------------------------------------------------------------------

// One HTTP upstream: the project's HttpServer on a WorkerPool of one loop, answering
// every request with `handler` on that loop. listen...() before start(); stop() shuts
// the server down (200 ms for requests in flight, then closes the rest) and the pool.
class HttpTestUpstream {
 public:
  explicit HttpTestUpstream(http::HttpHandler handler)
      : server_(pool_, http::HttpLimits{}, 10000, std::move(handler)) {}
  ~HttpTestUpstream() { stop(); }
  HttpTestUpstream(const HttpTestUpstream&) = delete;
  HttpTestUpstream& operator=(const HttpTestUpstream&) = delete;

  codecs::StatusOr<http::BoundSockets> listen(const http::ListenSpec& spec) {
    return server_.listen(spec);
  }
  // A free loopback port.
  codecs::StatusOr<http::BoundSockets> listenOnLoopback() {
    return listen(http::ListenSpec::tcp("127.0.0.1", 0));
  }
  // TLS on every listener, before start() (tls/server_context.h).
  void setTls(std::shared_ptr<tls::ServerContextSource> source) { server_.setTls(std::move(source)); }
  void start() {
    pool_.start();
    server_.start();
    started_ = true;
  }
  // Idempotent; nothing to do before start().
  void stop() {
    if (!started_) return;
    started_ = false;
    server_.shutdown(std::chrono::milliseconds(200));
    pool_.stop();
  }
  // The loop the handler runs on.
  http::EventLoop& loop() { return pool_.loop(0); }

 private:
  http::WorkerPool pool_{1};
  http::HttpServer server_;
  bool started_ = false;
};

using http::LoopThread;  // gateway/http/loop_thread_testing.h

// ---- ports ----------------------------------------------------------------------------

// A loopback port nothing listens on: bound, then closed.
inline int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A loopback TCP listener nothing accepts from unless the test does (accept()): a connect
// completes (the kernel's backlog) and nothing is ever read or answered. Closed when
// destroyed.
class IdleListener {
 public:
  IdleListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd_, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~IdleListener() { ::close(fd_); }
  IdleListener(const IdleListener&) = delete;
  IdleListener& operator=(const IdleListener&) = delete;

  int fd() const { return fd_; }
  int port() const { return port_; }
  // The next connection (blocking), or -1 when none comes within `wait`: what a scripted
  // upstream serving on this listener takes its connections with.
  int accept(std::chrono::milliseconds wait) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return -1;
    return ::accept(fd_, nullptr, nullptr);
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// ---- relays ---------------------------------------------------------------------------

// An AnswerRelay that takes blocks (AnswerRelay::takesBlocks) and keeps each piece, so that
// the client's window fills, until letGo(); from then on each piece is read and dropped as
// it comes. The client's loop only.
class KeepingRelay final : public AnswerRelay {
 public:
  void onHead(int, const http::HeaderList&, uint64_t) override { ++heads; }
  void onPiece(codecs::Buffer piece) override {
    largest_piece = std::max(largest_piece, piece.size());
    if (letting_go) {
      text.append(piece.view());
      return;
    }
    held_bytes += piece.size();
    held.push_back(std::move(piece));
  }
  bool takesBlocks() const override { return true; }
  void letGo() {
    for (const codecs::Buffer& p : held) text.append(p.view());
    held.clear();
    held_bytes = 0;
    letting_go = true;
  }

  int heads = 0;
  std::vector<codecs::Buffer> held;
  size_t held_bytes = 0;
  size_t largest_piece = 0;
  bool letting_go = false;
  std::string text;  // what was let go of, in order
};

// Sends `request` to `endpoint` through `client` (on `thread`'s loop) with `relay`; the
// future is ready once on_complete ran, its answer then in `*result`.
inline std::future<void> sendRelayed(LoopThread& thread, HttpUpstreamClient& client,
                                     const config::ListenAddress& endpoint, HttpUpstreamRequest request,
                                     std::shared_ptr<AnswerRelay> relay,
                                     codecs::StatusOr<HttpUpstreamResponse>* result) {
  auto complete = std::make_shared<std::promise<void>>();
  std::future<void> done = complete->get_future();
  thread.run([&] {
    HttpUpstreamCallbacks callbacks;
    callbacks.relay = std::move(relay);
    callbacks.on_complete = [complete, result](codecs::StatusOr<HttpUpstreamResponse> r) {
      *result = std::move(r);
      complete->set_value();
    };
    client.send(endpoint, std::move(request), std::move(callbacks));
  });
  return done;
}

}  // namespace infergate::gateway::upstream::testing
