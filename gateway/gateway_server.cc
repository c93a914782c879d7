#include "gateway/gateway_server.h"

#include <unistd.h>

#include "codecs/json_writer.h"
#include "gateway/frontends/grpc_frontend.h"
#include "gateway/frontends/http_frontend.h"
#include "gateway/http/http_server.h"
#include "gateway/metrics.h"
#include "gateway/server_info.h"
#include "gateway/settings_store.h"
#include "gateway/readiness_probe.h"
#include "gateway/router.h"
#include "shm/cuda_probe.h"

namespace infergate::gateway {
namespace {

http::ListenSpec listenSpecOf(const config::ListenAddress& address) {
  if (address.kind == config::ListenAddress::Kind::kUnix) {
    return http::ListenSpec::unixPath(address.path);
  }
  return http::ListenSpec::tcp(address.host, address.port);
}

std::string grpcTarget(const config::ListenAddress& address) {
  if (address.kind == config::ListenAddress::Kind::kUnix) return "unix:" + address.path;
  if (address.host.find(':') != std::string::npos) {
    return codecs::strCat("[", address.host, "]:", address.port);
  }
  return codecs::strCat(address.host, ":", address.port);
}

http::HttpLimits httpLimitsOf(const config::LimitsConfig& l) {
  http::HttpLimits h;
  h.max_header_bytes = l.max_header_bytes;
  h.max_header_count = l.max_header_count;
  h.max_body_bytes = l.max_binary_body_bytes;
  h.header_timeout = std::chrono::milliseconds(l.header_timeout_ms);
  h.body_timeout = std::chrono::milliseconds(l.body_timeout_ms);
  h.idle_timeout = std::chrono::milliseconds(l.idle_timeout_ms);
  return h;
}

}  // namespace

struct GatewayServer::Impl {
  config::GatewayConfig config;
  std::unique_ptr<http::WorkerPool> pool;
  std::shared_ptr<Router> router;
  std::unique_ptr<ReadinessProbe> readiness;
  std::shared_ptr<SettingsStore> settings;
  std::shared_ptr<ServerHealth> health = std::make_shared<ServerHealth>();
  std::shared_ptr<Metrics> metrics;
  std::unique_ptr<frontends::HttpFrontend> http_frontend;
  std::unique_ptr<http::HttpServer> http_server;
  std::unique_ptr<http::HttpServer> metrics_server;
  std::unique_ptr<frontends::GrpcFrontend> grpc_frontend;
  std::string http_address, grpc_address, metrics_address;
  bool started = false;

  codecs::Status startHttp() {
    frontends::HttpFrontendOptions options;
    options.limits.max_json_bytes = config.limits.max_input_bytes;
    options.limits.max_tensor_bytes = config.limits.max_input_bytes;
    options.limits.max_decompressed_bytes = config.limits.max_input_bytes;
    options.limits.max_binary_body_bytes = config.limits.max_binary_body_bytes;
    http_frontend = std::make_unique<frontends::HttpFrontend>(router, settings, ServerInfo{},
                                                              health, options);
    http_server = std::make_unique<http::HttpServer>(
        *pool, httpLimitsOf(config.limits), config.limits.max_connections,
        [front = http_frontend.get()](std::shared_ptr<http::HttpExchange> e) { front->handle(e); });
    http_server->setObserver([m = metrics](const http::HttpRequest& r, int status,
                                           std::chrono::nanoseconds elapsed) {
      m->recordHttpRequest(r.tag.empty() ? std::string_view("unrouted") : r.tag, status, elapsed);
    });
    INFERGATE_ASSIGN_OR_RETURN(http::BoundSockets bound,
                               http_server->listen(listenSpecOf(config.http->address)));
    http_address = bound.address;
    return absl::OkStatus();
  }

  // GET /metrics (and /metrics/) -> the registry; any other GET -> 200 empty; other
  // methods -> 405, as Triton's metrics port.
  codecs::Status startMetrics() {
    metrics_server = std::make_unique<http::HttpServer>(
        *pool, httpLimitsOf(config.limits), 1024,
        [m = metrics](std::shared_ptr<http::HttpExchange> e) {
          const http::HttpRequest& r = e->request();
          if (r.method != "GET") {
            return e->respond(http::HttpResponse::jsonError(405, "Method Not Allowed"));
          }
          http::HttpResponse response;
          if (r.path() == "/metrics" || r.path() == "/metrics/") {
            response.header("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
            response.body.append(codecs::Buffer::fromString(m->serialize()));
          }
          e->respond(std::move(response));
        });
    INFERGATE_ASSIGN_OR_RETURN(http::BoundSockets bound,
                               metrics_server->listen(listenSpecOf(config.metrics->address)));
    metrics_address = bound.address;
    return absl::OkStatus();
  }

  codecs::Status startGrpc() {
    frontends::GrpcFrontendOptions options;
    int max_message = static_cast<int>(
        std::min<uint64_t>(config.limits.max_grpc_message_bytes, 0x7fffffff));
    options.max_receive_message_bytes = max_message;
    options.max_send_message_bytes = max_message;
    options.limits.max_json_bytes = config.limits.max_input_bytes;
    options.limits.max_tensor_bytes = config.limits.max_input_bytes;
    options.limits.max_binary_body_bytes = config.limits.max_grpc_message_bytes;
    grpc_frontend = std::make_unique<frontends::GrpcFrontend>(router, settings, ServerInfo{},
                                                              health, *pool, options);
    INFERGATE_ASSIGN_OR_RETURN(grpc_address, grpc_frontend->start(grpcTarget(config.grpc->address)));
    return absl::OkStatus();
  }
};

GatewayServer::GatewayServer(config::GatewayConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
}

GatewayServer::~GatewayServer() {
  if (impl_->started) shutdown(std::chrono::milliseconds(0));
}

codecs::Status GatewayServer::start() {
  Impl& s = *impl_;
  s.pool = std::make_unique<http::WorkerPool>(s.config.workers);
  INFERGATE_ASSIGN_OR_RETURN(std::unique_ptr<Router> router, Router::create(s.config, *s.pool));
  s.router = std::move(router);
  // Model-scoped trace settings reach this store only for models a builtin upstream serves:
  // the frontends resolve the model first.
  s.settings = std::make_shared<SettingsStore>(
      [](std::string_view) -> codecs::Status { return absl::OkStatus(); });
  s.metrics = std::make_shared<Metrics>(shm::probeCuda().compiled_in);
  if (s.config.http) INFERGATE_RETURN_IF_ERROR(s.startHttp());
  if (s.config.metrics) INFERGATE_RETURN_IF_ERROR(s.startMetrics());
  s.pool->start();
  s.started = true;
  if (s.http_server) s.http_server->start();
  if (s.metrics_server) s.metrics_server->start();
  if (s.config.grpc) INFERGATE_RETURN_IF_ERROR(s.startGrpc());
  s.readiness = std::make_unique<ReadinessProbe>(s.router, s.pool->loop(0), s.config.readiness,
                                                 s.health);
  s.readiness->start();
  s.health->ready.store(true);
  return absl::OkStatus();
}

std::string GatewayServer::readyLine() const {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginObject().key("event").string("ready").key("pid").int64(::getpid());
  if (!impl_->http_address.empty()) w.key("http").string(impl_->http_address);
  if (!impl_->grpc_address.empty()) w.key("grpc").string(impl_->grpc_address);
  if (!impl_->metrics_address.empty()) w.key("metrics").string(impl_->metrics_address);
  w.endObject();
  return out;
}

void GatewayServer::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (!s.started) return;
  s.health->ready.store(false);
  if (s.readiness) s.readiness->stop();
  if (s.grpc_frontend) s.grpc_frontend->shutdown(grace);
  if (s.http_server) s.http_server->shutdown(grace);
  if (s.metrics_server) s.metrics_server->shutdown(std::chrono::milliseconds(0));
  s.router->shutdown();  // gRPC upstream calls post their completions to the loops
  s.pool->stop();
  s.started = false;
}

}  // namespace infergate::gateway
