#include "gateway/frontends/http_frontend.h"

#include "codecs/json_response_encoder.h"
#include "codecs/json_value.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/frontends/http_frontend_internal.h"
#include "gateway/frontends/http_routes.h"
#include "gateway/handoff_request.h"
#include "gateway/upstream/admin_transcode.h"
#include "gateway/upstream/model_rename.h"
#include "gateway/upstream/upstream_status.h"

namespace infergate::gateway::frontends {

using http::HttpExchange;
using http::HttpResponse;

namespace {

HttpResponse emptyResponse(int status) {
  HttpResponse r;
  r.status = status;
  return r;
}

// Triton's 404 / 405 carry no Content-Type.
HttpResponse bareError(int status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body.append(codecs::Buffer::fromString(codecs::encodeJsonError(message)));
  return r;
}

}  // namespace

HttpResponse errorResponse(const codecs::Status& status) {
  HttpResponse r = HttpResponse::jsonError(httpStatusFor(status), codecs::messageOf(status));
  // One Retry-After: the wait the refusal carries, else a second for a rate limit.
  std::optional<uint32_t> after = upstream::retryAfterOf(status);
  if (!after && isRateLimit(status)) after = 1;
  if (after) r.header("Retry-After", codecs::strCat(*after));
  return r;
}

HttpFrontend::HttpFrontend(std::shared_ptr<Router> router, std::shared_ptr<SettingsStore> settings,
                           ServerInfo info, std::shared_ptr<ServerHealth> health,
                           HttpFrontendOptions options,
                           std::shared_ptr<telemetry::Recorder> recorder)
    : router_(std::move(router)),
      settings_(std::move(settings)),
      info_(std::move(info)),
      server_metadata_(serverMetadataJson(info_)),
      health_(std::move(health)),
      options_(options),
      recorder_(std::move(recorder)) {
  if (!options_.security) options_.security = Security::open();
}

void HttpFrontend::handle(const std::shared_ptr<HttpExchange>& exchange) {
  http::HttpRequest& request = exchange->mutableRequest();
  // What admitHeaders() matched and proved, read where the request keeps it (as long as
  // the exchange lives), when the server's gate ran it; else matched here, and proved by
  // admit().
  std::optional<Route> matched;
  if (request.gate_state == nullptr) matched.emplace(Route{matchHttpRoute(request.method, request.path())});
  const Route& route = matched ? *matched : *static_cast<const Route*>(request.gate_state.get());
  request.tag = endpointName(route.match.endpoint);
  readTraceHeaders(request.headers, exchange->info());
  if (route.match.endpoint == HttpEndpoint::kNotFound) {
    exchange->respond(bareError(404, "Not Found"));
    return;
  }
  if (!route.match.method_allowed) {
    exchange->respond(bareError(405, "Method Not Allowed"));
    return;
  }
  if (!admit(exchange, matched)) return;
  if (route.principal) exchange->info().principal = route.principal->name;
  dispatch(exchange, route);
}

HttpResponse refusalResponse(const codecs::Status& status) {
  HttpResponse refusal = errorResponse(status);
  if (status.code() == absl::StatusCode::kUnauthenticated) {
    refusal.header("WWW-Authenticate", "Bearer realm=\"infergate\"");
  }
  return refusal;
}

std::optional<HttpResponse> HttpFrontend::admitHeaders(http::HttpRequest& request,
                                                       tls::ServerSession* session) {
  HttpRoute match = matchHttpRoute(request.method, request.path());
  // Not found or not allowed: answered by handle(), once the body is read.
  if (match.endpoint == HttpEndpoint::kNotFound || !match.method_allowed) return std::nullopt;
  codecs::StatusOr<std::optional<tls::Principal>> admitted =
      authenticate(request, match.endpoint, session);
  if (!admitted.ok()) return refusalResponse(admitted.status());
  // For handle(): the route, matched once, and who the credentials proved.
  auto route = std::make_shared<const Route>(Route{std::move(match), std::move(*admitted)});
  if (route->match.endpoint == HttpEndpoint::kModelInfer) placeBody(request, *route);
  request.gate_state = std::move(route);
  return std::nullopt;
}

void HttpFrontend::placeBody(http::HttpRequest& request, const Route& route) const {
  // Smaller bodies are never worth a routing decision here: no handoff takes them
  // (handoff.min_bytes is at least this in any useful configuration, and a smaller one
  // only costs those bodies a copy into the pool).
  constexpr uint64_t kMinPlaced = 16 * 1024;
  if (!request.content_length || *request.content_length < kMinPlaced) return;
  if (request.headers.find("Content-Encoding") != nullptr) return;
  // Absent: not a binary-tensor body. Malformed: refused by the decoder, once read.
  codecs::StatusOr<std::optional<uint64_t>> header_bytes = headerLength(request);
  if (!header_bytes.ok() || !*header_bytes) return;
  HttpRequestHeaders headers(request.headers);
  codecs::StatusOr<Decision> decision =
      router_->decide(route.match.model, route.match.version, &headers, route.caller());
  if (!decision.ok() || decision->upstream->protocol() == upstream::Upstream::Protocol::kBuiltin) {
    return;
  }
  if (std::optional<http::BodyPlace> place =
          handoffBodyPlace(*decision->upstream, *request.content_length, **header_bytes)) {
    request.body_place = std::move(*place);
    return;
  }
  // Handed over once the JSON header is in; a body that arrives whole in the first reads
  // is handed over whole, as any other. Whether its tensors really go on as they arrive is
  // decided then, on the header (sendsAsArrives); here only what the head shows.
  if (**header_bytes > 0 && decision->mirror == nullptr && decision->upstream->config().stream_requests) {
    request.early_dispatch_bytes = **header_bytes;
  }
}

bool HttpFrontend::admit(const Exchange& exchange, std::optional<Route>& unproved) {
  if (!unproved) return true;  // admitHeaders() proved the gate's route
  codecs::StatusOr<std::optional<tls::Principal>> admitted =
      authenticate(exchange->request(), unproved->match.endpoint, exchange->tlsSession());
  if (!admitted.ok()) {
    exchange->respond(refusalResponse(admitted.status()));
    return false;
  }
  unproved->principal = std::move(*admitted);
  return true;
}

codecs::StatusOr<std::optional<tls::Principal>> HttpFrontend::authenticate(
    const http::HttpRequest& request, HttpEndpoint e, tls::ServerSession* session) const {
  const bool write =
      e == HttpEndpoint::kRepositoryLoad || e == HttpEndpoint::kRepositoryUnload ||
      e == HttpEndpoint::kSystemShmRegister || e == HttpEndpoint::kSystemShmUnregister ||
      e == HttpEndpoint::kCudaShmRegister || e == HttpEndpoint::kCudaShmUnregister ||
      ((e == HttpEndpoint::kTraceSetting || e == HttpEndpoint::kModelTraceSetting ||
        e == HttpEndpoint::kLogging) && request.method != "GET");
  auto header = headerLookup(request);
  // Every endpoint past the 404 check has a group.
  const std::optional<config::ApiGroup> group = config::apiGroupNamed(endpointCategory(e));
  return options_.security->admit(header, session != nullptr ? session->peer() : nullptr,
                                  group.value_or(config::ApiGroup::kInference), write, tls::Listener::kHttp);
}

// The gateway's own endpoints here; the rest go to an upstream (routed) or to all of them.
void HttpFrontend::dispatch(const Exchange& exchange, const Route& route) {
  const HttpRoute& m = route.match;
  auto respondStatusOr = [&](const codecs::StatusOr<std::string>& body) {
    exchange->respond(body.ok() ? HttpResponse::json(200, *body) : errorResponse(body.status()));
  };
  switch (m.endpoint) {
    case HttpEndpoint::kHealthLive:
      exchange->respond(emptyResponse(health_->live.load() ? 200 : 400));
      return;
    case HttpEndpoint::kHealthReady:
      exchange->respond(emptyResponse(health_->isReady() ? 200 : 400));
      return;
    case HttpEndpoint::kServerMetadata:
      exchange->respond(HttpResponse::json(200, server_metadata_));
      return;
    case HttpEndpoint::kRepositoryIndex:
      if (!m.repository.empty()) {
        return exchange->respond(
            HttpResponse::jsonError(501, "'repository_name' specification is not supported"));
      }
      mergedIndex(exchange);
      return;
    case HttpEndpoint::kAllModelStats:
      mergedStatistics(exchange);
      return;
    case HttpEndpoint::kSystemShmStatus:
    case HttpEndpoint::kSystemShmRegister:
    case HttpEndpoint::kSystemShmUnregister:
    case HttpEndpoint::kCudaShmStatus:
    case HttpEndpoint::kCudaShmRegister:
    case HttpEndpoint::kCudaShmUnregister:
      sharedMemory(exchange, route);
      return;
    case HttpEndpoint::kTraceSetting: {
      const http::HttpRequest& request = exchange->request();
      if (request.method == "GET") {
        respondStatusOr(settings_->traceJson(""));
      } else {
        respondStatusOr(settings_->updateTraceJson("", request.body.view()));
      }
      return;
    }
    case HttpEndpoint::kLogging: {
      const http::HttpRequest& request = exchange->request();
      if (request.method == "GET") {
        exchange->respond(HttpResponse::json(200, settings_->logJson()));
      } else {
        auto updated = settings_->updateLogJson(request.body.view());
        if (!updated.ok() && updated.status().code() == absl::StatusCode::kInvalidArgument &&
            codecs::messageOf(updated.status()).find("log_format") != std::string_view::npos) {
          // Triton answers an unknown log_format with 503 on HTTP.
          return exchange->respond(HttpResponse::jsonError(503, codecs::messageOf(updated.status())));
        }
        respondStatusOr(updated);
      }
      return;
    }
    case HttpEndpoint::kRepositoryLoad:
    case HttpEndpoint::kRepositoryUnload:
      if (!m.repository.empty()) {
        return exchange->respond(
            HttpResponse::jsonError(501, "'repository_name' specification is not supported"));
      }
      routed(exchange, route);
      return;
    case HttpEndpoint::kModelMetadata:
    case HttpEndpoint::kModelReady:
    case HttpEndpoint::kModelConfig:
    case HttpEndpoint::kModelStats:
    case HttpEndpoint::kModelInfer:
    case HttpEndpoint::kModelGenerate:
    case HttpEndpoint::kModelGenerateStream:
    case HttpEndpoint::kModelTraceSetting:
      routed(exchange, route);
      return;
    case HttpEndpoint::kNotFound:
      break;
  }
  exchange->respond(bareError(404, "Not Found"));
}

void HttpFrontend::routed(const Exchange& exchange, const Route& route) {
  const HttpRoute& m = route.match;
  HttpRequestHeaders headers(exchange->request().headers);
  codecs::StatusOr<Decision> decision = router_->decide(m.model, m.version, &headers, route.caller());
  if (!decision.ok()) return exchange->respond(errorResponse(decision.status()));
  if (m.endpoint == HttpEndpoint::kModelInfer || m.endpoint == HttpEndpoint::kModelGenerate ||
      m.endpoint == HttpEndpoint::kModelGenerateStream) {
    codecs::Status limited = options_.security->rateLimit(route.caller(), m.model);
    if (!limited.ok()) return exchange->respond(errorResponse(limited));
  }
  if (recorder_ && recorder_->active() &&
      (m.endpoint == HttpEndpoint::kModelInfer || m.endpoint == HttpEndpoint::kModelGenerate ||
       m.endpoint == HttpEndpoint::kModelGenerateStream)) {
    telemetry::RequestInfo& info = exchange->info();
    recorder_->routed(info, seriesKeyOf(telemetry::Protocol::kHttp, *decision));
    if (decision->upstream->protocol() != upstream::Upstream::Protocol::kBuiltin) {
      decision->pick.stats = info.callStats();
    }
  }
  const http::HttpRequest& request = exchange->request();
  if (!request.bodyWhole() && !sendsAsArrives(request, *decision, exchange->loop())) {
    // This one needs its whole body first; the decision made now stands (a split chose).
    auto decided = std::make_shared<const Decision>(std::move(*decision));
    request.arrival->whenSettled([this, exchange, route, decided](bool whole) {
      if (whole) forward(exchange, route, *decided);  // else the client went away
    });
    return;
  }
  forward(exchange, route, *decision);
}

void HttpFrontend::forward(const Exchange& exchange, const Route& route, const Decision& d) {
  if (d.mirror != nullptr) mirror(exchange, route, d);
  switch (d.upstream->protocol()) {
    case upstream::Upstream::Protocol::kBuiltin:
      return builtinEndpoint(exchange, route, d);
    case upstream::Upstream::Protocol::kHttp:
      return forwardHttp(exchange, route, d);
    case upstream::Upstream::Protocol::kGrpc:
      return forwardGrpc(exchange, route, d);
  }
}

// A model-scoped endpoint served by a builtin upstream. The repository is asked for the
// upstream's names; what comes back is shown under the client's.
void HttpFrontend::builtinEndpoint(const Exchange& exchange, const Route& route, const Decision& d) {
  const HttpRoute& m = route.match;
  builtin::ModelRepository& repo = *d.upstream->repository();
  auto respondJson = [&](std::string json, std::string_view key) {
    if (d.rewrites()) {
      if (auto renamed = upstream::renameInJson(json, key, d.client_model)) json = std::move(*renamed);
    }
    exchange->respond(HttpResponse::json(200, std::move(json)));
  };
  switch (m.endpoint) {
    case HttpEndpoint::kModelMetadata: {
      auto model = repo.find(d.upstream_model, d.upstream_version);
      if (!model.ok()) return exchange->respond(errorResponse(model.status()));
      return respondJson(repo.metadataJson((*model)->spec(), d.upstream_version), "name");
    }
    case HttpEndpoint::kModelReady: {
      auto model = repo.find(d.upstream_model, d.upstream_version);
      if (!model.ok()) {
        // A model the repository knows but has unloaded is "not ready" (400), as in
        // Triton, not unknown (404).
        bool known = false;
        for (const auto& entry : repo.index(false)) known |= entry.name == d.upstream_model;
        if (model.status().code() == absl::StatusCode::kUnavailable || known) {
          return exchange->respond(HttpResponse::jsonError(400, "Model version not ready"));
        }
        return exchange->respond(errorResponse(model.status()));
      }
      exchange->respond(repo.isReady(d.upstream_model, d.upstream_version)
                            ? emptyResponse(200)
                            : HttpResponse::jsonError(400, "Model version not ready"));
      return;
    }
    case HttpEndpoint::kModelConfig: {
      auto model = repo.find(d.upstream_model, d.upstream_version);
      if (!model.ok()) return exchange->respond(errorResponse(model.status()));
      return respondJson(repo.configJson((*model)->spec()), "name");
    }
    case HttpEndpoint::kModelStats: {
      auto stats = repo.statisticsProto(d.upstream_model, d.upstream_version);
      if (!stats.ok()) return exchange->respond(errorResponse(stats.status()));
      for (auto& row : *stats->mutable_model_stats()) row.set_name(d.client_model);
      exchange->respond(HttpResponse::json(200, upstream::modelStatisticsToJson(*stats)));
      return;
    }
    case HttpEndpoint::kModelInfer:
      return infer(exchange, route, d);
    case HttpEndpoint::kModelGenerate:
    case HttpEndpoint::kModelGenerateStream:
      return generate(exchange, route, d, m.endpoint == HttpEndpoint::kModelGenerateStream);
    case HttpEndpoint::kRepositoryLoad:
    case HttpEndpoint::kRepositoryUnload:
      return repository(exchange, route, d);
    case HttpEndpoint::kModelTraceSetting: {
      const http::HttpRequest& request = exchange->request();
      auto known = repo.find(d.upstream_model, "");
      if (!known.ok()) return exchange->respond(errorResponse(known.status()));
      codecs::StatusOr<std::string> body = request.method == "GET"
                                               ? settings_->traceJson(m.model)
                                               : settings_->updateTraceJson(m.model, request.body.view());
      exchange->respond(body.ok() ? HttpResponse::json(200, *body) : errorResponse(body.status()));
      return;
    }
    default:
      exchange->respond(bareError(404, "Not Found"));
  }
}

void HttpFrontend::repository(const Exchange& exchange, const Route& route, const Decision& d) {
  const HttpRoute& m = route.match;
  const http::HttpRequest& request = exchange->request();
  builtin::ModelRepository& repo = *d.upstream->repository();
  codecs::JsonValue body;
  if (!codecs::trimAscii(request.body.view()).empty()) {
    auto parsed = codecs::parseJson(request.body.view());
    if (!parsed.ok()) return exchange->respond(errorResponse(parsed.status()));
    if (!parsed->isObject()) {
      return exchange->respond(HttpResponse::jsonError(400, "the request body must be a JSON object"));
    }
    body = std::move(*parsed);
  }
  const codecs::JsonValue* params = body.find("parameters");
  if (params && !params->isObject()) {
    return exchange->respond(HttpResponse::jsonError(400, "'parameters' must be a JSON object"));
  }
  if (m.endpoint == HttpEndpoint::kRepositoryLoad) {
    std::string config;
    bool has_config = false;
    if (params) {
      for (const auto& [key, value] : params->asObject()) {
        if (!value.isString()) {
          return exchange->respond(HttpResponse::jsonError(
              400, codecs::strCat("load parameter '", key, "' must be a string")));
        }
        if (key == "config") {
          config = value.asString();
          has_config = true;
        } else if (key.rfind("file:", 0) == 0) {
          return exchange->respond(HttpResponse::jsonError(
              400, "builtin models take no model files: 'file:' load parameters are refused"));
        } else {
          return exchange->respond(HttpResponse::jsonError(
              400, codecs::strCat("unrecognized load parameter '", key, "'")));
        }
      }
    }
    codecs::Status status =
        has_config ? repo.load(d.upstream_model, config) : repo.load(d.upstream_model);
    exchange->respond(status.ok() ? emptyResponse(200) : errorResponse(status));
    return;
  }
  if (params) {
    for (const auto& [key, value] : params->asObject()) {
      if (key == "unload_dependents") {
        if (!value.isBool()) {
          return exchange->respond(
              HttpResponse::jsonError(400, "'unload_dependents' must be a boolean"));
        }
      } else {
        return exchange->respond(HttpResponse::jsonError(
            400, codecs::strCat("unrecognized unload parameter '", key, "'")));
      }
    }
  }
  codecs::Status status = repo.unload(d.upstream_model);
  exchange->respond(status.ok() ? emptyResponse(200) : errorResponse(status));
}

}  // namespace infergate::gateway::frontends
