#pragma once

// The gRPC surface of Triton (PROTOCOL.md section 11): all 20 RPCs of
// inference.GRPCInferenceService and grpc.health.v1.Health/Check, on the grpc++ callback
// API. A listener is carried by the gateway's own HTTP/2 server, in plaintext or TLS, unless
// GrpcServerEngine::kGrpcpp is asked (grpc_native_server.h): it serves ModelInfer itself
// (ModelInferCall, grpc_model_infer.h) and relays the rest to this same service in process.
//
//   ModelInfer, ModelStreamInfer   raw grpc::ByteBuffer in and out (the generated
//                                  WithRawCallbackMethod_* helpers): the codecs decode
//                                  and encode the wire format without copying tensors
//                                  (grpc_model_infer.cc, grpc_stream_infer.cc)
//   the other 18 + Health/Check    generated typed messages, answered on grpc's thread
//                                  with the context's default reactor; none of them
//                                  blocks (grpc_admin_rpcs.cc)
//
// Inference runs on the WorkerPool's event loops (one loop per call, round robin): the
// repository's Execution is played there by runExecution, and the reactor of a call
// touches its state, and calls StartRead / StartWrite / Finish, only from that loop. grpc
// callbacks post to the loop; the reactor is deleted on the loop too (OnDone posts it),
// after every task that names it. Hence the pool must be running from start() until
// shutdown() has returned.
//
// Behaviour (PROTOCOL 11.4-11.6): client shared memory as the config's shm section says
// (off: register / unregister UNIMPLEMENTED, status empty, a request naming a region
// INVALID_ARGUMENT; on: regions through shm/, shm_binding.h); ModelInfer
// refuses decoupled models (UNIMPLEMENTED); ModelStreamInfer carries any number of
// requests for any models, answers non-decoupled requests in request order and decoupled
// ones as produced, reports errors in-band unless the stream's metadata has
// `triton_grpc_error: true` (then the first error ends the stream with its status), and
// ends with OK once the client half-closed and every request completed. Client
// cancellation and deadlines stop the timers of the call's executions.
//
// Threads: the constructor, start(), port() and shutdown() from one owning thread.

#include <chrono>
#include <climits>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "codecs/limits.h"
#include "codecs/status.h"
#include "gateway/http/connection_caps.h"
#include "gateway/http/worker_pool.h"
#include "gateway/server_info.h"
#include "gateway/settings_store.h"
#include "gateway/router.h"
#include "gateway/telemetry/recorder.h"
#include "gateway/upstream/builtin/repository.h"

namespace grpc {
class Server;
class ServerCredentials;
}  // namespace grpc

namespace infergate::tls {
class ServerContextSource;
}  // namespace infergate::tls

namespace infergate::gateway::frontends {

// Which server carries the calls: the gateway's own HTTP/2 server on the worker loops
// (grpc_native_server.h; ModelInfer served there, every other RPC relayed to grpc++ in
// process; TLS through GrpcFrontendOptions::tls), or grpc++ alone (TLS through
// GrpcFrontendOptions::credentials). A unix-abstract listener is always grpc++'s.
enum class GrpcServerEngine { kNative, kGrpcpp };

struct GrpcFrontendOptions {
  // TLS / mTLS. The native engine's: the listener's contexts (tls/server_context.h, ALPN
  // "h2"), taken by each connection as it is accepted, so a certificate swapped in serves
  // the connections from then on. grpc++'s: credentials (tls/grpc_credentials.h); when
  // set, grpc++ carries the listener whichever engine is asked. Both null: plaintext.
  std::shared_ptr<tls::ServerContextSource> tls;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  GrpcServerEngine engine = GrpcServerEngine::kNative;
  int max_receive_message_bytes = INT_MAX;  // Triton: INT32_MAX both ways
  int max_send_message_bytes = INT_MAX;
  codecs::DecodeLimits limits;
  // Keepalive, Triton's defaults (PROTOCOL.md section 1).
  int keepalive_time_ms = 7200000;
  int keepalive_timeout_ms = 20000;
  bool keepalive_permit_without_calls = false;
  int http2_max_pings_without_data = 2;
  int http2_min_recv_ping_interval_without_data_ms = 300000;
  int http2_max_ping_strikes = 2;
  // Abuse limits (limits.header_timeout_ms, max_header_bytes, idle_timeout_ms): a
  // connection must finish its TLS and HTTP/2 handshake within handshake_timeout_ms, a
  // call's metadata may not pass max_metadata_bytes (RESOURCE_EXHAUSTED), and a
  // connection without calls for idle_timeout_ms is sent GOAWAY.
  int handshake_timeout_ms = 10000;
  int max_metadata_bytes = 65536;
  int idle_timeout_ms = 300000;
  // limits.send_timeout_ms (native server): a connection with bytes for its client that
  // the client has taken none of for this long is closed, its calls cancelled; a stream
  // whose reply the client gives no flow-control window for as long is reset.
  int send_timeout_ms = 60000;
  // The native server's connection caps (limits.max_connections, max_connections_per_client,
  // http/connection_caps.h): past either, an accepted connection is closed at once. grpc++
  // has no hook at accept and applies neither.
  size_t max_connections = SIZE_MAX;
  size_t max_connections_per_client = SIZE_MAX;
  // limits.grpc_reset_burst / grpc_resets_per_second (native server): streams a
  // connection's client may reset, a burst refilled at a rate; past it the connection is
  // closed (GOAWAY ENHANCE_YOUR_CALM), counted in ConnectionCaps::resetFloods().
  uint32_t reset_burst = 1000;
  uint32_t resets_per_second = 33;
  // A stream stops reading while this many of its requests are in flight in the gateway
  // (answered or not, in order behind an earlier one) or while those in flight come to
  // 64 MiB (one is always let in), while 4 MiB of its answers wait for
  // the client to take them, and while 4 MiB of its requests wait for a gRPC upstream's
  // stream to take them.
  size_t max_stream_requests_in_flight = 1024;
  // Triton's --grpc-restricted-protocol: category ("health", "metadata", "inference",
  // "shared-memory", "model-config", "model-repository", "statistics", "trace",
  // "logging") -> {key, value}; a call of that category must carry metadata
  // "triton-grpc-protocol-<key>: <value>", else UNAVAILABLE "This protocol is restricted,
  // expecting header 'triton-grpc-protocol-<key>'".
  std::map<std::string, std::pair<std::string, std::string>, std::less<>> restricted;
  std::shared_ptr<Security> security;  // null: Security::open() (no credentials, no limits)
};

namespace grpc_detail {
struct Shared;
class InferenceService;
class HealthService;
class NativeGrpcServer;
}  // namespace grpc_detail

class GrpcFrontend {
 public:
  GrpcFrontend(std::shared_ptr<Router> router,
               std::shared_ptr<SettingsStore> settings, ServerInfo info,
               std::shared_ptr<ServerHealth> health, http::WorkerPool& pool,
               GrpcFrontendOptions options,
               std::shared_ptr<telemetry::Recorder> recorder = nullptr);
  ~GrpcFrontend();  // shutdown(0) if still running
  GrpcFrontend(const GrpcFrontend&) = delete;
  GrpcFrontend& operator=(const GrpcFrontend&) = delete;

  // Listens on "host:port" (port 0: any free one), "[v6]:port" or "unix:/path" and
  // serves. Returns the bound address ("127.0.0.1:40123"; unix addresses as given).
  // Errors: FAILED_PRECONDITION when already started; UNAVAILABLE when grpc cannot bind.
  codecs::StatusOr<std::string> start(std::string address);
  // The bound TCP port; 0 before start() and for unix sockets.
  int port() const { return port_; }
  // Stops accepting calls, lets calls in flight finish for `grace`, then cancels the rest
  // and waits until every reactor is done. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

  // The native server's connections: open now, and closed at accept by each cap. Null
  // under grpc++ (or before start()). Any thread.
  const http::ConnectionCaps* connections() const;
  // Bytes of ModelStreamInfer answers waiting in the gateway for their clients, all
  // streams together (each stream stops reading its upstream legs past 4 MiB). Any thread.
  uint64_t streamAnswerBytes() const;
  // ModelStreamInfer streams whose upstream legs are paused now (their answers reached
  // 4 MiB, counting those still on their way to the loop). Any thread.
  uint64_t pausedStreams() const;

 private:
  std::shared_ptr<grpc_detail::Shared> shared_;
  std::unique_ptr<grpc_detail::InferenceService> service_;
  std::unique_ptr<grpc_detail::HealthService> health_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc_detail::NativeGrpcServer> native_;  // when the native engine listens
  int port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace infergate::gateway::frontends
