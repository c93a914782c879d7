#include "gateway/frontends/http_routes.h"

#include <string_view>

namespace infergate::gateway::frontends {
namespace {

bool allDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A path's segments, on the stack. The longest route has 7
// (/v2/models/<m>/versions/<v>/trace/setting): a path with more than 8 routes nowhere.
class Segments {
 public:
  static constexpr size_t kMax = 8;
  bool push(std::string_view segment) {
    if (count_ == kMax) return false;
    at_[count_++] = segment;
    return true;
  }
  size_t size() const { return count_; }
  std::string_view operator[](size_t i) const { return at_[i]; }

 private:
  std::string_view at_[kMax];
  size_t count_ = 0;
};

// Splits "/a/b/c" into {"a","b","c"}; an empty segment (a "//" or a trailing "/")
// makes the path unroutable, as a full-string match would.
bool splitPath(std::string_view path, Segments& out) {
  if (path.empty() || path[0] != '/') return false;
  path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    std::string_view segment = path.substr(0, slash);
    if (segment.empty() || !out.push(segment)) return false;
    if (slash == std::string_view::npos) return true;
    path.remove_prefix(slash + 1);
  }
}

HttpRoute route(HttpEndpoint endpoint, std::string_view method,
                std::initializer_list<std::string_view> allowed) {
  HttpRoute r;
  r.endpoint = endpoint;
  for (std::string_view m : allowed) {
    if (m == method) r.method_allowed = true;
  }
  return r;
}

// /v2/models/<name>[/versions/<digits>][/<action>]
HttpRoute matchModel(std::string_view method, const Segments& s) {
  size_t i = 3;
  std::string version;
  if (s.size() >= 5 && s[3] == "versions") {
    if (!allDigits(s[4])) return {};
    version = std::string(s[4]);
    i = 5;
  }
  HttpRoute r;
  size_t rest = s.size() - i;
  if (rest == 0) {
    r = route(HttpEndpoint::kModelMetadata, method, {"GET"});
  } else if (rest == 1) {
    std::string_view action = s[i];
    if (action == "infer") {
      r = route(HttpEndpoint::kModelInfer, method, {"POST"});
    } else if (action == "generate") {
      r = route(HttpEndpoint::kModelGenerate, method, {"POST"});
    } else if (action == "generate_stream") {
      r = route(HttpEndpoint::kModelGenerateStream, method, {"POST"});
    } else if (action == "ready") {
      r = route(HttpEndpoint::kModelReady, method, {"GET"});
    } else if (action == "config") {
      r = route(HttpEndpoint::kModelConfig, method, {"GET"});
    } else if (action == "stats") {
      r = route(HttpEndpoint::kModelStats, method, {"GET"});
    } else {
      return {};
    }
  } else if (rest == 2 && s[i] == "trace" && s[i + 1] == "setting" && version.empty()) {
    r = route(HttpEndpoint::kModelTraceSetting, method, {"GET", "POST"});
  } else {
    return {};
  }
  r.model = std::string(s[2]);
  r.version = std::move(version);
  return r;
}

// /v2/{systemsharedmemory,cudasharedmemory}[/region/<name>]/(status|register|unregister)
HttpRoute matchShm(std::string_view method, const Segments& s, bool cuda) {
  std::string region;
  size_t i = 2;
  if (s.size() == 5 && s[2] == "region") {
    region = std::string(s[3]);
    i = 4;
  } else if (s.size() != 3) {
    return {};
  }
  HttpRoute r;
  if (s[i] == "status") {
    r = route(cuda ? HttpEndpoint::kCudaShmStatus : HttpEndpoint::kSystemShmStatus, method, {"GET"});
  } else if (s[i] == "register") {
    r = route(cuda ? HttpEndpoint::kCudaShmRegister : HttpEndpoint::kSystemShmRegister, method,
              {"POST"});
  } else if (s[i] == "unregister") {
    r = route(cuda ? HttpEndpoint::kCudaShmUnregister : HttpEndpoint::kSystemShmUnregister,
              method, {"POST"});
  } else {
    return {};
  }
  r.region = std::move(region);
  return r;
}

// /v2/repository[/<repo>]/(index|models/<name>/(load|unload))
HttpRoute matchRepository(std::string_view method, const Segments& s) {
  std::string repository;
  size_t i = 2;
  auto tail = [&](size_t at) -> HttpRoute {
    size_t rest = s.size() - at;
    if (rest == 1 && s[at] == "index") return route(HttpEndpoint::kRepositoryIndex, method, {"POST"});
    if (rest == 3 && s[at] == "models") {
      HttpRoute r;
      if (s[at + 2] == "load") {
        r = route(HttpEndpoint::kRepositoryLoad, method, {"POST"});
      } else if (s[at + 2] == "unload") {
        r = route(HttpEndpoint::kRepositoryUnload, method, {"POST"});
      } else {
        return {};
      }
      r.model = std::string(s[at + 1]);
      return r;
    }
    return {};
  };
  HttpRoute r = tail(i);
  if (r.endpoint == HttpEndpoint::kNotFound && s.size() > 3) {
    repository = std::string(s[2]);
    r = tail(3);
    r.repository = std::move(repository);
  }
  return r;
}

}  // namespace

HttpRoute matchHttpRoute(std::string_view method, std::string_view path) {
  if (path == "/v2/models/stats") return route(HttpEndpoint::kAllModelStats, method, {"GET"});
  if (path == "/v2/logging") return route(HttpEndpoint::kLogging, method, {"GET", "POST"});
  if (path == "/v2") return route(HttpEndpoint::kServerMetadata, method, {"GET"});
  if (path == "/v2/health/live") return route(HttpEndpoint::kHealthLive, method, {"GET"});
  if (path == "/v2/health/ready") return route(HttpEndpoint::kHealthReady, method, {"GET"});
  if (path == "/v2/trace/setting") return route(HttpEndpoint::kTraceSetting, method, {"GET", "POST"});
  Segments s;
  if (!splitPath(path, s) || s.size() < 3 || s[0] != "v2") return {};
  if (s[1] == "models") return matchModel(method, s);
  if (s[1] == "systemsharedmemory") return matchShm(method, s, false);
  if (s[1] == "cudasharedmemory") return matchShm(method, s, true);
  if (s[1] == "repository") return matchRepository(method, s);
  return {};
}

std::string_view endpointCategory(HttpEndpoint endpoint) {
  switch (endpoint) {
    case HttpEndpoint::kHealthLive:
    case HttpEndpoint::kHealthReady:
    case HttpEndpoint::kModelReady:
      return "health";
    case HttpEndpoint::kServerMetadata:
    case HttpEndpoint::kModelMetadata:
      return "metadata";
    case HttpEndpoint::kModelInfer:
    case HttpEndpoint::kModelGenerate:
    case HttpEndpoint::kModelGenerateStream:
      return "inference";
    case HttpEndpoint::kModelConfig:
      return "model-config";
    case HttpEndpoint::kModelStats:
    case HttpEndpoint::kAllModelStats:
      return "statistics";
    case HttpEndpoint::kModelTraceSetting:
    case HttpEndpoint::kTraceSetting:
      return "trace";
    case HttpEndpoint::kLogging:
      return "logging";
    case HttpEndpoint::kRepositoryIndex:
    case HttpEndpoint::kRepositoryLoad:
    case HttpEndpoint::kRepositoryUnload:
      return "model-repository";
    case HttpEndpoint::kSystemShmStatus:
    case HttpEndpoint::kSystemShmRegister:
    case HttpEndpoint::kSystemShmUnregister:
    case HttpEndpoint::kCudaShmStatus:
    case HttpEndpoint::kCudaShmRegister:
    case HttpEndpoint::kCudaShmUnregister:
      return "shared-memory";
    case HttpEndpoint::kNotFound:
      break;
  }
  return {};
}

std::string_view endpointName(HttpEndpoint e) {
  switch (e) {
    case HttpEndpoint::kHealthLive: return "health_live";
    case HttpEndpoint::kHealthReady: return "health_ready";
    case HttpEndpoint::kServerMetadata: return "server_metadata";
    case HttpEndpoint::kModelMetadata: return "model_metadata";
    case HttpEndpoint::kModelReady: return "model_ready";
    case HttpEndpoint::kModelInfer: return "infer";
    case HttpEndpoint::kModelGenerate: return "generate";
    case HttpEndpoint::kModelGenerateStream: return "generate_stream";
    case HttpEndpoint::kModelConfig: return "model_config";
    case HttpEndpoint::kModelStats:
    case HttpEndpoint::kAllModelStats: return "statistics";
    case HttpEndpoint::kModelTraceSetting:
    case HttpEndpoint::kTraceSetting: return "trace";
    case HttpEndpoint::kLogging: return "logging";
    case HttpEndpoint::kRepositoryIndex:
    case HttpEndpoint::kRepositoryLoad:
    case HttpEndpoint::kRepositoryUnload: return "repository";
    case HttpEndpoint::kSystemShmStatus:
    case HttpEndpoint::kSystemShmRegister:
    case HttpEndpoint::kSystemShmUnregister: return "system_shared_memory";
    case HttpEndpoint::kCudaShmStatus:
    case HttpEndpoint::kCudaShmRegister:
    case HttpEndpoint::kCudaShmUnregister: return "cuda_shared_memory";
    case HttpEndpoint::kNotFound: break;
  }
  return "not_found";
}

}  // namespace infergate::gateway::frontends
