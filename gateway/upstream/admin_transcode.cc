// The non-infer endpoints between Triton's JSON and the protobuf messages, and the
// model-name rewrite in answers (admin_transcode.h).
//
// Design
//
//   protobuf -> JSON  codecs::JsonWriter, compact, keys in the order of Triton's HTTP
//                     frontend. The builtin upstream renders the same documents from its own
//                     state (builtin/model_config_render, builtin/statistics,
//                     ModelRepository::indexJson, SettingsStore): two writers of one layout,
//                     kept apart on purpose so that admin_transcode_test can compare them byte
//                     for byte over every demo model. The config is the exception: it goes
//                     through builtin::modelConfigJson itself, because its layout is
//                     protobuf's printer plus Triton's int64 fix-up, which must exist once.
//   JSON -> protobuf  Metadata, statistics, index and trace settings are Triton's
//                     hand-written shapes: read member by member from codecs::JsonValue
//                     (exact 64-bit integers; simdjson underneath), unknown members ignored,
//                     64-bit integers as numbers or decimal strings. Errors name the member
//                     by its path ("model metadata: 'inputs[1].shape' must be ..."); the
//                     path is only formatted when something is wrong. The config is
//                     protobuf-shaped (Triton prints it with protobuf's printer), so
//                     protobuf's own JSON parser reads it, numbers and strings alike.
//   requests          The few bodies of index / load / unload / trace, both ways; `file:`
//                     load parameters are bytes in protobuf and base64 in JSON.
//
// Everything here is a pure function of its arguments; nothing is shared between calls.

#include "gateway/upstream/admin_transcode.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <type_traits>
#include <utility>

#include "codecs/base64.h"
#include "codecs/json_value.h"
#include "codecs/json_writer.h"
#include "codecs/protobuf_wire.h"
#include "codecs/text.h"
#include "gateway/upstream/builtin/model_config_render.h"

namespace infergate::gateway::upstream {
namespace {

using codecs::invalidArgument;
using codecs::JsonValue;
using codecs::JsonWriter;
using codecs::Status;
using codecs::StatusOr;
using inference::StatisticDuration;
using RepositoryParameter = inference::ModelRepositoryParameter;
using TensorMetadata = inference::ModelMetadataResponse::TensorMetadata;

// ==== statistics layout, shared by the reader and the writer =============================

// One `{"count": N, "ns": N}` member of a statistics object, in Triton's key order.
template <typename Message>
struct DurationMember {
  std::string_view key;
  const StatisticDuration& (Message::*get)() const;
  StatisticDuration* (Message::*set)();
};

#define INFERGATE_DURATION(Message, name) \
  DurationMember<Message> { #name, &Message::name, &Message::mutable_##name }

constexpr std::array kInferenceDurations = {
    INFERGATE_DURATION(inference::InferStatistics, success),
    INFERGATE_DURATION(inference::InferStatistics, fail),
    INFERGATE_DURATION(inference::InferStatistics, queue),
    INFERGATE_DURATION(inference::InferStatistics, compute_input),
    INFERGATE_DURATION(inference::InferStatistics, compute_infer),
    INFERGATE_DURATION(inference::InferStatistics, compute_output),
    INFERGATE_DURATION(inference::InferStatistics, cache_hit),
    INFERGATE_DURATION(inference::InferStatistics, cache_miss),
};
constexpr std::array kResponseDurations = {
    INFERGATE_DURATION(inference::InferResponseStatistics, compute_infer),
    INFERGATE_DURATION(inference::InferResponseStatistics, compute_output),
    INFERGATE_DURATION(inference::InferResponseStatistics, success),
    INFERGATE_DURATION(inference::InferResponseStatistics, fail),
    INFERGATE_DURATION(inference::InferResponseStatistics, empty_response),
    INFERGATE_DURATION(inference::InferResponseStatistics, cancel),
};
constexpr std::array kBatchDurations = {
    INFERGATE_DURATION(inference::InferBatchStatistics, compute_input),
    INFERGATE_DURATION(inference::InferBatchStatistics, compute_infer),
    INFERGATE_DURATION(inference::InferBatchStatistics, compute_output),
};

#undef INFERGATE_DURATION

// The order Triton's HTTP frontend writes the trace settings in; any other key (the
// OpenTelemetry options) follows, sorted.
constexpr std::array<std::string_view, 6> kTraceKeys = {
    "trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file", "trace_mode"};

// ==== JSON writing =========================================================================

template <typename Message, size_t N>
void writeDurations(JsonWriter& w, const Message& m,
                    const std::array<DurationMember<Message>, N>& members) {
  for (const DurationMember<Message>& d : members) {
    const StatisticDuration& value = (m.*d.get)();
    w.key(d.key).beginObject();
    w.key("count").uint64(value.count()).key("ns").uint64(value.ns());
    w.endObject();
  }
}

void writeStatistics(JsonWriter& w, const inference::ModelStatistics& s) {
  w.beginObject();
  w.key("name").string(s.name());
  w.key("version").string(s.version());
  w.key("last_inference").uint64(s.last_inference());
  w.key("inference_count").uint64(s.inference_count());
  w.key("execution_count").uint64(s.execution_count());
  w.key("inference_stats").beginObject();
  writeDurations(w, s.inference_stats(), kInferenceDurations);
  w.endObject();
  // A protobuf map iterates in no particular order; Triton's (a std::map keyed by the
  // response index as a string) iterates sorted by that string.
  std::map<std::string_view, const inference::InferResponseStatistics*> responses;
  for (const auto& [index, r] : s.response_stats()) responses.emplace(index, &r);
  w.key("response_stats").beginObject();
  for (const auto& [index, r] : responses) {
    w.key(index).beginObject();
    writeDurations(w, *r, kResponseDurations);
    w.endObject();
  }
  w.endObject();
  w.key("batch_stats").beginArray();
  for (const inference::InferBatchStatistics& b : s.batch_stats()) {
    w.beginObject().key("batch_size").uint64(b.batch_size());
    writeDurations(w, b, kBatchDurations);
    w.endObject();
  }
  w.endArray();
  w.key("memory_usage").beginArray();
  for (const inference::MemoryUsage& m : s.memory_usage()) {
    w.beginObject();
    w.key("type").string(m.type()).key("id").int64(m.id()).key("byte_size").uint64(m.byte_size());
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

void writeTensors(JsonWriter& w,
                  const google::protobuf::RepeatedPtrField<TensorMetadata>& tensors) {
  w.beginArray();
  for (const TensorMetadata& t : tensors) {
    w.beginObject().key("name").string(t.name()).key("datatype").string(t.datatype());
    w.key("shape").beginArray();
    for (int64_t d : t.shape()) w.int64(d);
    w.endArray().endObject();
  }
  w.endArray();
}

// A trace setting as Triton writes it: trace_level always an array, any other key a
// plain string when it has exactly one value.
template <typename SettingValue>
void writeTraceValue(JsonWriter& w, std::string_view key, const SettingValue& v) {
  w.key(key);
  if (key == "trace_level" || v.value_size() != 1) {
    w.beginArray();
    for (const std::string& s : v.value()) w.string(s);
    w.endArray();
  } else {
    w.string(v.value(0));
  }
}

// ==== JSON reading =========================================================================

// Where a value sits in the document being read: "model metadata: 'inputs[1].shape'".
// A chain of stack frames, formatted only when an error is reported. A Path points to its
// parent: give every level its own variable (`a.member(x).element(i)` held in a variable
// would outlive the temporary `a.member(x)`).
class Path {
 public:
  explicit Path(std::string_view document) : document_(document) {}

  Path member(std::string_view key) const { return Path(this, key, 0, false); }
  Path element(size_t index) const { return Path(this, {}, index, true); }

  // "<document>: '<path>' <expected>", or "<document>: <expected>" for the document.
  Status error(std::string_view expected) const {
    if (parent_ == nullptr) return invalidArgument(document_, ": ", expected);
    std::string path;
    append(path);
    return invalidArgument(document_, ": '", path, "' ", expected);
  }

 private:
  Path(const Path* parent, std::string_view key, size_t index, bool is_index)
      : document_(parent->document_),
        parent_(parent),
        key_(key),
        index_(index),
        is_index_(is_index) {}

  void append(std::string& out) const {
    if (parent_ == nullptr) return;
    parent_->append(out);
    if (is_index_) {
      out.append(codecs::strCat("[", index_, "]"));
      return;
    }
    if (parent_->parent_ != nullptr) out.push_back('.');
    out.append(key_);
  }

  std::string_view document_;
  const Path* parent_ = nullptr;
  std::string_view key_;
  size_t index_ = 0;
  bool is_index_ = false;
};

// What a document or member must be.
enum class Container { kObject, kArray };

StatusOr<JsonValue> parseDocument(std::string_view json, const Path& root, Container kind) {
  StatusOr<JsonValue> v = codecs::parseJson(json);
  if (!v.ok()) return root.error(codecs::messageOf(v.status()));
  if (kind == Container::kObject && !v->isObject()) return root.error("expected a JSON object");
  if (kind == Container::kArray && !v->isArray()) return root.error("expected a JSON array");
  return v;
}

// An HTTP request body as an object; an empty body reads as {} (Triton's index, load and
// unload endpoints take an empty body, and a GET of the trace settings has none).
StatusOr<JsonValue> requestObject(std::string_view body, const Path& root) {
  if (codecs::trimAscii(body).empty()) return JsonValue(JsonValue::Object{});
  return parseDocument(body, root, Container::kObject);
}

// A member that is present and not null: Triton omits optional members and KServe servers
// may write them as null; both read as absent.
const JsonValue* memberOf(const JsonValue& object, std::string_view key) {
  const JsonValue* v = object.find(key);
  return v == nullptr || v->isNull() ? nullptr : v;
}

enum class Presence { kOptional, kRequired };

// A string member; "" when it is optional and absent.
StatusOr<std::string> stringMember(const JsonValue& object, std::string_view key, const Path& at,
                                   Presence presence) {
  const JsonValue* v = memberOf(object, key);
  if (v == nullptr) {
    if (presence == Presence::kRequired) return at.member(key).error("is missing");
    return std::string();
  }
  if (!v->isString()) return at.member(key).error("must be a string");
  return v->asString();
}

// An object or array member, nullptr when absent.
StatusOr<const JsonValue*> containerMember(const JsonValue& object, std::string_view key,
                                           const Path& at, Container kind) {
  const JsonValue* v = memberOf(object, key);
  if (v == nullptr) return v;
  if (kind == Container::kObject && !v->isObject()) {
    return at.member(key).error("must be an object");
  }
  if (kind == Container::kArray && !v->isArray()) return at.member(key).error("must be an array");
  return v;
}

// An integer written as a JSON number (Triton) or as a decimal string (protobuf's JSON
// form of a 64-bit field); nullopt for anything else or out of T's range.
template <typename T>
std::optional<T> integerOf(const JsonValue& v) {
  if (v.isInteger()) {
    if constexpr (std::is_signed_v<T>) {
      return v.asInt();
    } else {
      return v.asUint();
    }
  }
  if (v.isString()) {
    const std::string& s = v.asString();
    T out = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return out;
  }
  return std::nullopt;
}

// A uint64 member; 0 when absent.
StatusOr<uint64_t> uint64Member(const JsonValue& object, std::string_view key, const Path& at) {
  const JsonValue* v = memberOf(object, key);
  if (v == nullptr) return uint64_t{0};
  std::optional<uint64_t> n = integerOf<uint64_t>(*v);
  if (!n) return at.member(key).error("must be a non-negative integer");
  return *n;
}

StatusOr<int64_t> int64Member(const JsonValue& object, std::string_view key, const Path& at) {
  const JsonValue* v = memberOf(object, key);
  if (v == nullptr) return int64_t{0};
  std::optional<int64_t> n = integerOf<int64_t>(*v);
  if (!n) return at.member(key).error("must be an integer");
  return *n;
}

Status readStrings(const JsonValue& object, std::string_view key, const Path& at,
                   google::protobuf::RepeatedPtrField<std::string>* out) {
  const JsonValue* list = memberOf(object, key);
  if (list == nullptr) return absl::OkStatus();
  if (!list->isArray()) return at.member(key).error("must be an array of strings");
  for (const JsonValue& v : list->asArray()) {
    if (!v.isString()) return at.member(key).error("must be an array of strings");
    out->Add(std::string(v.asString()));
  }
  return absl::OkStatus();
}

Status readTensors(const JsonValue& doc, std::string_view key, const Path& root,
                   google::protobuf::RepeatedPtrField<TensorMetadata>* out) {
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* list,
                             containerMember(doc, key, root, Container::kArray));
  if (list == nullptr) return absl::OkStatus();
  const Path tensors = root.member(key);
  for (size_t i = 0; i < list->asArray().size(); ++i) {
    const JsonValue& t = list->asArray()[i];
    const Path at = tensors.element(i);
    if (!t.isObject()) return at.error("must be an object");
    TensorMetadata* tensor = out->Add();
    INFERGATE_ASSIGN_OR_RETURN(*tensor->mutable_name(),
                               stringMember(t, "name", at, Presence::kRequired));
    INFERGATE_ASSIGN_OR_RETURN(*tensor->mutable_datatype(),
                               stringMember(t, "datatype", at, Presence::kRequired));
    const JsonValue* shape = memberOf(t, "shape");
    if (shape == nullptr || !shape->isArray()) {
      return at.member("shape").error("must be an array of integers");
    }
    for (const JsonValue& d : shape->asArray()) {
      std::optional<int64_t> dim = integerOf<int64_t>(d);
      if (!dim) return at.member("shape").error("must be an array of integers");
      tensor->add_shape(*dim);
    }
  }
  return absl::OkStatus();
}

// Reads the duration members present in `object` (an absent one stays unset, as the
// sub-message of a protobuf answer that did not carry it).
template <typename Message, size_t N>
Status readDurations(const JsonValue& object, const Path& at, Message* out,
                     const std::array<DurationMember<Message>, N>& members) {
  for (const DurationMember<Message>& d : members) {
    INFERGATE_ASSIGN_OR_RETURN(const JsonValue* v,
                               containerMember(object, d.key, at, Container::kObject));
    if (v == nullptr) continue;
    const Path member = at.member(d.key);
    INFERGATE_ASSIGN_OR_RETURN(uint64_t count, uint64Member(*v, "count", member));
    INFERGATE_ASSIGN_OR_RETURN(uint64_t ns, uint64Member(*v, "ns", member));
    StatisticDuration* duration = (out->*d.set)();
    duration->set_count(count);
    duration->set_ns(ns);
  }
  return absl::OkStatus();
}

Status readStatisticsEntry(const JsonValue& e, const Path& at, inference::ModelStatistics* s) {
  if (!e.isObject()) return at.error("must be an object");
  INFERGATE_ASSIGN_OR_RETURN(*s->mutable_name(), stringMember(e, "name", at, Presence::kRequired));
  INFERGATE_ASSIGN_OR_RETURN(*s->mutable_version(),
                             stringMember(e, "version", at, Presence::kOptional));
  INFERGATE_ASSIGN_OR_RETURN(uint64_t last, uint64Member(e, "last_inference", at));
  INFERGATE_ASSIGN_OR_RETURN(uint64_t inferences, uint64Member(e, "inference_count", at));
  INFERGATE_ASSIGN_OR_RETURN(uint64_t executions, uint64Member(e, "execution_count", at));
  s->set_last_inference(last);
  s->set_inference_count(inferences);
  s->set_execution_count(executions);

  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* inference,
                             containerMember(e, "inference_stats", at, Container::kObject));
  if (inference != nullptr) {
    INFERGATE_RETURN_IF_ERROR(readDurations(*inference, at.member("inference_stats"),
                                            s->mutable_inference_stats(), kInferenceDurations));
  }
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* responses,
                             containerMember(e, "response_stats", at, Container::kObject));
  if (responses != nullptr) {
    const Path responses_at = at.member("response_stats");
    for (const auto& [index, r] : responses->asObject()) {
      if (s->response_stats().count(index) != 0) continue;  // a repeated key: the first wins
      const Path r_at = responses_at.member(index);
      if (!r.isObject()) return r_at.error("must be an object");
      INFERGATE_RETURN_IF_ERROR(
          readDurations(r, r_at, &(*s->mutable_response_stats())[index], kResponseDurations));
    }
  }
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* batches,
                             containerMember(e, "batch_stats", at, Container::kArray));
  const Path batches_at = at.member("batch_stats");
  for (size_t i = 0; batches != nullptr && i < batches->asArray().size(); ++i) {
    const JsonValue& b = batches->asArray()[i];
    const Path b_at = batches_at.element(i);
    if (!b.isObject()) return b_at.error("must be an object");
    inference::InferBatchStatistics* out = s->add_batch_stats();
    INFERGATE_ASSIGN_OR_RETURN(uint64_t size, uint64Member(b, "batch_size", b_at));
    out->set_batch_size(size);
    INFERGATE_RETURN_IF_ERROR(readDurations(b, b_at, out, kBatchDurations));
  }
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* memory,
                             containerMember(e, "memory_usage", at, Container::kArray));
  const Path memory_at = at.member("memory_usage");
  for (size_t i = 0; memory != nullptr && i < memory->asArray().size(); ++i) {
    const JsonValue& m = memory->asArray()[i];
    const Path m_at = memory_at.element(i);
    if (!m.isObject()) return m_at.error("must be an object");
    inference::MemoryUsage* out = s->add_memory_usage();
    INFERGATE_ASSIGN_OR_RETURN(*out->mutable_type(),
                               stringMember(m, "type", m_at, Presence::kOptional));
    INFERGATE_ASSIGN_OR_RETURN(int64_t id, int64Member(m, "id", m_at));
    INFERGATE_ASSIGN_OR_RETURN(uint64_t bytes, uint64Member(m, "byte_size", m_at));
    out->set_id(id);
    out->set_byte_size(bytes);
  }
  return absl::OkStatus();
}

// {"key": "v" | ["v", ...] | null, ...} into a map<string, SettingValue{repeated value}>;
// null is an entry without values (the protobuf form of "clear this key").
template <typename SettingsMap>
Status readTraceSettings(const JsonValue& doc, const Path& root, SettingsMap* out) {
  for (const auto& [key, value] : doc.asObject()) {
    if (out->count(key) != 0) continue;  // a repeated key: the first wins, as JsonValue::find
    const Path at = root.member(key);
    auto& entry = (*out)[key];
    if (value.isString()) {
      entry.add_value(value.asString());
    } else if (value.isArray()) {
      for (const JsonValue& s : value.asArray()) {
        if (!s.isString()) return at.error("must be a string or an array of strings");
        entry.add_value(s.asString());
      }
    } else if (!value.isNull()) {
      return at.error("must be a string, an array of strings or null");
    }
  }
  return absl::OkStatus();
}

StatusOr<std::string> base64Decode(std::string_view text, const Path& at) {
  std::optional<std::string> bytes = codecs::base64Decode(text);
  if (!bytes) return at.error("is not valid base64");
  return std::move(*bytes);
}

// A JSON value of a repository request parameter as its protobuf kind.
Status readRepositoryParameter(const JsonValue& value, const Path& at, RepositoryParameter* out) {
  if (value.isBool()) {
    out->set_bool_param(value.asBool());
  } else if (value.isString()) {
    out->set_string_param(value.asString());
  } else if (std::optional<int64_t> n = value.isInteger() ? value.asInt() : std::nullopt) {
    out->set_int64_param(*n);
  } else {
    return at.error("must be a boolean, an integer or a string");
  }
  return absl::OkStatus();
}

template <typename Map>
void writeRepositoryParameters(JsonWriter& w, const Map& parameters) {
  if (parameters.empty()) return;
  // Sorted: a protobuf map's order is unspecified, and a body should not depend on it.
  std::map<std::string_view, const RepositoryParameter*> sorted;
  for (const auto& [key, value] : parameters) sorted.emplace(key, &value);
  w.key("parameters").beginObject();
  for (const auto& [key, p] : sorted) {
    w.key(key);
    switch (p->parameter_choice_case()) {
      case RepositoryParameter::kBoolParam:
        w.boolean(p->bool_param());
        break;
      case RepositoryParameter::kInt64Param:
        w.int64(p->int64_param());
        break;
      case RepositoryParameter::kStringParam:
        w.string(p->string_param());
        break;
      case RepositoryParameter::kBytesParam:
        w.string(codecs::base64Encode(p->bytes_param()));
        break;
      case RepositoryParameter::PARAMETER_CHOICE_NOT_SET:
        w.null();  // the upstream refuses it, as Triton's gRPC handler would
        break;
    }
  }
  w.endObject();
}

}  // namespace

// ==== answers: protobuf -> JSON ===========================================================

std::string modelMetadataToJson(const inference::ModelMetadataResponse& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject().key("name").string(r.name()).key("versions").beginArray();
  for (const std::string& v : r.versions()) w.string(v);
  w.endArray().key("platform").string(r.platform());
  w.key("inputs");
  writeTensors(w, r.inputs());
  w.key("outputs");
  writeTensors(w, r.outputs());
  w.endObject();
  return out;
}

StatusOr<std::string> modelConfigToJson(const inference::ModelConfigResponse& r) {
  return builtin::modelConfigJson(r.config());
}

std::string modelStatisticsToJson(const inference::ModelStatisticsResponse& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject().key("model_stats").beginArray();
  for (const inference::ModelStatistics& s : r.model_stats()) writeStatistics(w, s);
  w.endArray().endObject();
  return out;
}

std::string repositoryIndexToJson(const inference::RepositoryIndexResponse& r) {
  std::string out;
  JsonWriter w(out);
  w.beginArray();
  for (const auto& m : r.models()) {
    // Triton writes version, state and reason only when it has them.
    w.beginObject().key("name").string(m.name());
    if (!m.version().empty()) w.key("version").string(m.version());
    if (!m.state().empty()) w.key("state").string(m.state());
    if (!m.reason().empty()) w.key("reason").string(m.reason());
    w.endObject();
  }
  w.endArray();
  return out;
}

std::string traceSettingToJson(const inference::TraceSettingResponse& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  for (std::string_view key : kTraceKeys) {
    auto it = r.settings().find(std::string(key));
    if (it != r.settings().end()) writeTraceValue(w, key, it->second);
  }
  std::map<std::string_view, const inference::TraceSettingResponse::SettingValue*> others;
  for (const auto& [key, value] : r.settings()) {
    if (std::find(kTraceKeys.begin(), kTraceKeys.end(), key) == kTraceKeys.end()) {
      others.emplace(key, &value);
    }
  }
  for (const auto& [key, value] : others) writeTraceValue(w, key, *value);
  w.endObject();
  return out;
}

// ==== answers: JSON -> protobuf ===========================================================

StatusOr<inference::ModelMetadataResponse> modelMetadataFromJson(std::string_view json) {
  const Path root("model metadata");
  INFERGATE_ASSIGN_OR_RETURN(JsonValue doc, parseDocument(json, root, Container::kObject));
  inference::ModelMetadataResponse r;
  INFERGATE_ASSIGN_OR_RETURN(*r.mutable_name(),
                             stringMember(doc, "name", root, Presence::kRequired));
  INFERGATE_RETURN_IF_ERROR(readStrings(doc, "versions", root, r.mutable_versions()));
  INFERGATE_ASSIGN_OR_RETURN(*r.mutable_platform(),
                             stringMember(doc, "platform", root, Presence::kOptional));
  INFERGATE_RETURN_IF_ERROR(readTensors(doc, "inputs", root, r.mutable_inputs()));
  INFERGATE_RETURN_IF_ERROR(readTensors(doc, "outputs", root, r.mutable_outputs()));
  return r;
}

StatusOr<inference::ModelConfigResponse> modelConfigFromJson(std::string_view json) {
  inference::ModelConfigResponse r;
  // Triton answers an all-default config with an empty body (PROTOCOL 2.1).
  if (codecs::trimAscii(json).empty()) {
    r.mutable_config();
    return r;
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer Triton's fields
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), r.mutable_config(), options);
  if (!status.ok()) {
    return invalidArgument("model config: ",
                           std::string_view(status.message().data(), status.message().size()));
  }
  return r;
}

StatusOr<inference::ModelStatisticsResponse> modelStatisticsFromJson(std::string_view json) {
  const Path root("model statistics");
  INFERGATE_ASSIGN_OR_RETURN(JsonValue doc, parseDocument(json, root, Container::kObject));
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* list,
                             containerMember(doc, "model_stats", root, Container::kArray));
  if (list == nullptr) return root.member("model_stats").error("is missing");
  inference::ModelStatisticsResponse r;
  const Path entries = root.member("model_stats");
  for (size_t i = 0; i < list->asArray().size(); ++i) {
    INFERGATE_RETURN_IF_ERROR(
        readStatisticsEntry(list->asArray()[i], entries.element(i), r.add_model_stats()));
  }
  return r;
}

StatusOr<inference::RepositoryIndexResponse> repositoryIndexFromJson(std::string_view json) {
  const Path root("repository index");
  INFERGATE_ASSIGN_OR_RETURN(JsonValue doc, parseDocument(json, root, Container::kArray));
  inference::RepositoryIndexResponse r;
  for (size_t i = 0; i < doc.asArray().size(); ++i) {
    const JsonValue& e = doc.asArray()[i];
    const Path at = root.element(i);
    if (!e.isObject()) return at.error("must be an object");
    auto* m = r.add_models();
    INFERGATE_ASSIGN_OR_RETURN(*m->mutable_name(),
                               stringMember(e, "name", at, Presence::kRequired));
    INFERGATE_ASSIGN_OR_RETURN(*m->mutable_version(),
                               stringMember(e, "version", at, Presence::kOptional));
    INFERGATE_ASSIGN_OR_RETURN(*m->mutable_state(),
                               stringMember(e, "state", at, Presence::kOptional));
    INFERGATE_ASSIGN_OR_RETURN(*m->mutable_reason(),
                               stringMember(e, "reason", at, Presence::kOptional));
  }
  return r;
}

StatusOr<inference::TraceSettingResponse> traceSettingFromJson(std::string_view json) {
  const Path root("trace settings");
  INFERGATE_ASSIGN_OR_RETURN(JsonValue doc, parseDocument(json, root, Container::kObject));
  inference::TraceSettingResponse r;
  INFERGATE_RETURN_IF_ERROR(readTraceSettings(doc, root, r.mutable_settings()));
  return r;
}

// ==== requests: HTTP body -> protobuf =====================================================

StatusOr<inference::RepositoryIndexRequest> indexRequestFromJson(std::string_view body) {
  const Path root("repository index request");
  INFERGATE_ASSIGN_OR_RETURN(JsonValue doc, requestObject(body, root));
  inference::RepositoryIndexRequest r;
  if (const JsonValue* ready = memberOf(doc, "ready")) {
    if (!ready->isBool()) return root.member("ready").error("must be a boolean");
    r.set_ready(ready->asBool());
  }
  return r;
}

// `config` and any other key as string_param, `file:<version>/<path>` as bytes_param
// (base64-decoded), as Triton's HTTP frontend builds them; which keys are allowed is the
// upstream's call (Triton's gRPC handler names an unknown one).
StatusOr<inference::RepositoryModelLoadRequest> loadRequestFromJson(std::string_view model,
                                                                    std::string_view body) {
  const Path root("load request");
  INFERGATE_ASSIGN_OR_RETURN(JsonValue doc, requestObject(body, root));
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* params,
                             containerMember(doc, "parameters", root, Container::kObject));
  inference::RepositoryModelLoadRequest r;
  r.set_model_name(std::string(model));
  if (params == nullptr) return r;
  const Path params_at = root.member("parameters");
  for (const auto& [key, value] : params->asObject()) {
    if (r.parameters().count(key) != 0) continue;  // a repeated key: the first wins
    const Path at = params_at.member(key);
    if (!value.isString()) return at.error("must be a string");
    RepositoryParameter& p = (*r.mutable_parameters())[key];
    if (key.starts_with("file:")) {
      INFERGATE_ASSIGN_OR_RETURN(*p.mutable_bytes_param(), base64Decode(value.asString(), at));
    } else {
      p.set_string_param(value.asString());
    }
  }
  return r;
}

StatusOr<inference::RepositoryModelUnloadRequest> unloadRequestFromJson(std::string_view model,
                                                                        std::string_view body) {
  const Path root("unload request");
  INFERGATE_ASSIGN_OR_RETURN(JsonValue doc, requestObject(body, root));
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* params,
                             containerMember(doc, "parameters", root, Container::kObject));
  inference::RepositoryModelUnloadRequest r;
  r.set_model_name(std::string(model));
  if (params == nullptr) return r;
  const Path params_at = root.member("parameters");
  for (const auto& [key, value] : params->asObject()) {
    if (r.parameters().count(key) != 0) continue;
    const Path at = params_at.member(key);
    // The one key Triton reads; it refuses a non-boolean (PROTOCOL 2.1).
    if (key == "unload_dependents" && !value.isBool()) return at.error("must be a boolean");
    INFERGATE_RETURN_IF_ERROR(readRepositoryParameter(value, at, &(*r.mutable_parameters())[key]));
  }
  return r;
}

StatusOr<inference::TraceSettingRequest> traceSettingRequestFromJson(std::string_view model,
                                                                     std::string_view body) {
  const Path root("trace setting request");
  INFERGATE_ASSIGN_OR_RETURN(JsonValue doc, requestObject(body, root));
  inference::TraceSettingRequest r;
  r.set_model_name(std::string(model));
  INFERGATE_RETURN_IF_ERROR(readTraceSettings(doc, root, r.mutable_settings()));
  return r;
}

// ==== requests: protobuf -> HTTP body =====================================================

std::string indexRequestToJson(const inference::RepositoryIndexRequest& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject().key("ready").boolean(r.ready()).endObject();
  return out;
}

std::string loadRequestToJson(const inference::RepositoryModelLoadRequest& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  writeRepositoryParameters(w, r.parameters());
  w.endObject();
  return out;
}

std::string unloadRequestToJson(const inference::RepositoryModelUnloadRequest& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  writeRepositoryParameters(w, r.parameters());
  w.endObject();
  return out;
}

std::string traceSettingRequestToJson(const inference::TraceSettingRequest& r) {
  std::map<std::string_view, const inference::TraceSettingRequest::SettingValue*> sorted;
  for (const auto& [key, value] : r.settings()) sorted.emplace(key, &value);
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  for (const auto& [key, v] : sorted) {
    if (v->value_size() == 0) {
      w.key(key).null();  // no values: clear the key (JSON null in Triton's HTTP API)
    } else {
      writeTraceValue(w, key, *v);
    }
  }
  w.endObject();
  return out;
}

// ==== merging =============================================================================

std::string mergeRepositoryIndexJson(const std::vector<std::string>& answers) {
  inference::RepositoryIndexResponse merged;
  for (const std::string& answer : answers) {
    // No error can be returned here: an answer that is not an index is left out, and the
    // other upstreams' models are still listed.
    StatusOr<inference::RepositoryIndexResponse> index = repositoryIndexFromJson(answer);
    if (!index.ok()) continue;
    for (auto& m : *index->mutable_models()) *merged.add_models() = std::move(m);
  }
  return repositoryIndexToJson(merged);
}

StatusOr<std::string> mergeModelStatisticsJson(const std::vector<std::string>& answers) {
  inference::ModelStatisticsResponse merged;
  for (size_t i = 0; i < answers.size(); ++i) {
    StatusOr<inference::ModelStatisticsResponse> stats = modelStatisticsFromJson(answers[i]);
    if (!stats.ok()) {
      return invalidArgument("answer ", i + 1, " of ", answers.size(), ": ",
                             codecs::messageOf(stats.status()));
    }
    for (auto& s : *stats->mutable_model_stats()) *merged.add_model_stats() = std::move(s);
  }
  return modelStatisticsToJson(merged);
}

}  // namespace infergate::gateway::upstream
