#pragma once

// Unary gRPC calls toward upstream endpoints on one worker's own libevent loop: HTTP/2
// through the project's own http2::ClientConnection (gateway/http2/), on non-blocking
// sockets, in plaintext (h2c, prior knowledge) or TLS
// (options.tls: tls::ClientSession, ALPN h2), with no thread between the worker and the
// socket.
//
// Why it exists. grpc++'s callback API completes a call on one of grpc's threads, which
// then posts to the worker: two thread wake-ups per call, and more once those threads went
// to sleep during a long upstream call (bench/upstream_wait_cost.py measured the gRPC hop
// at 218 us after a 0 ms upstream call and 759 us after a 30 ms one, against 54 and 107 us
// for the HTTP hop driven by the loop). Fleet calls that name a worker's client
// (GrpcCallOptions::on_loop) use it: every call of the HTTP frontend, and the gRPC
// frontend's ModelInfer (posted once to the reactor's loop), and the health checker's
// probes, and the gRPC frontend's other RPCs. The grpc++ client (grpc_client.h) keeps
// streams and the handoff's registrations.
//
//   serves(endpoint)     an IPv4/IPv6 literal or unix: path, or a host name with
//                        options.hosts (resolved by the gateway's discovery; its
//                        addresses tried in turn, the one that connected last first)
//   unary(...)           one call; `done` runs once, on the loop thread, never inside
//                        unary(); after cancel() it still runs, with CANCELLED
//
// The contract is GrpcUpstreamClient's as fleet_call.h reads it, except that `done` gets
// the gateway's status directly (what toUpstreamStatus would make, naming the upstream and
// endpoint; the upstream's own grpc-status and message pass through unchanged):
//
//   UNAVAILABLE, markNotSent   cannot connect (refused, timed out), the TLS handshake
//                              failed or did not finish (its reason named), or the upstream
//                              refused the stream unread (REFUSED_STREAM, a GOAWAY before it)
//   UNAVAILABLE                the connection closed or reset before the answer; the
//                              upstream reset the stream, or cancelled the call
//   DEADLINE_EXCEEDED          options.deadline passed (sent upstream as grpc-timeout too)
//   INVALID_ARGUMENT, kUpstream (502)
//                              the answer is not gRPC: an HTTP status other than 200,
//                              another content-type, no grpc-status, a compressed or second
//                              message, a broken HTTP/2 frame
//   OK with an invalid ByteBuffer
//                              the call ended OK without a message (fleet_call refuses it)
//
// Connections: one per endpoint per loop, HTTP/2 multiplexing every call on it, opened on
// first use; one that received GOAWAY takes no new call and closes when its last call
// ends, and the next call opens a fresh one. A call whose connection dies before any byte
// of it reached the socket is sent once more on a new connection.
//
// TLS: the connection's first bytes start the handshake; what the connection queued meanwhile
// waits for the upstream's answer (the read pumps again), not for a writable socket. A
// new connection to an endpoint resumes the session of the one before.
//
// Zero copy: the request's Buffers (or a grpc::ByteBuffer's slices) are handed to the
// socket as they are (DATA frames are written as a 9-byte header plus references into
// them, NGHTTP2_DATA_FLAG_NO_COPY; under TLS they are encrypted from where they lie); the
// answer is received into one buffer of the message's size, which the message given to
// `done` holds as a one-segment chain (no grpc slice made unless someone asks for one).
//
// Progress: with options.answer_progress, a large answer's message is told as it lands
// (after a read that brought kRelayStepBytes more, while it is incomplete: the caller may
// start its own client's answer from the buffer's bytes; grpc_client.h, AnswerProgress),
// or, where the progress takes blocks, read into pooled blocks of kRelayBlockBytes handed
// on as they fill. Told from the socket handler's end, like `done`, never inside the
// connection.
//
// Flow control: the connection's receive window is HTTP/2's largest, each stream's
// kRelayWindowBytes, given back at half as the bytes arrive; a call whose message goes in
// blocks gives its blocks' bytes back only as they are let go of, so the upstream runs no
// more than a window ahead of whoever takes them. The upstream's windows are obeyed.
//
// Threads: loop thread only, except cancel() on a handle, from any thread (it posts).

#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codecs/grpc_byte_buffer.h"
#include "codecs/status.h"
#include "config/config.h"
#include "gateway/http/event_loop.h"
#include "gateway/upstream/grpc_client.h"
#include "gateway/upstream/host_addresses.h"
#include "tls/client_session.h"

namespace infergate::gateway::upstream {

struct GrpcLoopClientOptions {
  std::string upstream_name;  // for messages
  // The upstream's configured headers (lowercase keys), replacing forwarded metadata of
  // the same key.
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds connect_timeout{5000};
  // While calls are open, a PING every keepalive_time; no answer within keepalive_timeout
  // fails the connection's calls (UNAVAILABLE): a peer that vanished silently is found
  // without waiting for TCP. grpc++'s figures (grpc_client.cc): Triton counts a ping sooner
  // than 5 minutes after the last as a strike.
  std::chrono::milliseconds keepalive_time{360000};
  std::chrono::milliseconds keepalive_timeout{20000};
  // TLS toward the upstream (its `tls` settings, ALPN "h2"); null: plaintext (h2c).
  std::shared_ptr<const tls::ClientContext> tls;
  // The addresses of host-name endpoints (host_addresses.h); null: host names are not served.
  std::shared_ptr<const HostAddresses> hosts;
};

class GrpcLoopClient {
 public:
  using Done = std::function<void(codecs::Status status, codecs::MovableByteBuffer answer)>;

  GrpcLoopClient(http::EventLoop& loop, GrpcLoopClientOptions options);
  ~GrpcLoopClient();  // ends every call in flight without calling back
  GrpcLoopClient(const GrpcLoopClient&) = delete;
  GrpcLoopClient& operator=(const GrpcLoopClient&) = delete;

  http::EventLoop& loop() const { return loop_; }

  // Whether this engine serves `endpoint` (see the top of this file).
  bool serves(const config::ListenAddress& endpoint) const;

  // `method` is a full name ("/inference.GRPCInferenceService/ModelInfer"); options'
  // wait_for_ready is not honoured (there is no reconnect backoff to wait out: a call
  // opens a connection when there is none).
  std::shared_ptr<GrpcCallHandle> unary(const config::ListenAddress& endpoint,
                                        std::string_view method, const codecs::MovableByteBuffer& request,
                                        const GrpcCallOptions& options, Done done);

  // Ends every call in flight without calling back, dropping the callbacks (shutdown,
  // once the loop has stopped: a callback may hold what owns this client).
  void abandonAll();

 private:
  class Engine;
  http::EventLoop& loop_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace infergate::gateway::upstream
