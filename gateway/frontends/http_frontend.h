#pragma once

// The KServe v2 / Triton HTTP surface (PROTOCOL.md sections 2-6) on the project's HTTP/1.1
// layer: every route of Triton's table, served by the builtin models. The handler runs on
// the connection's event loop and never blocks; timed model responses are played by
// runExecution on that loop.
//
// Errors use Triton's shapes: `{"error": "..."}` with the status of gateway/error_mapping
// (the gateway answers 400 where Triton answers 500 for a malformed body).

#include <memory>

#include "codecs/limits.h"
#include "gateway/frontends/http_routes.h"
#include "gateway/http/http_connection.h"
#include "gateway/server_info.h"
#include "gateway/settings_store.h"
#include "gateway/upstream/builtin/repository.h"

namespace infergate::gateway::frontends {

struct HttpFrontendOptions {
  codecs::DecodeLimits limits;  // max_json_bytes / max_tensor_bytes / max_decompressed_bytes:
                                // Triton's --http-max-input-size; max_binary_body_bytes
};

// The error body and status of `status` (gateway/error_mapping), with Retry-After on a
// rate limit: every HTTP error the frontend sends goes through here.
http::HttpResponse errorResponse(const codecs::Status& status);

class HttpFrontend {
 public:
  HttpFrontend(std::shared_ptr<builtin::ModelRepository> repository,
               std::shared_ptr<SettingsStore> settings, ServerInfo info,
               std::shared_ptr<ServerHealth> health, HttpFrontendOptions options);

  // The http::HttpHandler.
  void handle(const std::shared_ptr<http::HttpExchange>& exchange);

 private:
  struct Route {
    HttpRoute match;
  };
  void dispatch(const std::shared_ptr<http::HttpExchange>& exchange, const Route& route);
  void infer(const std::shared_ptr<http::HttpExchange>& exchange, const Route& route);
  void generate(const std::shared_ptr<http::HttpExchange>& exchange, const Route& route,
                bool stream);
  void repository(const std::shared_ptr<http::HttpExchange>& exchange, const Route& route);
  void sharedMemory(const std::shared_ptr<http::HttpExchange>& exchange, const Route& route);

  std::shared_ptr<builtin::ModelRepository> repository_;
  std::shared_ptr<SettingsStore> settings_;
  ServerInfo info_;
  std::string server_metadata_;  // cached, as Triton does
  std::shared_ptr<ServerHealth> health_;
  HttpFrontendOptions options_;
};

}  // namespace infergate::gateway::frontends
