#pragma once

// The KServe v2 / Triton HTTP surface (PROTOCOL.md sections 2-6) on the project's HTTP/1.1
// layer: every route of Triton's table. The handler runs on the connection's event loop
// and never blocks.
//
//   gateway's own       health, server metadata, logging, global trace settings, shared
//                       memory regions (http_shm.cc)
//   routed by model     metadata, ready, config, stats, infer, generate(_stream), load,
//                       unload, model trace settings: Router::decide() picks the upstream,
//                       then by its protocol:
//                         builtin  served in-process (timed responses played by
//                                  runExecution on the loop)            http_infer.cc
//                         http     passed through as is (raw body, the headers that
//                                  matter, SSE relayed as it arrives)   http_forward.cc
//                                  except an infer naming shared-memory
//                                  regions or one for the handoff:
//                                  decoded and re-encoded (inferDecoded)
//                         grpc     transcoded to the typed RPC / ModelInfer with raw
//                                  contents, the answer back to JSON    http_forward.cc
//   merged              repository index and /v2/models/stats ask every upstream
//
// A route's rewrite is invisible to the client: responses, metadata and errors name the
// model it asked for.
//
// Errors use Triton's shapes: `{"error": "..."}` with the status of gateway/error_mapping
// (the gateway answers 400 where Triton answers 500 for a malformed body).

#include <memory>
#include <optional>

#include "codecs/limits.h"
#include "gateway/frontends/http_routes.h"
#include "gateway/http/http_connection.h"
#include "gateway/server_info.h"
#include "gateway/settings_store.h"
#include "gateway/router.h"
#include "gateway/telemetry/recorder.h"
#include "gateway/upstream/builtin/repository.h"

namespace infergate::gateway::frontends {

struct HttpFrontendOptions {
  codecs::DecodeLimits limits;  // max_json_bytes / max_tensor_bytes / max_decompressed_bytes:
                                // Triton's --http-max-input-size; max_binary_body_bytes
  std::shared_ptr<Security> security;  // null: Security::open() (no credentials, no limits)
};

// The error body and status of `status` (gateway/error_mapping), with Retry-After on a
// rate limit: every HTTP error the frontend sends goes through here.
http::HttpResponse errorResponse(const codecs::Status& status);
// A refusal by the security stage: errorResponse(), with WWW-Authenticate when credentials
// are missing (401).
http::HttpResponse refusalResponse(const codecs::Status& status);
// The security stage's view of a request's headers (Security::HeaderLookup): a field's
// first value, "" when absent. Lives as long as `request`.
inline auto headerLookup(const http::HttpRequest& request) {
  return [&request](std::string_view name) -> std::string_view {
    const std::string_view* v = request.headers.find(name);
    return v != nullptr ? *v : std::string_view();
  };
}

class HttpFrontend {
 public:
  // `recorder` null: no request metrics or access log (tests).
  HttpFrontend(std::shared_ptr<Router> router, std::shared_ptr<SettingsStore> settings,
               ServerInfo info, std::shared_ptr<ServerHealth> health, HttpFrontendOptions options,
               std::shared_ptr<telemetry::Recorder> recorder = nullptr);

  // The http::HttpHandler.
  void handle(const std::shared_ptr<http::HttpExchange>& exchange);
  // The security stage run early, at headers-complete (http::HeadersGate): a request its
  // credentials do not admit is refused (401 / 403) before its body is read, so an
  // unauthenticated client cannot make the gateway take in a large body. An admitted
  // request carries the decision to handle() in request.gate_state. A binary-tensor body
  // for an upstream that takes the handoff is given a place in its pool (placeBody).
  std::optional<http::HttpResponse> admitHeaders(http::HttpRequest& request,
                                                 tls::ServerSession* session);

 private:
  struct Route {
    HttpRoute match;
    std::optional<tls::Principal> principal;  // who the request's credentials proved
    Caller caller() const { return Caller{principal ? &*principal : nullptr, tls::Listener::kHttp}; }
  };
  using Exchange = std::shared_ptr<http::HttpExchange>;
  // The security stage where no gate ran (admitHeaders() decided otherwise): authenticates
  // the request for `unproved` (set: the route handle() matched), checks its API group and
  // records who was proved there. Answers the refusal itself (401 with WWW-Authenticate,
  // 403) and returns false.
  bool admit(const Exchange& exchange, std::optional<Route>& unproved);
  // At headers-complete, for an infer request: a binary-tensor body whose tensors its
  // upstream takes through the handoff pool is read straight into a pool slot
  // (handoffBodyPlace, request.body_place), so they go by reference with no copy.
  // Else, a binary-tensor body toward a remote upstream is asked for early
  // (request.early_dispatch_bytes: once its JSON header is in), so that it goes on while
  // it arrives (sendsAsArrives).
  void placeBody(http::HttpRequest& request, const Route& route) const;
  codecs::StatusOr<std::optional<tls::Principal>> authenticate(const http::HttpRequest& request,
                                                               HttpEndpoint endpoint,
                                                               tls::ServerSession* session) const;
  void dispatch(const Exchange& exchange, const Route& route);
  void routed(const Exchange& exchange, const Route& route);
  // The routed request toward `d`'s upstream (and mirror); its body whole, or arriving
  // where sendsAsArrives() says it may.
  void forward(const Exchange& exchange, const Route& route, const Decision& d);
  // Whether an infer request whose body is still arriving can go to `d`'s upstream now.
  // `loop`: the request's.
  bool sendsAsArrives(const http::HttpRequest& request, const Decision& d, http::EventLoop& loop) const;
  // builtin upstream (http_frontend.cc, http_infer.cc, http_generate.cc)
  void builtinEndpoint(const Exchange& exchange, const Route& route, const Decision& d);
  void infer(const Exchange& exchange, const Route& route, const Decision& d);
  void generate(const Exchange& exchange, const Route& route, const Decision& d, bool stream);
  void repository(const Exchange& exchange, const Route& route, const Decision& d);
  // remote upstreams (http_forward.cc)
  void forwardHttp(const Exchange& exchange, const Route& route, const Decision& d);
  void forwardGrpc(const Exchange& exchange, const Route& route, const Decision& d);
  void inferDecoded(const Exchange& exchange, const Decision& d);
  void mirror(const Exchange& exchange, const Route& route, const Decision& d);
  // every upstream (http_forward.cc)
  void mergedIndex(const Exchange& exchange);
  void mergedStatistics(const Exchange& exchange);
  // the gateway's shared-memory regions (http_shm.cc)
  void sharedMemory(const Exchange& exchange, const Route& route);

  std::shared_ptr<Router> router_;
  std::shared_ptr<SettingsStore> settings_;
  ServerInfo info_;
  std::string server_metadata_;  // cached, as Triton does
  std::shared_ptr<ServerHealth> health_;
  HttpFrontendOptions options_;
  std::shared_ptr<telemetry::Recorder> recorder_;
};

}  // namespace infergate::gateway::frontends
