#include "gateway/router.h"

#include <random>

#include "codecs/json_response_decoder.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"

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

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
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

codecs::StatusOr<std::unique_ptr<Router>> Router::create(const config::GatewayConfig& config,
                                                         http::WorkerPool& pool) {
  std::unique_ptr<Router> router(new Router());
  INFERGATE_ASSIGN_OR_RETURN(router->table_, routing::RouteTable::build(config));
  INFERGATE_ASSIGN_OR_RETURN(router->upstreams_,
                             upstream::UpstreamSet::build(config.upstreams, pool));
  router->forward_ = config.forward;
  return router;
}

std::unique_ptr<Router> Router::builtinOnly(std::shared_ptr<builtin::ModelRepository> repository,
                                            http::WorkerPool&) {
  config::GatewayConfig config;
  config::UpstreamConfig u;
  u.name = "builtin";
  config.upstreams.push_back(u);
  config::RouteConfig route;
  route.targets.push_back(config::RouteTarget{"builtin", 100, {}});
  config.routes.push_back(route);
  std::unique_ptr<Router> router(new Router());
  // A route to a defined upstream cannot fail to build.
  router->table_ = *routing::RouteTable::build(config);
  router->upstreams_ = upstream::UpstreamSet::builtinOnly("builtin", std::move(repository));
  router->forward_ = config.forward;
  return router;
}

codecs::StatusOr<Decision> Router::decide(std::string_view model, std::string_view version,
                                          const routing::RequestHeaders* headers) const {
  Decision d;
  d.table = table();
  d.route = d.table->match(routing::RouteRequest{model, version, headers});
  if (d.route == nullptr) {
    if (version.empty()) return absl::NotFoundError(codecs::strCat("no route for model '", model, "'"));
    return absl::NotFoundError(codecs::strCat("no route for model '", model, "' version ", version));
  }
  d.upstream = &upstreams_->at(d.route->pick(nextDraw()));
  if (d.route->mirror) d.mirror = &upstreams_->at(*d.route->mirror);
  d.client_model = model;
  d.client_version = version;
  d.upstream_model = d.route->upstreamModel(model);
  d.upstream_version = d.route->upstreamVersion(version);
  d.timeout = d.route->timeout.count() ? d.route->timeout : d.upstream->timeout();
  return d;
}

bool Router::forwards(std::string_view n) const {
  if (isHopByHopHeader(n)) return false;
  for (const std::string& f : forward_.headers) {
    if (f.ends_with('*') ? n.starts_with(std::string_view(f).substr(0, f.size() - 1)) : n == f) {
      return true;
    }
  }
  return false;
}

HeaderPairs Router::forwardedHeaders(const http::HeaderList& headers) const {
  HeaderPairs out;
  for (const auto& [name, value] : headers) {
    std::string n = lowercase(name);
    if (forwards(n)) out.emplace_back(std::move(n), value);
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
  return codecs::withOrigin(renamed, codecs::originOf(status));
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

HeaderPairs metadataToHttpHeaders(HeaderPairs metadata) {
  for (auto& [key, value] : metadata) {
    if (key.starts_with(kGrpcRestrictedPrefix) && key.size() > kGrpcRestrictedPrefix.size()) {
      key.erase(0, kGrpcRestrictedPrefix.size());
    }
  }
  return metadata;
}

}  // namespace infergate::gateway
