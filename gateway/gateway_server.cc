#include "gateway/gateway_server.h"

#include <atomic>

#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <ctime>
#include <deque>
#include <iostream>
#include <thread>

#include "codecs/json_writer.h"
#include "config/config_loader.h"
#include "config/listen_address.h"
#include "gateway/admin_api.h"
#include "gateway/discovery.h"
#include "gateway/frontends/grpc_frontend.h"
#include "gateway/frontends/http_frontend.h"
#include "gateway/http/http_server.h"
#include "gateway/metrics.h"
#include "gateway/server_info.h"
#include "gateway/settings_store.h"
#include "gateway/health_checker.h"
#include "gateway/router.h"
#include "gateway/router_metrics.h"
#include "gateway/shm_metrics.h"
#include "gateway/telemetry/log.h"
#include "gateway/telemetry/recorder.h"
#include "shm/cuda_probe.h"
#include "tls/grpc_credentials.h"
#include "tls/server_context.h"

namespace infergate::gateway {
namespace {

http::ListenSpec listenSpecOf(const config::ListenAddress& address) {
  if (address.kind == config::ListenAddress::Kind::kUnix) {
    return http::ListenSpec::unixPath(address.path);
  }
  return http::ListenSpec::tcp(address.host, address.port);
}

http::HttpLimits httpLimitsOf(const config::LimitsConfig& l) {
  http::HttpLimits h;
  h.max_header_bytes = l.max_header_bytes;
  h.max_header_count = l.max_header_count;
  h.max_body_bytes = l.max_binary_body_bytes;
  h.header_timeout = std::chrono::milliseconds(l.header_timeout_ms);
  h.body_timeout = std::chrono::milliseconds(l.body_timeout_ms);
  h.idle_timeout = std::chrono::milliseconds(l.idle_timeout_ms);
  h.send_timeout = std::chrono::milliseconds(l.send_timeout_ms);
  return h;
}

// The decoders' limits from the `limits` section; `max_binary_body` is the listener's
// own cap on a binary body or gRPC message.
codecs::DecodeLimits decodeLimitsOf(const config::LimitsConfig& l, uint64_t max_binary_body) {
  codecs::DecodeLimits d;
  d.max_json_bytes = l.max_input_bytes;
  d.max_tensor_bytes = l.max_input_bytes;
  d.max_decompressed_bytes = l.max_input_bytes;
  d.max_binary_body_bytes = max_binary_body;
  d.max_json_depth = l.max_json_depth;
  d.max_tensors = l.max_tensors;
  d.max_rank = l.max_tensor_rank;
  d.max_elements = l.max_tensor_elements;
  return d;
}

// What a running gateway cannot change without a restart: the sockets, the threads, the
// limits every connection was set up with, and an upstream's shared-memory handoff (its
// pool is registered with the upstream). Empty when none of it changed.
std::vector<std::string> restartOnlyChanges(const config::GatewayConfig& a,
                                            const config::GatewayConfig& b) {
  std::vector<std::string> changed;
  auto listener = [&](const char* name, const std::optional<config::ListenerConfig>& x,
                      const std::optional<config::ListenerConfig>& y) {
    if (x.has_value() != y.has_value() || (x && x->address.text != y->address.text)) {
      changed.push_back(codecs::strCat("listeners.", name));
    }
  };
  listener("http", a.http, b.http);
  listener("grpc", a.grpc, b.grpc);
  listener("metrics", a.metrics, b.metrics);
  if (a.grpc && b.grpc && a.grpc->native_grpc_server != b.grpc->native_grpc_server) {
    changed.push_back("listeners.grpc.server");
  }
  // TLS turned on or off needs new sockets. The gateway's own servers (HTTP, and gRPC on the
  // native engine) take new files and client checks at a reload; under grpc++ they are
  // grpc's own once it started (it watches the files themselves).
  if (a.http && b.http && a.http->tls.has_value() != b.http->tls.has_value()) {
    changed.push_back("listeners.http.tls");
  }
  if (a.metrics && b.metrics && a.metrics->tls.has_value() != b.metrics->tls.has_value()) {
    changed.push_back("listeners.metrics.tls");
  }
  if (a.grpc && b.grpc && a.grpc->native_grpc_server && b.grpc->native_grpc_server) {
    if (a.grpc->tls.has_value() != b.grpc->tls.has_value()) changed.push_back("listeners.grpc.tls");
  } else if (a.grpc && b.grpc) {
    const auto& x = a.grpc->tls;
    const auto& y = b.grpc->tls;
    if (x.has_value() != y.has_value() ||
        (x && (x->cert != y->cert || x->key != y->key || x->client_ca != y->client_ca ||
               x->client_auth != y->client_auth || x->watch_interval_ms != y->watch_interval_ms))) {
      changed.push_back("listeners.grpc.tls");
    }
  }
  if (a.workers != b.workers) changed.push_back("workers");
  if (a.busy_poll_us != b.busy_poll_us) changed.push_back("busy_poll_us");
  if (a.limits != b.limits) changed.push_back("limits");
  const config::ObservabilityConfig& o = a.observability;
  const config::ObservabilityConfig& p = b.observability;
  if (o.request_metrics != p.request_metrics || o.max_series != p.max_series ||
      o.access_log.enabled != p.access_log.enabled || o.access_log.format != p.access_log.format ||
      o.access_log.path != p.access_log.path ||
      o.access_log.sample_percent != p.access_log.sample_percent ||
      o.log.level != p.log.level || o.log.format != p.log.format) {
    changed.push_back("observability");
  }
  // An endpoint kept by a reload keeps its handoff pool and registrations.
  for (const config::UpstreamConfig& u : b.upstreams) {
    const config::UpstreamConfig* before = a.findUpstream(u.name);
    if (before == nullptr) continue;
    const config::HandoffConfig& h = before->handoff;
    const config::HandoffConfig& k = u.handoff;
    if (h.enabled != k.enabled || h.passthrough != k.passthrough || h.min_bytes != k.min_bytes ||
        h.pool_bytes != k.pool_bytes || h.kind != k.kind || h.device != k.device ||
        h.key_prefix != k.key_prefix || before->colocated != u.colocated) {
      changed.push_back(codecs::strCat("upstreams[", u.name, "].handoff"));
    }
  }
  return changed;
}

void logReload(const codecs::Status& status, const RouterSnapshot& now) {
  const std::string_view error = status.ok() ? std::string_view() : codecs::messageOf(status);
  if (status.ok()) {
    telemetry::logEvent(telemetry::Level::kInfo, "reload",
                        {{"ok", true}, {"generation", now.generation}, {"config_hash", now.config_hash}});
  } else {
    telemetry::logEvent(telemetry::Level::kWarning, "reload",
                        {{"ok", false}, {"error", error}, {"generation", now.generation},
                         {"config_hash", now.config_hash}});
  }
}

using tls::FileStamp;
using tls::stampOf;

// A listener's TLS settings as they reach the log: a certificate past its end (or
// a rebuilt context that failed) is worth a warning.
void logTlsContext(std::string_view listener, const tls::ServerContext& context) {
  const time_t now = ::time(nullptr);
  if (context.notAfter() != 0 && context.notAfter() < now) {
    telemetry::logEvent(telemetry::Level::kWarning, "tls_certificate_expired",
                        {{"listener", listener}, {"cert", context.config().cert}});
  }
}

// One thread for the slow, serial work: reloads (reading files, resolving names, building
// channels) and watching the config file. Tasks run in order. Made before anything can
// post to it (the admin API, SIGHUP) and started once the gateway is whole: a task posted
// in between waits for start().
class ControlThread {
 public:
  ControlThread(std::chrono::milliseconds tick, std::function<void()> on_tick)
      : tick_ms_(tick.count()), on_tick_(std::move(on_tick)) {}
  ~ControlThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void start() { thread_ = std::thread([this] { run(); }); }
  // A reload that changes lifecycle.watch_interval_ms: the next wait uses it.
  void setTick(std::chrono::milliseconds tick) { tick_ms_.store(tick.count()); }
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      if (tasks_.empty()) {
        const std::chrono::milliseconds tick(tick_ms_.load());
        if (wake_.wait_for(lock, tick) == std::cv_status::timeout && on_tick_) {
          lock.unlock();
          on_tick_();
          lock.lock();
        }
        continue;
      }
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::atomic<int64_t> tick_ms_;
  const std::function<void()> on_tick_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // run(), from start()
};

}  // namespace

struct GatewayServer::Impl {
  config::GatewayConfig config;
  std::unique_ptr<http::WorkerPool> pool;
  std::shared_ptr<Router> router;
  std::unique_ptr<HealthChecker> health_checker;
  std::unique_ptr<Discovery> discovery;
  std::unique_ptr<AdminApi> admin;
  std::mutex reload_mu;  // one reload at a time; guards config, file_stamp, shutting_down
  bool shutting_down = false;
  FileStamp file_stamp;
  std::unique_ptr<ControlThread> control;
  std::shared_ptr<SettingsStore> settings;
  std::shared_ptr<ServerHealth> health = std::make_shared<ServerHealth>();
  std::shared_ptr<Metrics> metrics;
  std::shared_ptr<telemetry::Recorder> recorder;
  std::unique_ptr<frontends::HttpFrontend> http_frontend;
  std::unique_ptr<http::HttpServer> http_server;
  std::unique_ptr<http::HttpServer> metrics_server;
  std::unique_ptr<frontends::GrpcFrontend> grpc_frontend;
  std::shared_ptr<Security> security;
  // A listener's TLS contexts, built by the gateway (the HTTP and metrics listeners'; the
  // gRPC listener's on the native engine), and when its files were last looked at.
  struct TlsListener {
    std::shared_ptr<tls::ServerContextSource> source;  // null: plaintext (or grpc++'s own)
    std::chrono::steady_clock::time_point checked;     // control thread
  };
  TlsListener http_tls, grpc_tls, metrics_tls;
  // The native gRPC server's connection counts, once it listens (scrapes read it).
  std::atomic<const http::ConnectionCaps*> grpc_connections{nullptr};
  std::atomic<const frontends::GrpcFrontend*> grpc_frontend_view{nullptr};  // for the metrics
  std::string http_address, grpc_address, metrics_address;
  bool started = false;

  codecs::Status startHttp() {
    frontends::HttpFrontendOptions options;
    options.limits = decodeLimitsOf(config.limits, config.limits.max_binary_body_bytes);
    options.security = security;
    http_frontend = std::make_unique<frontends::HttpFrontend>(router, settings, ServerInfo{},
                                                              health, options, recorder);
    http_server = std::make_unique<http::HttpServer>(
        *pool, httpLimitsOf(config.limits), config.limits.max_connections,
        [front = http_frontend.get()](std::shared_ptr<http::HttpExchange> e) { front->handle(e); });
    if (config.limits.max_connections_per_client < config.limits.max_connections) {
      http_server->setMaxConnectionsPerClient(config.limits.max_connections_per_client);
    }
    http_server->setHeadersGate(
        [front = http_frontend.get()](http::HttpRequest& request, tls::ServerSession* session) {
          return front->admitHeaders(request, session);
        });
    http_server->setObserver([rec = recorder](http::HttpExchange& e, int status, uint64_t) {
      const http::HttpRequest& r = e.request();
      rec->finishHttp(e.info(), status, r.tag.empty() ? std::string_view("unrouted") : r.tag,
                      r.target);
    });
    if (config.http->tls) {
      INFERGATE_RETURN_IF_ERROR(serveTls("http", *config.http->tls, http_tls, *http_server));
    }
    INFERGATE_ASSIGN_OR_RETURN(http::BoundSockets bound,
                               http_server->listen(listenSpecOf(config.http->address)));
    http_address = bound.address;
    return absl::OkStatus();
  }

  static codecs::Status prefixed(std::string_view prefix, const codecs::Status& status) {
    return codecs::Status(status.code(), codecs::strCat(prefix, codecs::messageOf(status)));
  }

  // An HTTP/1.1 server (the HTTP or metrics listener) speaking TLS with the listener's
  // settings; the context is kept in `tls` for reloads and file changes.
  static codecs::Status serveTls(std::string_view listener, const config::ServerTlsConfig& settings,
                                 TlsListener& tls, http::HttpServer& server) {
    auto source = tls::ServerContextSource::create(settings, {"http/1.1"});
    if (!source.ok()) return prefixed(codecs::strCat("listeners.", listener, "."), source.status());
    tls.source = std::move(*source);
    logTlsContext(listener, *tls.source->current());
    server.setTls(tls.source);
    return absl::OkStatus();
  }

  // GET /metrics (and /metrics/) -> the registry; /admin/... -> the admin API; any other
  // GET -> 200 empty; other methods -> 405, as Triton's metrics port.
  codecs::Status startMetrics() {
    metrics_server = std::make_unique<http::HttpServer>(
        *pool, httpLimitsOf(config.limits), 1024,
        [m = metrics, admin = admin.get()](std::shared_ptr<http::HttpExchange> e) {
          const http::HttpRequest& r = e->request();
          if (AdminApi::owns(r.path())) return admin->handle(e);
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
    if (config.metrics->tls) {
      INFERGATE_RETURN_IF_ERROR(serveTls("metrics", *config.metrics->tls, metrics_tls, *metrics_server));
    }
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
    options.limits = decodeLimitsOf(config.limits, config.limits.max_grpc_message_bytes);
    // Each within int: the limits reader caps timeouts at a day, header bytes at INT32_MAX.
    options.handshake_timeout_ms = static_cast<int>(config.limits.header_timeout_ms);
    options.max_metadata_bytes = static_cast<int>(config.limits.max_header_bytes);
    options.idle_timeout_ms = static_cast<int>(config.limits.idle_timeout_ms);
    options.send_timeout_ms = static_cast<int>(config.limits.send_timeout_ms);
    options.max_connections = config.limits.max_connections;
    options.max_connections_per_client = config.limits.max_connections_per_client;
    options.reset_burst = config.limits.grpc_reset_burst;
    options.resets_per_second = config.limits.grpc_resets_per_second;
    options.security = security;
    options.engine = config.grpc->native_grpc_server ? frontends::GrpcServerEngine::kNative
                                                     : frontends::GrpcServerEngine::kGrpcpp;
    if (config.grpc->tls && options.engine == frontends::GrpcServerEngine::kNative) {
      auto source = tls::ServerContextSource::create(*config.grpc->tls, {"h2"});
      if (!source.ok()) return prefixed("listeners.grpc.", source.status());
      grpc_tls.source = std::move(*source);
      logTlsContext("grpc", *grpc_tls.source->current());
      options.tls = grpc_tls.source;
    } else if (config.grpc->tls) {
      auto credentials = tls::serverCredentials(*config.grpc->tls);
      if (!credentials.ok()) return prefixed("listeners.grpc.", credentials.status());
      options.credentials = std::move(*credentials);
    }
    grpc_frontend = std::make_unique<frontends::GrpcFrontend>(router, settings, ServerInfo{},
                                                              health, *pool, options, recorder);
    INFERGATE_ASSIGN_OR_RETURN(grpc_address, grpc_frontend->start(config::formatAddress(config.grpc->address)));
    grpc_connections.store(grpc_frontend->connections(), std::memory_order_release);
    grpc_frontend_view.store(grpc_frontend.get(), std::memory_order_release);
    return absl::OkStatus();
  }

  // Control thread or main thread.
  codecs::Status reload() {
    std::lock_guard<std::mutex> lock(reload_mu);
    if (shutting_down) return absl::UnavailableError("the gateway is shutting down");
    file_stamp = stampOf(config.source);
    codecs::StatusOr<config::GatewayConfig> next = config::loadConfigFile(config.source);
    codecs::Status status = next.status();
    if (status.ok()) {
      std::vector<std::string> changed = restartOnlyChanges(config, *next);
      if (!changed.empty()) {
        std::string keys;
        for (const std::string& k : changed) keys += (keys.empty() ? "" : ", ") + k;
        status = absl::FailedPreconditionError(codecs::strCat(
            keys, " changed: these take effect only on a restart; the running configuration "
                  "stays"));
      }
    }
    // The listeners' certificates are read again on every reload (the gRPC listener's on
    // the native engine; grpc++ watches its own files); a bad one refuses the reload and the
    // running ones stay.
    std::shared_ptr<const tls::ServerContext> next_http_tls, next_grpc_tls, next_metrics_tls;
    if (status.ok() && http_tls.source) status = rebuildTls("http", *next->http->tls, http_tls, next_http_tls);
    if (status.ok() && grpc_tls.source) status = rebuildTls("grpc", *next->grpc->tls, grpc_tls, next_grpc_tls);
    if (status.ok() && metrics_tls.source) {
      status = rebuildTls("metrics", *next->metrics->tls, metrics_tls, next_metrics_tls);
    }
    // Key and JWKS files are read again too; one that does not load refuses the reload.
    std::shared_ptr<const Security::Prepared> next_security;
    if (status.ok()) {
      auto prepared = security->prepare(*next);
      if (prepared.ok()) {
        next_security = std::move(*prepared);
      } else {
        status = prepared.status();
      }
    }
    if (status.ok()) {
      discovery->watch(*next);
      status = router->reload(*next, [this](const RouterSnapshot& s) { discovery->prepare(s); });
    }
    if (status.ok()) security->install(*next_security);
    if (status.ok()) {
      installTls("http", http_tls, next_http_tls);
      installTls("grpc", grpc_tls, next_grpc_tls);
      installTls("metrics", metrics_tls, next_metrics_tls);
    }
    if (status.ok()) {
      config = std::move(*next);
      // Read where they are used: the tick from here on, the drain at shutdown.
      if (control) {
        control->setTick(std::chrono::milliseconds(
            std::max<uint64_t>(config.lifecycle.watch_interval_ms, 1)));
      }
    }
    metrics->reloaded(status.ok());
    logReload(status, *router->snapshot());
    return status;
  }

  // Control thread, every watch interval.
  void tick() {
    watchTlsFiles();
    watchAuthFiles();
    watchFile();
  }

  // A context for `listener` from the reloaded settings, into `built`; the error names the
  // listener's key.
  static codecs::Status rebuildTls(std::string_view listener, const config::ServerTlsConfig& settings,
                                   const TlsListener& current, std::shared_ptr<const tls::ServerContext>& built) {
    auto next = tls::ServerContext::create(settings, current.source->alpn());
    if (!next.ok()) return prefixed(codecs::strCat("listeners.", listener, "."), next.status());
    built = std::move(*next);
    return absl::OkStatus();
  }

  // A context rebuilt by a reload, made current for the connections accepted from now on
  // (null: the listener has none).
  static void installTls(std::string_view listener, TlsListener& tls,
                         const std::shared_ptr<const tls::ServerContext>& built) {
    if (!built) return;
    tls.source->install(built);
    logTlsContext(listener, *built);
  }

  // The listeners' certificate files, every tls.watch_interval_ms: a change builds a new
  // context for the connections accepted from then on; a bad file is logged once and the
  // running context stays.
  void watchTlsFiles() {
    std::lock_guard<std::mutex> lock(reload_mu);
    if (shutting_down) return;
    watchTlsFilesOf("http", http_tls);
    watchTlsFilesOf("grpc", grpc_tls);
    watchTlsFilesOf("metrics", metrics_tls);
  }

  void watchTlsFilesOf(std::string_view listener, TlsListener& tls) {
    if (!tls.source) return;
    const auto now = std::chrono::steady_clock::now();
    const auto every = std::chrono::milliseconds(tls.source->current()->config().watch_interval_ms);
    if (now - tls.checked < every) return;
    tls.checked = now;
    bool changed = false;
    codecs::Status status = tls.source->reloadIfChanged(&changed);
    if (!changed) return;
    if (status.ok()) {
      telemetry::logEvent(telemetry::Level::kInfo, "tls_reload", {{"listener", listener}, {"ok", true}});
      logTlsContext(listener, *tls.source->current());
    } else {
      telemetry::logEvent(telemetry::Level::kWarning, "tls_reload",
                          {{"listener", listener}, {"ok", false}, {"error", codecs::messageOf(status)}});
    }
  }

  // The API key and JWKS files, every auth.watch_interval_ms: a change takes effect for the
  // requests from then on; a file that does not load is logged once and the running keys stay.
  void watchAuthFiles() {
    std::lock_guard<std::mutex> lock(reload_mu);
    if (shutting_down) return;
    bool changed = false;
    codecs::Status status = security->watchFiles(&changed);
    if (!changed) return;
    if (status.ok()) {
      telemetry::logEvent(telemetry::Level::kInfo, "auth_reload", {{"ok", true}});
    } else {
      telemetry::logEvent(telemetry::Level::kWarning, "auth_reload",
                          {{"ok", false}, {"error", codecs::messageOf(status)}});
    }
  }

  // Reload when the config file changed.
  void watchFile() {
    if (!config.lifecycle.watch_config) return;
    {
      std::lock_guard<std::mutex> lock(reload_mu);
      if (stampOf(config.source) == file_stamp) return;
    }
    reload().IgnoreError();  // reload() logs its outcome
  }
};

GatewayServer::GatewayServer(config::GatewayConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
}

GatewayServer::~GatewayServer() {
  if (impl_->started) shutdown(std::chrono::milliseconds(0));
  impl_.reset();
  upstream::Housekeeper::instance().drain();  // the endpoints the router held, destroyed
}

codecs::Status GatewayServer::start() {
  Impl& s = *impl_;
  s.pool = std::make_unique<http::WorkerPool>(s.config.workers,
                                              std::chrono::microseconds(s.config.busy_poll_us));
  INFERGATE_ASSIGN_OR_RETURN(std::unique_ptr<Router> router, Router::create(s.config, *s.pool, std::make_shared<upstream::HostAddresses>()));
  s.router = std::move(router);
  INFERGATE_ASSIGN_OR_RETURN(s.security, Security::create(s.config));
  s.discovery = std::make_unique<Discovery>(s.router);
  s.discovery->watch(s.config);
  s.file_stamp = stampOf(s.config.source);
  // Before the admin API that posts to it, whose listener serves as soon as the workers
  // run (found by scripts/tsan: an early POST /admin/reload read the pointer as it was set).
  s.control = std::make_unique<ControlThread>(
      std::chrono::milliseconds(std::max<uint64_t>(s.config.lifecycle.watch_interval_ms, 1)),
      [impl = &s] { impl->tick(); });
  s.admin = std::make_unique<AdminApi>(s.router, [impl = &s](std::function<void(codecs::Status)> done) {
    impl->control->post([impl, done = std::move(done)] { done(impl->reload()); });
  }, s.security);
  // The log's starting point: the config's level and format, as the logging endpoint
  // then reports and changes them.
  const config::ObservabilityConfig::Log& log_config = s.config.observability.log;
  using LogLevel = config::ObservabilityConfig::Log::Level;
  LogSettings log_start;
  log_start.error = true;
  log_start.warning = log_config.level >= LogLevel::kWarning;
  log_start.info = log_config.level >= LogLevel::kInfo;
  log_start.verbose_level = log_config.level >= LogLevel::kVerbose ? 1 : 0;
  const bool log_json = log_config.format == config::ObservabilityConfig::Log::Format::kJson;
  auto apply_log = [log_json](const LogSettings& l) {
    telemetry::setLogSettings(telemetry::LogSettingsView{l.info, l.warning, l.error,
                                                         l.verbose_level, l.format == "ISO8601",
                                                         log_json});
  };
  apply_log(log_start);
  // Model-scoped trace settings reach this store only for models a builtin upstream serves:
  // the frontends resolve the model first.
  s.settings = std::make_shared<SettingsStore>(
      [](std::string_view) -> codecs::Status { return absl::OkStatus(); }, TraceSettings{},
      log_start);
  s.settings->onLogChange(apply_log);
  const config::ObservabilityConfig& o = s.config.observability;
  std::shared_ptr<telemetry::RequestMetrics> requests;
  if (o.request_metrics) requests = std::make_shared<telemetry::RequestMetrics>(o.max_series);
  std::unique_ptr<telemetry::AccessLog> access_log;
  if (o.access_log.enabled) {
    INFERGATE_ASSIGN_OR_RETURN(access_log, telemetry::AccessLog::open(o.access_log));
  }
  s.recorder = std::make_shared<telemetry::Recorder>(requests, std::move(access_log));
  s.metrics = std::make_shared<Metrics>(shm::probeCuda().compiled_in, requests);
  s.metrics->addCollectable(std::make_shared<RouterMetrics>(s.router));
  s.metrics->addCollectable(std::make_shared<ShmMetrics>(s.router));
  if (s.config.http) INFERGATE_RETURN_IF_ERROR(s.startHttp());
  s.metrics->setConnectionStats([server = s.http_server.get()] {
    Metrics::ConnectionStats stats;
    if (server != nullptr) {
      stats.open = server->connectionCount();
      stats.refused_over_total = server->refusedOverTotal();
      stats.refused_over_per_client = server->refusedOverClient();
      stats.send_timeouts = server->sendTimeouts();
    }
    return stats;
  });
  s.metrics->setGrpcConnectionStats([&s] {
    Metrics::ConnectionStats stats;
    if (const http::ConnectionCaps* caps = s.grpc_connections.load(std::memory_order_acquire)) {
      stats.open = caps->open();
      stats.refused_over_total = caps->refusedOverTotal();
      stats.refused_over_per_client = caps->refusedOverClient();
      stats.send_timeouts = caps->sendTimeouts();
      stats.reset_floods = caps->resetFloods();
    }
    return stats;
  });
  s.metrics->setGrpcStreamAnswerBytes([&s]() -> uint64_t {
    const frontends::GrpcFrontend* frontend = s.grpc_frontend_view.load(std::memory_order_acquire);
    return frontend != nullptr ? frontend->streamAnswerBytes() : 0;
  });
  if (s.config.metrics) INFERGATE_RETURN_IF_ERROR(s.startMetrics());
  s.pool->start();
  s.started = true;
  if (s.http_server) s.http_server->start();
  if (s.metrics_server) s.metrics_server->start();
  if (s.config.grpc) INFERGATE_RETURN_IF_ERROR(s.startGrpc());
  s.health_checker = std::make_unique<HealthChecker>(s.router, s.pool->loop(0), s.health);
  s.health_checker->start();
  s.control->start();
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

codecs::Status GatewayServer::reload() { return impl_->reload(); }

std::chrono::milliseconds GatewayServer::drainTimeout() const {
  std::lock_guard<std::mutex> lock(impl_->reload_mu);
  return std::chrono::milliseconds(impl_->config.lifecycle.drain_timeout_ms);
}

void GatewayServer::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (!s.started) return;
  s.health->ready.store(false);
  {
    std::lock_guard<std::mutex> lock(s.reload_mu);
    s.shutting_down = true;  // a reload asked from now on is refused
  }
  if (s.health_checker) s.health_checker->stop();
  // Both frontends stop taking connections at once and drain side by side, within one
  // grace: the HTTP listener closes first (immediate), then gRPC's drain blocks, then
  // HTTP's gets what is left of the same deadline.
  const auto deadline = std::chrono::steady_clock::now() + grace;
  auto left = [deadline] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  if (s.http_server) s.http_server->stopAccepting();
  if (s.grpc_frontend) s.grpc_frontend->shutdown(left());
  if (s.http_server) s.http_server->shutdown(left());
  if (s.metrics_server) s.metrics_server->shutdown(std::chrono::milliseconds(0));
  s.control.reset();
  if (s.discovery) s.discovery->stop();
  s.router->shutdown();  // gRPC upstream calls post their completions to the loops
  s.pool->stop();
  s.router->abandonHttp();
  upstream::Housekeeper::instance().drain();  // endpoints let go of, destroyed
  s.started = false;
}

}  // namespace infergate::gateway
