#pragma once

// The gRPC frontend's own HTTP/2 server (not a public header; GrpcFrontend starts it unless
// told to use grpc++). It serves gRPC over the project's own HTTP/2
// (http2::ServerConnection), on the WorkerPool's event loops: no thread between the socket
// and the call. In plaintext, HTTP/2 with prior
// knowledge (as every gRPC client speaks it without TLS); with GrpcFrontendOptions::tls,
// every connection through a tls::ServerSession made from the context current when it was
// accepted (ALPN h2), the handshake bounded by handshake_timeout_ms as HTTP/2's is.
//
//   ModelInfer        served here: the request's one message goes to a ModelInferCall on
//                     the connection's own loop (grpc_model_infer.h), and its reply is
//                     written from the message's slices without a copy
//   every other RPC   relayed, message by message, to the same service on grpc++ over its
//                     in-process channel (no socket): the 18 typed RPCs, ModelStreamInfer,
//                     grpc.health.v1.Health/Check. The client's metadata and deadline go
//                     along; the peer's address goes as `infergate-peer`, and over TLS
//                     the client certificate the handshake verified as
//                     `infergate-peer-certificate-bin` (a client's own of either is
//                     dropped), which GrpcppCallContext reads for such calls.
//
// Connections: one per accepted socket, on the loop whose socket accepted it (TCP: one
// SO_REUSEPORT socket per loop; unix: one socket, connections dealt round robin), within
// the caps (GrpcFrontendOptions::max_connections, max_connections_per_client: closed at
// accept past either). A message is reassembled into one buffer of its size (gzip /
// deflate requests inflated), at most max_receive_message_bytes (RESOURCE_EXHAUSTED past
// it). grpc-timeout is enforced (DEADLINE_EXCEEDED, the call cancelled). A connection that
// does not finish its TLS handshake and send HTTP/2's preface and SETTINGS within
// handshake_timeout_ms, or has no call for idle_timeout_ms, is closed (GOAWAY first when
// it spoke HTTP/2); one whose client takes none of the bytes waiting for it for
// send_timeout_ms is closed at once, its calls cancelled, and a stream whose reply gets no
// flow-control window for as long (checked every send_timeout_ms: reset between one and
// two of them after it stalled) is reset, CANCEL, its call cancelled; one whose metadata
// passes max_metadata_bytes has that call refused (RESOURCE_EXHAUSTED). A client that
// resets streams faster than reset_burst, refilled at resets_per_second, is cut off
// (GOAWAY ENHANCE_YOUR_CALM), counted in caps().resetFloods().
//
// Flow control bounds what a relayed stream (ModelStreamInfer above all) holds in the
// gateway, both ways: the connection's window is HTTP/2's largest, a stream's 8 MiB (a
// ModelInfer message larger than that gets nearly the largest as its length arrives). A
// relayed stream whose complete messages not yet taken by grpc++ reach 8 MiB gets no more
// window until they are taken, so a client writing faster than its calls are served waits
// in its own transport (besides those, one message being reassembled, up to
// max_receive_message_bytes); and a relay stops reading grpc++'s replies while 4 MiB of
// them wait for a client that does not read (grpc_native_server_internal.h, kStreamWindow
// and what follows).
//
// Threads: the constructor, start(), port() and shutdown() from one owning thread; all
// else on the loops. The pool must run from start() until shutdown() has returned.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "codecs/status.h"
#include "gateway/http/connection_caps.h"
#include "gateway/http/listen_socket.h"

namespace infergate::gateway::frontends::grpc_detail {

struct Shared;

class NativeGrpcServer {
 public:
  // `fallback`: grpc++'s in-process channel to the same service.
  NativeGrpcServer(std::shared_ptr<Shared> shared, std::shared_ptr<::grpc::Channel> fallback);
  ~NativeGrpcServer();  // shutdown(0) if still running
  NativeGrpcServer(const NativeGrpcServer&) = delete;
  NativeGrpcServer& operator=(const NativeGrpcServer&) = delete;

  // Binds and starts accepting on every loop. The bound address, as GrpcFrontend::start.
  codecs::StatusOr<std::string> start(const http::ListenSpec& spec);
  int port() const { return port_; }
  // Stops accepting; every connection gets GOAWAY and its calls `grace` to finish; then the
  // rest are cancelled and every connection closed. Returns once the loops are done with
  // them. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

  struct Worker;  // grpc_native_server.cc
  const std::shared_ptr<Shared>& shared() const { return shared_; }
  const std::shared_ptr<::grpc::Channel>& fallback() const { return fallback_; }
  // After grpc++'s server ended every call (its Shutdown and Wait): waits until every call
  // relayed to it is gone, its last reference dropped on its loop, so that nothing of grpc++'s
  // client side outlives the server. The loops must run.
  void awaitRelays();
  std::atomic<size_t>& liveRelays() { return live_relays_; }
  // What limits connections at accept (GrpcFrontendOptions::max_connections...).
  http::ConnectionCaps& caps() { return caps_; }
  const http::ConnectionCaps& caps() const { return caps_; }
  // A connection `from` accepted (and caps() admitted, as `client`): served there, or on
  // the next loop when one socket accepts for all (unix). `from`'s loop.
  void dealConnection(Worker& from, int fd, std::string peer, std::string client);

 private:
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<::grpc::Channel> fallback_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<size_t> next_worker_{0};
  std::atomic<size_t> live_relays_{0};
  http::ConnectionCaps caps_;
  int port_ = 0;
  bool deal_ = false;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace infergate::gateway::frontends::grpc_detail
