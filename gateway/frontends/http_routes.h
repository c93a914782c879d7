#pragma once

// Triton's HTTP route table (PROTOCOL.md section 2), as a pure function of method and raw
// path: the same dispatch order, full-string matches, no trailing slash, versions all
// digits, model and region names compared verbatim (never percent-decoded), the query
// string ignored.

#include <string>
#include <string_view>

namespace infergate::gateway::frontends {

enum class HttpEndpoint {
  kNotFound,
  kHealthLive,
  kHealthReady,
  kServerMetadata,
  kModelMetadata,
  kModelReady,
  kModelInfer,
  kModelGenerate,
  kModelGenerateStream,
  kModelConfig,
  kModelStats,
  kAllModelStats,
  kModelTraceSetting,
  kTraceSetting,
  kLogging,
  kRepositoryIndex,
  kRepositoryLoad,
  kRepositoryUnload,
  kSystemShmStatus,
  kSystemShmRegister,
  kSystemShmUnregister,
  kCudaShmStatus,
  kCudaShmRegister,
  kCudaShmUnregister,
};

struct HttpRoute {
  HttpEndpoint endpoint = HttpEndpoint::kNotFound;
  bool method_allowed = false;  // false: 405 Method Not Allowed
  std::string model;
  std::string version;     // digits, or empty
  std::string region;      // shm region, or empty
  std::string repository;  // /v2/repository/<repo>/..., or empty
};

HttpRoute matchHttpRoute(std::string_view method, std::string_view path);

// The restricted-API category of an endpoint (PROTOCOL.md section 4): "health",
// "metadata", "inference", "shared-memory", "model-config", "model-repository",
// "statistics", "trace", "logging"; empty for kNotFound.
std::string_view endpointCategory(HttpEndpoint endpoint);

// A short name for metrics and logs ("infer", "model_metadata", ...; "not_found"),
// a string literal.
std::string_view endpointName(HttpEndpoint endpoint);

}  // namespace infergate::gateway::frontends
