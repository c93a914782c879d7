#pragma once

// What `GET /v2` and ServerMetadata answer, and the server-wide health flags, shared by
// both frontends.

#include <atomic>
#include <string>
#include <vector>

namespace infergate::gateway {

struct ServerInfo {
  std::string name = "infergate";
  std::string version = INFERGATE_VERSION_STRING;
  // Triton's extension list (PROTOCOL.md 2.1); perf_analyzer reads it.
  std::vector<std::string> extensions = {
      "classification", "sequence", "model_repository", "model_repository(unload_dependents)",
      "schedule_policy", "model_configuration", "system_shared_memory", "cuda_shared_memory",
      "binary_tensor_data", "parameters", "statistics", "trace", "logging"};
};

// Live from start to exit. Ready while accepting (from the moment every listener
// accepts until drain begins) and while the upstreams are, as the readiness policy
// judges them (gateway/health_checker.h).
struct ServerHealth {
  std::atomic<bool> live{true};
  std::atomic<bool> ready{false};             // accepting
  std::atomic<bool> upstreams_ready{true};    // the probe's verdict
  bool isReady() const { return ready.load() && upstreams_ready.load(); }
};

// {"name":...,"version":...,"extensions":[...]}
std::string serverMetadataJson(const ServerInfo& info);

}  // namespace infergate::gateway
