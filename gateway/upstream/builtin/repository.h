#pragma once

// ModelRepository: the builtin upstream's model store. It resolves model name + version
// as Triton does, validates and runs requests, post-processes their responses (requested
// outputs, classification, names, stream flags), keeps statistics, toggles models on
// load/unload, and renders metadata, config, statistics and the repository index for
// both frontends.
//
// Ownership and threads: created once (createDemo), shared by every event-loop thread as
// a shared_ptr. Every method is thread-safe: the model set is fixed at construction; a
// mutex guards each model's ready state and statistics; models guard their own state.
// Nothing here blocks or sleeps: infer() returns what to emit and when.
//
// Errors (codes and texts of Triton, PROTOCOL.md section 3):
//   unknown name                NOT_FOUND   "Request for unknown model: 'x' is not found"
//   latest, none ready          NOT_FOUND   "Request for unknown model: 'x' has no available
//                                            versions"
//   unknown numeric version     NOT_FOUND   "Request for unknown model: 'x' version 2 is not
//                                            found"
//   known version, unloaded     UNAVAILABLE "Request for unknown model: 'x' version 1 is not
//                                            at ready state"
//   non-numeric version         INVALID_ARGUMENT "failed to get model version from specified
//                                            version string 'v1' (details: stol), version
//                                            should be an integral value > 0"
//   negative version            INVALID_ARGUMENT "invalid model version specified '-1' ,
//                                            version should be an integral value > 0"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "codecs/infer.h"
#include "codecs/status.h"
#include "gateway/upstream/builtin/demo_models.h"
#include "gateway/upstream/builtin/model.h"
#include "gateway/upstream/builtin/request_validation.h"
#include "gateway/upstream/builtin/statistics.h"
#include "grpc_service.pb.h"
#include "model_config.pb.h"

namespace infergate::gateway::builtin {

// One row of the repository index (PROTOCOL 2.1): `version` and `reason` are empty when
// absent; state is READY or UNAVAILABLE (reason "unloaded").
struct IndexEntry {
  std::string name;
  std::string version;
  std::string state;
  std::string reason;
  bool operator==(const IndexEntry&) const = default;
};

class ModelRepository {
 public:
  // The demo models named in `models` (empty: all of demoModelNames()), all READY.
  // Unknown names are skipped: check them first with checkDemoNames().
  static std::shared_ptr<ModelRepository> createDemo(const std::vector<std::string>& models = {},
                                                     const DemoOptions& options = {});
  // INVALID_ARGUMENT naming the first unknown demo model name.
  static codecs::Status checkDemoNames(const std::vector<std::string>& models);

  // Any models (tests use their own). Names must be unique; all start READY.
  explicit ModelRepository(std::vector<std::shared_ptr<Model>> models);

  // Name + version as Triton resolves them ("" = the latest ready version); errors above.
  codecs::StatusOr<std::shared_ptr<Model>> find(std::string_view name,
                                                std::string_view version) const;
  bool isReady(std::string_view name, std::string_view version) const;

  // Runs one request end to end: resolve, refuse a decoupled model on a unary path
  // (streaming false: the gRPC text of decoupledUnaryError; the HTTP frontend calls
  // decoupledUnaryError(spec, UnaryPath::kHttp) itself first), validateRequest(),
  // execute, then for every response: keep only the requested outputs (all when none
  // were named; model order), classify those that asked for it, set model_name, the
  // resolved model_version and id. Streaming adds triton_final_response (PROTOCOL 9.5)
  // to each response, and for a decoupled request whose end is a bare FINAL flag, an
  // empty final response when the request set triton_enable_empty_final_response=true
  // (id, model_name, model_version copied from the request, due complete_after after the
  // last emission). Errors come back as one final response. Records statistics.
  Execution infer(const codecs::InferRequest& request, bool streaming);

  // Repository API (PROTOCOL 2.1).
  std::vector<IndexEntry> index(bool ready_only) const;
  // READY again (statistics and sequences start afresh after an unload). Unknown name:
  // INTERNAL "failed to load 'x', failed to poll from model repository", as Triton.
  codecs::Status load(std::string_view name);
  // `config_json` (the `config` load parameter) must parse as a ModelConfig (protobuf's
  // JSON parser, unknown fields refused, as Triton's JsonToModelConfig) and is then
  // ignored: a builtin model's shape cannot change. INVALID_ARGUMENT when it does not.
  codecs::Status load(std::string_view name, std::string_view config_json);
  // UNAVAILABLE (reason "unloaded") and its state dropped. Unknown name: OK, as Triton.
  codecs::Status unload(std::string_view name);

  // Renderings used by both frontends. `version` as requested ("" = all versions).
  std::string metadataJson(const ModelSpec& spec, std::string_view version) const;
  inference::ModelMetadataResponse metadataProto(const ModelSpec& spec,
                                                 std::string_view version) const;
  inference::ModelConfig configProto(const ModelSpec& spec) const;
  std::string configJson(const ModelSpec& spec) const;
  // {"model_stats":[...]} of ready versions; empty name = every model (by name).
  // Unknown or unloaded name: INVALID_ARGUMENT "requested model 'x' is not available";
  // version not ready: "requested model version is not available for model 'x'".
  codecs::StatusOr<std::string> statisticsJson(std::string_view name,
                                               std::string_view version) const;
  codecs::StatusOr<inference::ModelStatisticsResponse> statisticsProto(
      std::string_view name, std::string_view version) const;
  // `[{"name":..,"version":..,"state":..,"reason":..}]` as Triton's index endpoint.
  std::string indexJson(bool ready_only) const;
  inference::RepositoryIndexResponse indexProto(bool ready_only) const;

 private:
  struct Slot {
    std::shared_ptr<Model> model;
    mutable std::mutex mu;
    bool ready = true;
    std::shared_ptr<ModelStatistics> stats = std::make_shared<ModelStatistics>();
  };
  struct Resolved {
    std::shared_ptr<Model> model;
    std::shared_ptr<ModelStatistics> stats;
    std::string version;
  };
  struct StatsRow {
    std::string name;
    std::string version;
    StatisticsSnapshot stats;
  };

  const Slot* slotOf(std::string_view name) const;
  codecs::StatusOr<Resolved> resolve(std::string_view name, std::string_view version) const;
  codecs::StatusOr<std::vector<StatsRow>> statisticsRows(std::string_view name,
                                                         std::string_view version) const;

  std::map<std::string, std::unique_ptr<Slot>, std::less<>> slots_;
};

}  // namespace infergate::gateway::builtin
