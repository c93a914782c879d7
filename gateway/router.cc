#include "gateway/router.h"

#include <unistd.h>

#include <cstdio>
#include <random>

#include "codecs/json_response_decoder.h"
#include "codecs/model_ref.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "shm/handoff_pool.h"

namespace infergate::gateway {
namespace {

// A per-thread generator for split draws: cheap, unsynchronised, seeded once per thread.
uint64_t nextDraw() {
  thread_local uint64_t state = std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  // splitmix64
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// `s` in ASCII lowercase, into `out` (whose storage is reused).
void lowercaseInto(std::string_view s, std::string& out) {
  out.resize(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = codecs::asciiLower(s[i]);
}

RouterSnapshot::ForwardStarts forwardStartsOf(const config::ForwardConfig& forward) {
  RouterSnapshot::ForwardStarts starts;
  for (const std::string& f : forward.headers) {
    if (f.empty() || f.front() == '*') starts.any = true;
    else starts.letters[static_cast<unsigned char>(f.front())] = true;
  }
  return starts;
}

}  // namespace

bool isHopByHopHeader(std::string_view n) {
  static constexpr std::string_view kNever[] = {
      "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
      "host", "content-length", "expect", "proxy-authorization", "proxy-authenticate",
      "proxy-connection"};
  for (std::string_view h : kNever) {
    if (n == h) return true;
  }
  return n.starts_with("proxy-") || n.starts_with(":");  // HTTP/2 pseudo-headers
}

codecs::StatusOr<std::shared_ptr<const RouterSnapshot>> Router::build(const config::GatewayConfig& config,
                                                                       const RouterSnapshot* previous) const {
  auto snapshot = std::make_shared<RouterSnapshot>();
  snapshot->config = std::make_shared<const config::GatewayConfig>(config);
  INFERGATE_ASSIGN_OR_RETURN(snapshot->table, routing::RouteTable::build(config));
  INFERGATE_ASSIGN_OR_RETURN(
      snapshot->upstreams,
      upstream::UpstreamSet::build(config.upstreams, *pool_, previous ? previous->upstreams.get() : nullptr, hosts_));
  snapshot->config_hash = configHash(config.text);
  snapshot->generation = previous ? previous->generation + 1 : 1;
  snapshot->forward_starts = forwardStartsOf(config.forward);
  return std::shared_ptr<const RouterSnapshot>(std::move(snapshot));
}

shm::RegistryPolicy registryPolicy(const config::GatewayConfig& config) {
  const config::ShmConfig& shm = config.shm;
  shm::RegistryPolicy policy;
  // This process's own pools (`<key_prefix><processTag()>_<n>`, shm/handoff_pool.h): the
  // default prefix always, and every prefix a handoff section names. Another process's
  // pools (an upstream infergate handed this one's pool, say) are its own to protect.
  const std::string own = shm::HandoffPool::processTag() + "_";
  policy.reserved_key_prefixes.push_back(config::HandoffConfig().key_prefix + own);
  for (const config::UpstreamConfig& u : config.upstreams) {
    if (u.handoff.enabled) policy.reserved_key_prefixes.push_back(u.handoff.key_prefix + own);
  }
  policy.enabled = shm.enabled;
  policy.allowed_key_prefixes = shm.allowed_key_prefixes;
  policy.cuda = shm.cuda;
  policy.max_regions = shm.max_regions;
  return policy;
}

codecs::StatusOr<std::unique_ptr<Router>> Router::create(const config::GatewayConfig& config,
                                                         http::WorkerPool& pool,
                                                         std::shared_ptr<upstream::HostAddresses> hosts) {
  std::unique_ptr<Router> router(new Router(&pool));
  router->hosts_ = std::move(hosts);
  INFERGATE_ASSIGN_OR_RETURN(router->snapshot_, router->build(config, nullptr));
  router->regions_->setPolicy(registryPolicy(config));
  return router;
}

codecs::Status Router::reload(const config::GatewayConfig& config,
                              const std::function<void(const RouterSnapshot&)>& prepare) {
  std::lock_guard<std::mutex> lock(reload_mu_);
  std::shared_ptr<const RouterSnapshot> current = snapshot();
  INFERGATE_ASSIGN_OR_RETURN(std::shared_ptr<const RouterSnapshot> next,
                             build(config, current.get()));
  if (prepare) prepare(*next);
  regions_->setPolicy(registryPolicy(config));
  snapshot_.store(std::move(next));
  return absl::OkStatus();
}

std::unique_ptr<Router> Router::builtinOnly(std::shared_ptr<builtin::ModelRepository> repository,
                                            http::WorkerPool& pool) {
  config::GatewayConfig config;
  config::UpstreamConfig u;
  u.name = "builtin";
  config.upstreams.push_back(u);
  config::RouteConfig route;
  route.targets.push_back(config::RouteTarget{"builtin", 100, {}});
  config.routes.push_back(route);
  std::unique_ptr<Router> router(new Router(&pool));
  auto snapshot = std::make_shared<RouterSnapshot>();
  // A route to a defined upstream cannot fail to build.
  snapshot->table = *routing::RouteTable::build(config);
  snapshot->upstreams = upstream::UpstreamSet::builtinOnly("builtin", std::move(repository));
  snapshot->config = std::make_shared<const config::GatewayConfig>(std::move(config));
  snapshot->config_hash = configHash("");
  snapshot->generation = 1;
  snapshot->forward_starts = forwardStartsOf(snapshot->config->forward);
  router->snapshot_ = std::move(snapshot);
  return router;
}

codecs::StatusOr<Decision> Router::decide(std::string_view model, std::string_view version,
                                          const routing::RequestHeaders* headers,
                                          const Caller& caller) const {
  Decision d;
  d.snapshot = snapshot();
  d.route = d.snapshot->table->match(routing::RouteRequest{model, version, headers});
  if (d.route == nullptr) {
    if (version.empty()) return absl::NotFoundError(codecs::strCat("no route for model '", model, "'"));
    return absl::NotFoundError(codecs::strCat("no route for model '", model, "' version ", version));
  }
  if (const std::optional<config::AccessRule>& rule = d.snapshot->config->routes[d.route->index].auth) {
    INFERGATE_RETURN_IF_ERROR(tls::authorizeRule(*rule, codecs::strCat("route '", d.route->name, "'"),
                                                 caller.listener, caller.principal));
  }
  const upstream::UpstreamSet& set = *d.snapshot->upstreams;
  d.upstream = &set.at(d.route->pick(nextDraw()));
  if (d.route->mirror) d.mirror = &set.at(*d.route->mirror);
  d.client_model = model;
  d.client_version = version;
  d.upstream_model = d.route->upstreamModel(model);
  d.upstream_version = d.route->upstreamVersion(version);
  d.timeout = d.route->timeout.count() ? d.route->timeout : d.upstream->timeout();
  d.pick.model = d.upstream_model;
  const std::string& hash_header = d.upstream->config().load_balancing.hash_header;
  if (!hash_header.empty() && headers != nullptr) {
    if (std::optional<std::string_view> v = headers->find(hash_header)) d.pick.hash_value = std::string(*v);
  }
  if (d.timeout.count() > 0) d.pick.deadline = upstream::PickContext::Clock::now() + d.timeout;
  return d;
}

bool Router::forwards(const config::ForwardConfig& forward, std::string_view n) {
  if (isHopByHopHeader(n)) return false;
  for (const std::string& f : forward.headers) {
    if (f.ends_with('*') ? n.starts_with(std::string_view(f).substr(0, f.size() - 1)) : n == f) {
      return true;
    }
  }
  return false;
}

HeaderPairs Router::forwardedHeaders(const RouterSnapshot& held, const http::HeaderList& headers) {
  const config::ForwardConfig& forward = held.config->forward;
  HeaderPairs out;
  out.reserve(headers.size() + 8);  // room for what the caller adds (body headers, trace)
  const RouterSnapshot::ForwardStarts& starts = held.forward_starts;
  std::string n;
  for (const auto& [name, value] : headers) {
    if (name.empty() ||
        (!starts.any && !starts.letters[static_cast<unsigned char>(codecs::asciiLower(name.front()))])) {
      continue;
    }
    lowercaseInto(name, n);
    if (forwards(forward, n)) out.emplace_back(n, value);
  }
  return out;
}

std::string publicMessage(std::string_view message, std::string_view upstream_model,
                          std::string_view client_model) {
  if (upstream_model == client_model) return std::string(message);
  std::string from = codecs::strCat("'", upstream_model, "'");
  std::string to = codecs::strCat("'", client_model, "'");
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = message.find(from, at)) != std::string_view::npos; at = hit + from.size()) {
    out.append(message.substr(at, hit - at)).append(to);
  }
  out.append(message.substr(at));
  return out;
}

codecs::Status publicStatus(const codecs::Status& status, std::string_view upstream_model,
                            std::string_view client_model) {
  if (status.ok() || upstream_model == client_model) return status;
  codecs::Status renamed(status.code(),
                         publicMessage(codecs::messageOf(status), upstream_model, client_model));
  // The marks (origin, Retry-After, not sent) stay.
  status.ForEachPayload([&renamed](absl::string_view url, const absl::Cord& payload) {
    renamed.SetPayload(url, payload);
  });
  return renamed;
}

codecs::Status upstreamGarbage(std::string_view upstream, std::string_view what,
                               const codecs::Status& why) {
  return codecs::withOrigin(
      codecs::invalidArgument("upstream '", upstream, "' answered a malformed ", what, ": ",
                              codecs::messageOf(why)),
      codecs::ErrorOrigin::kUpstream);
}

codecs::Status httpErrorAnswer(int http_status, std::string_view body, std::string_view upstream) {
  auto message = codecs::decodeJsonError(body);
  return codecs::Status(codeForHttpStatus(http_status),
                        message.ok() ? *message
                                     : codecs::strCat("upstream '", upstream, "' answered HTTP ",
                                                      http_status));
}

std::string modelPath(std::string_view model, std::string_view version, std::string_view suffix) {
  std::string path = codecs::strCat("/v2/models/", model);
  if (!version.empty()) path += codecs::strCat("/versions/", version);
  return path.append(suffix);
}

codecs::StatusOr<std::string> httpModelPath(std::string_view model, std::string_view version,
                                            std::string_view suffix) {
  // In Triton's order: the version is read before the model is looked up.
  INFERGATE_ASSIGN_OR_RETURN(int64_t number, codecs::parseModelVersion(version));
  if (!codecs::isVerbatimPathSegment(model)) return unknownModel(model);
  return modelPath(model, number < 0 ? "" : std::to_string(number), suffix);
}

codecs::Status unknownModel(std::string_view model) {
  return absl::NotFoundError(codecs::strCat("Request for unknown model: '", model, "' is not found"));
}

std::string configHash(std::string_view text) {
  // FNV-1a, 64 bits: stable across builds and machines (std::hash is not).
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

HeaderPairs metadataToHttpHeaders(HeaderPairs metadata) {
  for (auto& [key, value] : metadata) {
    if (key.starts_with(kGrpcRestrictedPrefix) && key.size() > kGrpcRestrictedPrefix.size()) {
      key.erase(0, kGrpcRestrictedPrefix.size());
    }
  }
  return metadata;
}

telemetry::SeriesKey seriesKeyOf(telemetry::Protocol protocol, const Decision& d) {
  telemetry::UpstreamProtocol upstream_protocol = telemetry::UpstreamProtocol::kBuiltin;
  switch (d.upstream->protocol()) {
    case upstream::Upstream::Protocol::kBuiltin: break;
    case upstream::Upstream::Protocol::kHttp: upstream_protocol = telemetry::UpstreamProtocol::kHttp; break;
    case upstream::Upstream::Protocol::kGrpc: upstream_protocol = telemetry::UpstreamProtocol::kGrpc; break;
  }
  return telemetry::SeriesKey{protocol, upstream_protocol, d.client_model, d.client_version,
                              d.route->name, d.upstream->name()};
}

void readTraceHeaders(const http::HeaderList& headers, telemetry::RequestInfo& info) {
  if (const std::string_view* id = headers.find("x-request-id")) info.request_id = *id;
  if (const std::string_view* tp = headers.find("traceparent")) {
    const std::string_view* ts = headers.find("tracestate");
    info.trace = telemetry::parseTraceContext(*tp, ts ? std::string_view(*ts) : std::string_view());
  }
}

void stampTraceHeaders(HeaderPairs& headers, telemetry::RequestInfo& info) {
  // traceparent travels only where `forward.headers` lets it (it is in the list then).
  bool forwards_trace = false;
  std::erase_if(headers, [&forwards_trace](const auto& h) {
    forwards_trace = forwards_trace || h.first == "traceparent";
    return h.first == "traceparent" || h.first == "tracestate" || h.first == "x-request-id";
  });
  if (forwards_trace && info.trace.valid()) {
    headers.emplace_back("traceparent", info.trace.traceparent());
    if (!info.trace.tracestate.empty()) headers.emplace_back("tracestate", info.trace.tracestate);
  }
  if (info.request_id.empty()) info.request_id = telemetry::newRequestId();
  headers.emplace_back("x-request-id", info.request_id);
}

}  // namespace infergate::gateway
