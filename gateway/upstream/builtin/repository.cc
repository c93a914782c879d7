#include "gateway/upstream/builtin/repository.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>

#include "codecs/json_writer.h"
#include "codecs/model_ref.h"
#include "gateway/upstream/builtin/model_config_render.h"

namespace infergate::gateway::builtin {

using codecs::Status;
using codecs::StatusOr;
using codecs::parseModelVersion;

std::shared_ptr<ModelRepository> ModelRepository::createDemo(const std::vector<std::string>& models,
                                                             const DemoOptions& options) {
  const std::vector<std::string> names = models.empty() ? demoModelNames() : models;
  std::vector<std::shared_ptr<Model>> built;
  for (const std::string& name : names) {
    bool duplicate = false;
    for (const auto& m : built) duplicate = duplicate || m->spec().name == name;
    if (duplicate) continue;
    if (std::shared_ptr<Model> model = makeDemoModel(name, options)) built.push_back(model);
  }
  return std::make_shared<ModelRepository>(std::move(built));
}

Status ModelRepository::checkDemoNames(const std::vector<std::string>& models) {
  const std::vector<std::string> known = demoModelNames();
  for (const std::string& name : models) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return codecs::invalidArgument("unknown builtin model '", name, "' (known: ", list, ")");
    }
  }
  return absl::OkStatus();
}

ModelRepository::ModelRepository(std::vector<std::shared_ptr<Model>> models) {
  for (std::shared_ptr<Model>& model : models) {
    auto slot = std::make_unique<Slot>();
    std::string name = model->spec().name;
    slot->model = std::move(model);
    slots_.emplace(std::move(name), std::move(slot));
  }
}

const ModelRepository::Slot* ModelRepository::slotOf(std::string_view name) const {
  auto it = slots_.find(name);
  return it == slots_.end() ? nullptr : it->second.get();
}

StatusOr<ModelRepository::Resolved> ModelRepository::resolve(std::string_view name,
                                                             std::string_view version) const {
  INFERGATE_ASSIGN_OR_RETURN(int64_t wanted, parseModelVersion(version));
  const Slot* slot = slotOf(name);
  if (slot == nullptr) {
    return absl::NotFoundError(
        codecs::strCat("Request for unknown model: '", name, "' is not found"));
  }
  const ModelSpec& spec = slot->model->spec();
  Resolved out;
  out.model = slot->model;
  std::lock_guard<std::mutex> lock(slot->mu);
  out.stats = slot->stats;
  if (wanted == -1) {
    if (!slot->ready || spec.versions.empty()) {
      return absl::NotFoundError(
          codecs::strCat("Request for unknown model: '", name, "' has no available versions"));
    }
    int64_t latest = -1;
    for (const std::string& v : spec.versions) latest = std::max(latest, *parseModelVersion(v));
    out.version = std::to_string(latest);
    return out;
  }
  bool known = false;
  for (const std::string& v : spec.versions) {
    auto parsed = parseModelVersion(v);
    known = known || (parsed.ok() && *parsed == wanted);
  }
  if (!known) {
    return absl::NotFoundError(codecs::strCat("Request for unknown model: '", name, "' version ",
                                              wanted, " is not found"));
  }
  if (!slot->ready) {
    return absl::UnavailableError(codecs::strCat("Request for unknown model: '", name, "' version ",
                                                 wanted, " is not at ready state"));
  }
  out.version = std::to_string(wanted);
  return out;
}

StatusOr<std::shared_ptr<Model>> ModelRepository::find(std::string_view name,
                                                       std::string_view version) const {
  INFERGATE_ASSIGN_OR_RETURN(Resolved resolved, resolve(name, version));
  return resolved.model;
}

bool ModelRepository::isReady(std::string_view name, std::string_view version) const {
  return resolve(name, version).ok();
}

std::vector<IndexEntry> ModelRepository::index(bool ready_only) const {
  std::vector<IndexEntry> out;
  for (const auto& [name, slot] : slots_) {
    bool ready;
    {
      std::lock_guard<std::mutex> lock(slot->mu);
      ready = slot->ready;
    }
    if (ready_only && !ready) continue;
    for (const std::string& version : slot->model->spec().versions) {
      out.push_back({name, version, ready ? "READY" : "UNAVAILABLE", ready ? "" : "unloaded"});
    }
  }
  return out;
}

Status ModelRepository::load(std::string_view name) {
  auto it = slots_.find(name);
  if (it == slots_.end()) {
    return codecs::internalError("failed to load '", name,
                                 "', failed to poll from model repository");
  }
  Slot& slot = *it->second;
  std::lock_guard<std::mutex> lock(slot.mu);
  if (!slot.ready) {
    slot.ready = true;
    slot.stats = std::make_shared<ModelStatistics>();
  }
  return absl::OkStatus();
}

Status ModelRepository::load(std::string_view name, std::string_view config_json) {
  inference::ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(config_json.data(), config_json.size()), &config, options);
  if (!parsed.ok()) {
    return codecs::invalidArgument("failed to load '", name,
                                   "': the 'config' parameter is not a valid model "
                                   "configuration JSON");
  }
  return load(name);
}

Status ModelRepository::unload(std::string_view name) {
  auto it = slots_.find(name);
  if (it == slots_.end()) return absl::OkStatus();
  Slot& slot = *it->second;
  {
    std::lock_guard<std::mutex> lock(slot.mu);
    slot.ready = false;
  }
  slot.model->reset();
  return absl::OkStatus();
}

std::string ModelRepository::metadataJson(const ModelSpec& spec, std::string_view version) const {
  return modelMetadataJson(spec, version);
}

inference::ModelMetadataResponse ModelRepository::metadataProto(const ModelSpec& spec,
                                                                std::string_view version) const {
  return modelMetadataProto(spec, version);
}

inference::ModelConfig ModelRepository::configProto(const ModelSpec& spec) const {
  return modelConfigOf(spec);
}

std::string ModelRepository::configJson(const ModelSpec& spec) const {
  StatusOr<std::string> json = modelConfigJson(modelConfigOf(spec));
  return json.ok() ? *std::move(json) : std::string();
}

StatusOr<std::vector<ModelRepository::StatsRow>> ModelRepository::statisticsRows(
    std::string_view name, std::string_view version) const {
  INFERGATE_ASSIGN_OR_RETURN(int64_t wanted, parseModelVersion(version));
  std::vector<StatsRow> rows;
  for (const auto& [model_name, slot] : slots_) {
    if (!name.empty() && model_name != name) continue;
    std::shared_ptr<ModelStatistics> stats;
    {
      std::lock_guard<std::mutex> lock(slot->mu);
      if (!slot->ready) continue;
      stats = slot->stats;
    }
    for (const std::string& v : slot->model->spec().versions) {
      if (name.empty() || wanted == -1 || *parseModelVersion(v) == wanted) {
        rows.push_back({model_name, v, stats->snapshot()});
      }
    }
  }
  if (!name.empty() && rows.empty()) {
    if (!isReady(name, "")) {
      return codecs::invalidArgument("requested model '", name, "' is not available");
    }
    return codecs::invalidArgument("requested model version is not available for model '", name,
                                   "'");
  }
  return rows;
}

StatusOr<std::string> ModelRepository::statisticsJson(std::string_view name,
                                                      std::string_view version) const {
  INFERGATE_ASSIGN_OR_RETURN(std::vector<StatsRow> rows, statisticsRows(name, version));
  std::string out;
  codecs::JsonWriter w(out);
  w.beginObject().key("model_stats").beginArray();
  for (const StatsRow& row : rows) writeStatisticsJson(w, row.name, row.version, row.stats);
  w.endArray().endObject();
  return out;
}

StatusOr<inference::ModelStatisticsResponse> ModelRepository::statisticsProto(
    std::string_view name, std::string_view version) const {
  INFERGATE_ASSIGN_OR_RETURN(std::vector<StatsRow> rows, statisticsRows(name, version));
  inference::ModelStatisticsResponse out;
  for (const StatsRow& row : rows) {
    fillStatisticsProto(out.add_model_stats(), row.name, row.version, row.stats);
  }
  return out;
}

std::string ModelRepository::indexJson(bool ready_only) const {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginArray();
  for (const IndexEntry& e : index(ready_only)) {
    w.beginObject().key("name").string(e.name);
    if (!e.version.empty()) w.key("version").string(e.version);
    if (!e.state.empty()) w.key("state").string(e.state);
    if (!e.reason.empty()) w.key("reason").string(e.reason);
    w.endObject();
  }
  w.endArray();
  return out;
}

inference::RepositoryIndexResponse ModelRepository::indexProto(bool ready_only) const {
  inference::RepositoryIndexResponse out;
  for (const IndexEntry& e : index(ready_only)) {
    auto* m = out.add_models();
    m->set_name(e.name);
    m->set_version(e.version);
    m->set_state(e.state);
    m->set_reason(e.reason);
  }
  return out;
}

}  // namespace infergate::gateway::builtin
