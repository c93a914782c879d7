#include "gateway/frontends/http_frontend.h"

#include "codecs/json_response_encoder.h"
#include "codecs/json_value.h"
#include "codecs/text.h"
#include "gateway/error_mapping.h"
#include "gateway/frontends/http_routes.h"

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
  if (isRateLimit(status)) r.header("Retry-After", "1");
  return r;
}

HttpFrontend::HttpFrontend(std::shared_ptr<builtin::ModelRepository> repository,
                           std::shared_ptr<SettingsStore> settings, ServerInfo info,
                           std::shared_ptr<ServerHealth> health, HttpFrontendOptions options)
    : repository_(std::move(repository)),
      settings_(std::move(settings)),
      info_(std::move(info)),
      server_metadata_(serverMetadataJson(info_)),
      health_(std::move(health)),
      options_(options) {}

void HttpFrontend::handle(const std::shared_ptr<HttpExchange>& exchange) {
  http::HttpRequest& request = exchange->mutableRequest();
  Route route{matchHttpRoute(request.method, request.path())};
  request.tag = endpointName(route.match.endpoint);
  if (route.match.endpoint == HttpEndpoint::kNotFound) {
    exchange->respond(bareError(404, "Not Found"));
    return;
  }
  if (!route.match.method_allowed) {
    exchange->respond(bareError(405, "Method Not Allowed"));
    return;
  }
  dispatch(exchange, route);
}

void HttpFrontend::dispatch(const std::shared_ptr<HttpExchange>& exchange, const Route& route) {
  const HttpRoute& m = route.match;
  auto respondStatusOr = [&](const codecs::StatusOr<std::string>& body) {
    exchange->respond(body.ok() ? HttpResponse::json(200, *body) : errorResponse(body.status()));
  };
  switch (m.endpoint) {
    case HttpEndpoint::kHealthLive:
      exchange->respond(emptyResponse(health_->live.load() ? 200 : 400));
      return;
    case HttpEndpoint::kHealthReady:
      exchange->respond(emptyResponse(health_->ready.load() ? 200 : 400));
      return;
    case HttpEndpoint::kServerMetadata:
      exchange->respond(HttpResponse::json(200, server_metadata_));
      return;
    case HttpEndpoint::kModelMetadata: {
      auto model = repository_->find(m.model, m.version);
      if (!model.ok()) return exchange->respond(errorResponse(model.status()));
      exchange->respond(HttpResponse::json(200, repository_->metadataJson((*model)->spec(), m.version)));
      return;
    }
    case HttpEndpoint::kModelReady: {
      auto model = repository_->find(m.model, m.version);
      if (!model.ok()) {
        // A model the repository knows but has unloaded is "not ready" (400), as in
        // Triton, not unknown (404).
        bool known = false;
        for (const auto& entry : repository_->index(false)) known |= entry.name == m.model;
        if (model.status().code() == absl::StatusCode::kUnavailable || known) {
          return exchange->respond(HttpResponse::jsonError(400, "Model version not ready"));
        }
        return exchange->respond(errorResponse(model.status()));
      }
      exchange->respond(repository_->isReady(m.model, m.version)
                            ? emptyResponse(200)
                            : HttpResponse::jsonError(400, "Model version not ready"));
      return;
    }
    case HttpEndpoint::kModelConfig: {
      auto model = repository_->find(m.model, m.version);
      if (!model.ok()) return exchange->respond(errorResponse(model.status()));
      exchange->respond(HttpResponse::json(200, repository_->configJson((*model)->spec())));
      return;
    }
    case HttpEndpoint::kModelStats:
    case HttpEndpoint::kAllModelStats:
      respondStatusOr(repository_->statisticsJson(m.model, m.version));
      return;
    case HttpEndpoint::kModelInfer:
      infer(exchange, route);
      return;
    case HttpEndpoint::kModelGenerate:
    case HttpEndpoint::kModelGenerateStream:
      generate(exchange, route, m.endpoint == HttpEndpoint::kModelGenerateStream);
      return;
    case HttpEndpoint::kRepositoryIndex:
    case HttpEndpoint::kRepositoryLoad:
    case HttpEndpoint::kRepositoryUnload:
      repository(exchange, route);
      return;
    case HttpEndpoint::kSystemShmStatus:
    case HttpEndpoint::kSystemShmRegister:
    case HttpEndpoint::kSystemShmUnregister:
    case HttpEndpoint::kCudaShmStatus:
    case HttpEndpoint::kCudaShmRegister:
    case HttpEndpoint::kCudaShmUnregister:
      sharedMemory(exchange, route);
      return;
    case HttpEndpoint::kTraceSetting:
    case HttpEndpoint::kModelTraceSetting: {
      const http::HttpRequest& request = exchange->request();
      if (request.method == "GET") {
        respondStatusOr(settings_->traceJson(m.model));
      } else {
        respondStatusOr(settings_->updateTraceJson(m.model, request.body.view()));
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
    case HttpEndpoint::kNotFound:
      break;
  }
  exchange->respond(bareError(404, "Not Found"));
}

void HttpFrontend::repository(const std::shared_ptr<HttpExchange>& exchange, const Route& route) {
  const HttpRoute& m = route.match;
  const http::HttpRequest& request = exchange->request();
  if (!m.repository.empty() && m.endpoint != HttpEndpoint::kRepositoryIndex) {
    return exchange->respond(
        HttpResponse::jsonError(501, "'repository_name' specification is not supported"));
  }
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
  switch (m.endpoint) {
    case HttpEndpoint::kRepositoryIndex: {
      bool ready_only = false;
      if (const codecs::JsonValue* ready = body.find("ready")) {
        if (!ready->isBool()) {
          return exchange->respond(HttpResponse::jsonError(400, "'ready' must be a boolean"));
        }
        ready_only = ready->asBool();
      }
      exchange->respond(HttpResponse::json(200, repository_->indexJson(ready_only)));
      return;
    }
    case HttpEndpoint::kRepositoryLoad: {
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
      codecs::Status status = has_config ? repository_->load(m.model, config) : repository_->load(m.model);
      exchange->respond(status.ok() ? emptyResponse(200) : errorResponse(status));
      return;
    }
    case HttpEndpoint::kRepositoryUnload: {
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
      codecs::Status status = repository_->unload(m.model);
      exchange->respond(status.ok() ? emptyResponse(200) : errorResponse(status));
      return;
    }
    default:
      break;
  }
}

// Client shared memory is off in this build of the frontend (the shared-memory issue
// turns it on): status lists nothing, register and unregister are refused as Triton
// refuses them with --allow-client-shm=false.
void HttpFrontend::sharedMemory(const std::shared_ptr<HttpExchange>& exchange, const Route& route) {
  const HttpRoute& m = route.match;
  bool cuda = m.endpoint == HttpEndpoint::kCudaShmStatus ||
              m.endpoint == HttpEndpoint::kCudaShmRegister ||
              m.endpoint == HttpEndpoint::kCudaShmUnregister;
  if (m.endpoint == HttpEndpoint::kSystemShmStatus || m.endpoint == HttpEndpoint::kCudaShmStatus) {
    if (!m.region.empty()) {
      return exchange->respond(HttpResponse::jsonError(
          404, codecs::strCat("Unable to find ", cuda ? "cuda" : "system",
                              " shared memory region: '", m.region, "'")));
    }
    return exchange->respond(HttpResponse::json(200, "[]"));
  }
  exchange->respond(HttpResponse::jsonError(
      501, "Client shared memory is disabled. Enable shared memory in the gateway's "
           "configuration to register regions."));
}

}  // namespace infergate::gateway::frontends
