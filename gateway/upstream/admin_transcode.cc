// The non-infer endpoints between Triton's JSON and the protobuf messages, and the
// model-name rewrite in answers (admin_transcode.h).
//
// JSON is written with codecs::JsonWriter in the key order of Triton's HTTP frontend (the
// same order the builtin renderers use, so an answer transcoded from a gRPC upstream is
// byte-identical to what that upstream's own HTTP port would have sent), and read with the
// small DOM of codecs/json_value.h: these bodies are small and read once. 64-bit integers
// are accepted as JSON numbers or as strings (protobuf's JSON form), since KServe servers
// and MessageToJson-based tools send both.
//
// The wire-level rewrite walks the message's fields once (codecs/protobuf_wire.h) and
// emits: new fields 1 and 2 in one small glue buffer, then every other field as a slice of
// the original Buffer, so tensor contents are never copied.

#include "gateway/upstream/admin_transcode.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "codecs/json_value.h"
#include "codecs/json_writer.h"
#include "codecs/protobuf_wire.h"
#include "codecs/text.h"
#include "gateway/upstream/builtin/model_config_render.h"

namespace infergate::gateway::upstream {

using codecs::invalidArgument;
using codecs::JsonValue;
using codecs::JsonWriter;
using codecs::Status;
using codecs::StatusOr;

namespace {

void writeTensors(JsonWriter& w,
                  const google::protobuf::RepeatedPtrField<
                      inference::ModelMetadataResponse::TensorMetadata>& tensors) {
  w.beginArray();
  for (const auto& t : tensors) {
    w.beginObject().key("name").string(t.name()).key("datatype").string(t.datatype());
    w.key("shape").beginArray();
    for (int64_t d : t.shape()) w.int64(d);
    w.endArray().endObject();
  }
  w.endArray();
}

void writeDuration(JsonWriter& w, std::string_view key, const inference::StatisticDuration& d) {
  w.key(key).beginObject().key("count").uint64(d.count()).key("ns").uint64(d.ns()).endObject();
}

// ---- reading JSON ----

StatusOr<JsonValue> parseObject(std::string_view json, std::string_view what) {
  StatusOr<JsonValue> v = codecs::parseJson(json);
  if (!v.ok()) return invalidArgument(what, ": ", codecs::messageOf(v.status()));
  if (!v->isObject()) return invalidArgument(what, ": expected a JSON object");
  return v;
}

StatusOr<std::string> stringAt(const JsonValue& o, std::string_view key, std::string_view where,
                               bool required) {
  const JsonValue* v = o.find(key);
  if (v == nullptr || v->isNull()) {
    if (required) return invalidArgument(where, ": '", key, "' is missing");
    return std::string();
  }
  if (!v->isString()) return invalidArgument(where, ": '", key, "' must be a string");
  return v->asString();
}

// An integer given as a number or as a decimal string.
StatusOr<int64_t> int64Of(const JsonValue& v, std::string_view where) {
  if (v.isInteger()) {
    if (auto i = v.asInt()) return *i;
  }
  if (v.isString()) {
    int64_t out = 0;
    const std::string& s = v.asString();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size()) return out;
  }
  return invalidArgument(where, " must be an integer");
}

StatusOr<uint64_t> uint64At(const JsonValue& o, std::string_view key, std::string_view where) {
  const JsonValue* v = o.find(key);
  if (v == nullptr || v->isNull()) return uint64_t{0};
  if (v->isInteger()) {
    if (auto u = v->asUint()) return *u;
  }
  if (v->isString()) {
    uint64_t out = 0;
    const std::string& s = v->asString();
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size()) return out;
  }
  return invalidArgument(where, ": '", key, "' must be a non-negative integer");
}

Status readTensors(const JsonValue& o, std::string_view key,
                   google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  const JsonValue* list = o.find(key);
  if (list == nullptr || list->isNull()) return absl::OkStatus();
  if (!list->isArray()) return invalidArgument("model metadata: '", key, "' must be an array");
  for (size_t i = 0; i < list->asArray().size(); ++i) {
    const JsonValue& t = list->asArray()[i];
    std::string where = codecs::strCat("model metadata: '", key, "[", i, "]");
    if (!t.isObject()) return invalidArgument(where, "' must be an object");
    auto* tensor = out->Add();
    INFERGATE_ASSIGN_OR_RETURN(*tensor->mutable_name(), stringAt(t, "name", where + "'", true));
    INFERGATE_ASSIGN_OR_RETURN(*tensor->mutable_datatype(), stringAt(t, "datatype", where + "'", true));
    const JsonValue* shape = t.find("shape");
    if (shape == nullptr || !shape->isArray()) {
      return invalidArgument(where, ".shape' must be an array of integers");
    }
    for (const JsonValue& d : shape->asArray()) {
      INFERGATE_ASSIGN_OR_RETURN(int64_t dim, int64Of(d, where + ".shape'"));
      tensor->add_shape(dim);
    }
  }
  return absl::OkStatus();
}

Status readDuration(const JsonValue& parent, std::string_view key, std::string_view where,
                    inference::StatisticDuration* out) {
  const JsonValue* d = parent.find(key);
  if (d == nullptr || d->isNull()) return absl::OkStatus();
  if (!d->isObject()) return invalidArgument(where, ".", key, " must be an object");
  std::string at = codecs::strCat(where, ".", key);
  INFERGATE_ASSIGN_OR_RETURN(uint64_t count, uint64At(*d, "count", at));
  INFERGATE_ASSIGN_OR_RETURN(uint64_t ns, uint64At(*d, "ns", at));
  out->set_count(count);
  out->set_ns(ns);
  return absl::OkStatus();
}

// The order in which Triton's HTTP frontend writes the trace settings.
constexpr std::string_view kTraceKeys[] = {"trace_level", "trace_rate", "trace_count",
                                           "log_frequency", "trace_file", "trace_mode"};

void writeTraceValue(JsonWriter& w, std::string_view key, const inference::TraceSettingResponse::SettingValue& v) {
  w.key(key);
  if (key == "trace_level" || v.value_size() != 1) {
    w.beginArray();
    for (const std::string& s : v.value()) w.string(s);
    w.endArray();
  } else {
    w.string(v.value(0));
  }
}

// Base64 (RFC 4648, with padding), for `file:` load parameters over HTTP.
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t n = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kBase64[(n >> s) & 63]);
  }
  if (i < in.size()) {
    uint32_t n = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) n |= uint32_t(uint8_t(in[i + 1])) << 8;
    out.push_back(kBase64[(n >> 18) & 63]);
    out.push_back(kBase64[(n >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kBase64[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

StatusOr<std::string> base64Decode(std::string_view in, std::string_view what) {
  auto value = [](char c) -> int {
    const char* p = std::find(kBase64, kBase64 + 64, c);
    return p == kBase64 + 64 ? -1 : static_cast<int>(p - kBase64);
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0) return invalidArgument(what, " is not base64");
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace

// ---- answers: protobuf -> JSON ----

std::string modelMetadataToJson(const inference::ModelMetadataResponse& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject().key("name").string(r.name()).key("versions").beginArray();
  for (const std::string& v : r.versions()) w.string(v);
  w.endArray().key("platform").string(r.platform()).key("inputs");
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
  for (const inference::ModelStatistics& s : r.model_stats()) {
    w.beginObject().key("name").string(s.name()).key("version").string(s.version());
    w.key("last_inference").uint64(s.last_inference());
    w.key("inference_count").uint64(s.inference_count());
    w.key("execution_count").uint64(s.execution_count());
    const inference::InferStatistics& i = s.inference_stats();
    w.key("inference_stats").beginObject();
    writeDuration(w, "success", i.success());
    writeDuration(w, "fail", i.fail());
    writeDuration(w, "queue", i.queue());
    writeDuration(w, "compute_input", i.compute_input());
    writeDuration(w, "compute_infer", i.compute_infer());
    writeDuration(w, "compute_output", i.compute_output());
    writeDuration(w, "cache_hit", i.cache_hit());
    writeDuration(w, "cache_miss", i.cache_miss());
    w.endObject();
    // Response indices in numeric order, as Triton's std::map keyed by index prints them.
    std::map<uint64_t, const inference::InferResponseStatistics*> responses;
    for (const auto& [key, value] : s.response_stats()) {
      uint64_t index = 0;
      std::from_chars(key.data(), key.data() + key.size(), index);
      responses.emplace(index, &value);
    }
    w.key("response_stats").beginObject();
    for (const auto& [index, rs] : responses) {
      w.key(std::to_string(index)).beginObject();
      writeDuration(w, "compute_infer", rs->compute_infer());
      writeDuration(w, "compute_output", rs->compute_output());
      writeDuration(w, "success", rs->success());
      writeDuration(w, "fail", rs->fail());
      writeDuration(w, "empty_response", rs->empty_response());
      writeDuration(w, "cancel", rs->cancel());
      w.endObject();
    }
    w.endObject().key("batch_stats").beginArray();
    for (const inference::InferBatchStatistics& b : s.batch_stats()) {
      w.beginObject().key("batch_size").uint64(b.batch_size());
      writeDuration(w, "compute_input", b.compute_input());
      writeDuration(w, "compute_infer", b.compute_infer());
      writeDuration(w, "compute_output", b.compute_output());
      w.endObject();
    }
    w.endArray().key("memory_usage").beginArray();
    for (const inference::MemoryUsage& m : s.memory_usage()) {
      w.beginObject().key("type").string(m.type()).key("id").int64(m.id());
      w.key("byte_size").uint64(m.byte_size()).endObject();
    }
    w.endArray().endObject();
  }
  w.endArray().endObject();
  return out;
}

std::string repositoryIndexToJson(const inference::RepositoryIndexResponse& r) {
  std::string out;
  JsonWriter w(out);
  w.beginArray();
  for (const auto& m : r.models()) {
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
    if (std::find(std::begin(kTraceKeys), std::end(kTraceKeys), key) == std::end(kTraceKeys)) {
      others.emplace(key, &value);
    }
  }
  for (const auto& [key, value] : others) writeTraceValue(w, key, *value);
  w.endObject();
  return out;
}

// ---- answers: JSON -> protobuf ----

StatusOr<inference::ModelMetadataResponse> modelMetadataFromJson(std::string_view json) {
  INFERGATE_ASSIGN_OR_RETURN(JsonValue o, parseObject(json, "model metadata"));
  inference::ModelMetadataResponse r;
  INFERGATE_ASSIGN_OR_RETURN(*r.mutable_name(), stringAt(o, "name", "model metadata", true));
  INFERGATE_ASSIGN_OR_RETURN(*r.mutable_platform(), stringAt(o, "platform", "model metadata", false));
  if (const JsonValue* versions = o.find("versions"); versions && !versions->isNull()) {
    if (!versions->isArray()) return invalidArgument("model metadata: 'versions' must be an array");
    for (const JsonValue& v : versions->asArray()) {
      if (!v.isString()) return invalidArgument("model metadata: 'versions' must hold strings");
      r.add_versions(v.asString());
    }
  }
  INFERGATE_RETURN_IF_ERROR(readTensors(o, "inputs", r.mutable_inputs()));
  INFERGATE_RETURN_IF_ERROR(readTensors(o, "outputs", r.mutable_outputs()));
  return r;
}

StatusOr<inference::ModelConfigResponse> modelConfigFromJson(std::string_view json) {
  inference::ModelConfigResponse r;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), r.mutable_config(), options);
  if (!status.ok()) {
    return invalidArgument("model config: ", std::string_view(status.message().data(), status.message().size()));
  }
  return r;
}

StatusOr<inference::ModelStatisticsResponse> modelStatisticsFromJson(std::string_view json) {
  INFERGATE_ASSIGN_OR_RETURN(JsonValue o, parseObject(json, "model statistics"));
  inference::ModelStatisticsResponse r;
  const JsonValue* list = o.find("model_stats");
  if (list == nullptr || !list->isArray()) {
    return invalidArgument("model statistics: 'model_stats' must be an array");
  }
  for (size_t n = 0; n < list->asArray().size(); ++n) {
    const JsonValue& e = list->asArray()[n];
    std::string where = codecs::strCat("model statistics: model_stats[", n, "]");
    if (!e.isObject()) return invalidArgument(where, " must be an object");
    inference::ModelStatistics* s = r.add_model_stats();
    INFERGATE_ASSIGN_OR_RETURN(*s->mutable_name(), stringAt(e, "name", where, true));
    INFERGATE_ASSIGN_OR_RETURN(*s->mutable_version(), stringAt(e, "version", where, false));
    INFERGATE_ASSIGN_OR_RETURN(uint64_t last, uint64At(e, "last_inference", where));
    INFERGATE_ASSIGN_OR_RETURN(uint64_t count, uint64At(e, "inference_count", where));
    INFERGATE_ASSIGN_OR_RETURN(uint64_t executions, uint64At(e, "execution_count", where));
    s->set_last_inference(last);
    s->set_inference_count(count);
    s->set_execution_count(executions);
    if (const JsonValue* i = e.find("inference_stats"); i && i->isObject()) {
      std::string at = where + ".inference_stats";
      inference::InferStatistics* out = s->mutable_inference_stats();
      INFERGATE_RETURN_IF_ERROR(readDuration(*i, "success", at, out->mutable_success()));
      INFERGATE_RETURN_IF_ERROR(readDuration(*i, "fail", at, out->mutable_fail()));
      INFERGATE_RETURN_IF_ERROR(readDuration(*i, "queue", at, out->mutable_queue()));
      INFERGATE_RETURN_IF_ERROR(readDuration(*i, "compute_input", at, out->mutable_compute_input()));
      INFERGATE_RETURN_IF_ERROR(readDuration(*i, "compute_infer", at, out->mutable_compute_infer()));
      INFERGATE_RETURN_IF_ERROR(readDuration(*i, "compute_output", at, out->mutable_compute_output()));
      INFERGATE_RETURN_IF_ERROR(readDuration(*i, "cache_hit", at, out->mutable_cache_hit()));
      INFERGATE_RETURN_IF_ERROR(readDuration(*i, "cache_miss", at, out->mutable_cache_miss()));
    }
    if (const JsonValue* rs = e.find("response_stats"); rs && rs->isObject()) {
      for (const auto& [key, value] : rs->asObject()) {
        if (!value.isObject()) return invalidArgument(where, ".response_stats.", key, " must be an object");
        std::string at = codecs::strCat(where, ".response_stats.", key);
        inference::InferResponseStatistics& out = (*s->mutable_response_stats())[key];
        INFERGATE_RETURN_IF_ERROR(readDuration(value, "compute_infer", at, out.mutable_compute_infer()));
        INFERGATE_RETURN_IF_ERROR(readDuration(value, "compute_output", at, out.mutable_compute_output()));
        INFERGATE_RETURN_IF_ERROR(readDuration(value, "success", at, out.mutable_success()));
        INFERGATE_RETURN_IF_ERROR(readDuration(value, "fail", at, out.mutable_fail()));
        INFERGATE_RETURN_IF_ERROR(readDuration(value, "empty_response", at, out.mutable_empty_response()));
        INFERGATE_RETURN_IF_ERROR(readDuration(value, "cancel", at, out.mutable_cancel()));
      }
    }
    if (const JsonValue* bs = e.find("batch_stats"); bs && bs->isArray()) {
      for (const JsonValue& b : bs->asArray()) {
        if (!b.isObject()) return invalidArgument(where, ".batch_stats entries must be objects");
        std::string at = where + ".batch_stats";
        inference::InferBatchStatistics* out = s->add_batch_stats();
        INFERGATE_ASSIGN_OR_RETURN(uint64_t size, uint64At(b, "batch_size", at));
        out->set_batch_size(size);
        INFERGATE_RETURN_IF_ERROR(readDuration(b, "compute_input", at, out->mutable_compute_input()));
        INFERGATE_RETURN_IF_ERROR(readDuration(b, "compute_infer", at, out->mutable_compute_infer()));
        INFERGATE_RETURN_IF_ERROR(readDuration(b, "compute_output", at, out->mutable_compute_output()));
      }
    }
    if (const JsonValue* mu = e.find("memory_usage"); mu && mu->isArray()) {
      for (const JsonValue& m : mu->asArray()) {
        if (!m.isObject()) return invalidArgument(where, ".memory_usage entries must be objects");
        std::string at = where + ".memory_usage";
        inference::MemoryUsage* out = s->add_memory_usage();
        INFERGATE_ASSIGN_OR_RETURN(*out->mutable_type(), stringAt(m, "type", at, false));
        if (const JsonValue* id = m.find("id")) {
          INFERGATE_ASSIGN_OR_RETURN(int64_t v, int64Of(*id, at + ".id"));
          out->set_id(v);
        }
        INFERGATE_ASSIGN_OR_RETURN(uint64_t bytes, uint64At(m, "byte_size", at));
        out->set_byte_size(bytes);
      }
    }
  }
  return r;
}

StatusOr<inference::RepositoryIndexResponse> repositoryIndexFromJson(std::string_view json) {
  StatusOr<JsonValue> v = codecs::parseJson(json);
  if (!v.ok()) return invalidArgument("repository index: ", codecs::messageOf(v.status()));
  if (!v->isArray()) return invalidArgument("repository index: expected a JSON array");
  inference::RepositoryIndexResponse r;
  for (size_t n = 0; n < v->asArray().size(); ++n) {
    const JsonValue& e = v->asArray()[n];
    std::string where = codecs::strCat("repository index[", n, "]");
    if (!e.isObject()) return invalidArgument(where, " must be an object");
    auto* m = r.add_models();
    INFERGATE_ASSIGN_OR_RETURN(*m->mutable_name(), stringAt(e, "name", where, true));
    INFERGATE_ASSIGN_OR_RETURN(*m->mutable_version(), stringAt(e, "version", where, false));
    INFERGATE_ASSIGN_OR_RETURN(*m->mutable_state(), stringAt(e, "state", where, false));
    INFERGATE_ASSIGN_OR_RETURN(*m->mutable_reason(), stringAt(e, "reason", where, false));
  }
  return r;
}

StatusOr<inference::TraceSettingResponse> traceSettingFromJson(std::string_view json) {
  INFERGATE_ASSIGN_OR_RETURN(JsonValue o, parseObject(json, "trace settings"));
  inference::TraceSettingResponse r;
  for (const auto& [key, value] : o.asObject()) {
    auto& out = (*r.mutable_settings())[key];
    if (value.isString()) {
      out.add_value(value.asString());
    } else if (value.isArray()) {
      for (const JsonValue& s : value.asArray()) {
        if (!s.isString()) return invalidArgument("trace settings: '", key, "' must hold strings");
        out.add_value(s.asString());
      }
    } else if (!value.isNull()) {
      return invalidArgument("trace settings: '", key, "' must be a string or an array of strings");
    }
  }
  return r;
}

// ---- requests: HTTP body -> protobuf ----

namespace {

// The body as an object; an empty body is an empty object.
StatusOr<JsonValue> bodyObject(std::string_view body) {
  if (codecs::trimAscii(body).empty()) return JsonValue(JsonValue::Object{});
  StatusOr<JsonValue> v = codecs::parseJson(body);
  if (!v.ok()) return v.status();
  if (!v->isObject()) return invalidArgument("the request body must be a JSON object");
  return v;
}

StatusOr<const JsonValue*> parametersOf(const JsonValue& body) {
  const JsonValue* p = body.find("parameters");
  if (p != nullptr && !p->isNull() && !p->isObject()) {
    return invalidArgument("'parameters' must be a JSON object");
  }
  return p != nullptr && p->isObject() ? p : nullptr;
}

}  // namespace

StatusOr<inference::RepositoryIndexRequest> indexRequestFromJson(std::string_view body) {
  INFERGATE_ASSIGN_OR_RETURN(JsonValue o, bodyObject(body));
  inference::RepositoryIndexRequest r;
  if (const JsonValue* ready = o.find("ready"); ready && !ready->isNull()) {
    if (!ready->isBool()) return invalidArgument("'ready' must be a boolean");
    r.set_ready(ready->asBool());
  }
  return r;
}

StatusOr<inference::RepositoryModelLoadRequest> loadRequestFromJson(std::string_view model,
                                                                    std::string_view body) {
  INFERGATE_ASSIGN_OR_RETURN(JsonValue o, bodyObject(body));
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* params, parametersOf(o));
  inference::RepositoryModelLoadRequest r;
  r.set_model_name(std::string(model));
  if (params == nullptr) return r;
  for (const auto& [key, value] : params->asObject()) {
    if (!value.isString()) {
      return invalidArgument("load parameter '", key, "' must be a string");
    }
    auto& p = (*r.mutable_parameters())[key];
    if (key.rfind("file:", 0) == 0) {
      INFERGATE_ASSIGN_OR_RETURN(*p.mutable_bytes_param(),
                                 base64Decode(value.asString(), codecs::strCat("load parameter '", key, "'")));
    } else {
      p.set_string_param(value.asString());
    }
  }
  return r;
}

StatusOr<inference::RepositoryModelUnloadRequest> unloadRequestFromJson(std::string_view model,
                                                                        std::string_view body) {
  INFERGATE_ASSIGN_OR_RETURN(JsonValue o, bodyObject(body));
  INFERGATE_ASSIGN_OR_RETURN(const JsonValue* params, parametersOf(o));
  inference::RepositoryModelUnloadRequest r;
  r.set_model_name(std::string(model));
  if (params == nullptr) return r;
  for (const auto& [key, value] : params->asObject()) {
    auto& p = (*r.mutable_parameters())[key];
    if (value.isBool()) {
      p.set_bool_param(value.asBool());
    } else if (value.isString()) {
      p.set_string_param(value.asString());
    } else {
      return invalidArgument("unload parameter '", key, "' must be a boolean or a string");
    }
  }
  return r;
}

StatusOr<inference::TraceSettingRequest> traceSettingRequestFromJson(std::string_view model,
                                                                     std::string_view body) {
  INFERGATE_ASSIGN_OR_RETURN(JsonValue o, bodyObject(body));
  inference::TraceSettingRequest r;
  r.set_model_name(std::string(model));
  for (const auto& [key, value] : o.asObject()) {
    auto& out = (*r.mutable_settings())[key];  // null: an entry with no value clears it
    if (value.isString()) {
      out.add_value(value.asString());
    } else if (value.isArray()) {
      for (const JsonValue& s : value.asArray()) {
        if (!s.isString()) return invalidArgument("trace setting '", key, "' must hold strings");
        out.add_value(s.asString());
      }
    } else if (!value.isNull()) {
      return invalidArgument("trace setting '", key, "' must be a string, an array of strings or null");
    }
  }
  return r;
}

// ---- requests: protobuf -> HTTP body ----

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
  if (!r.parameters().empty()) {
    std::map<std::string_view, const inference::ModelRepositoryParameter*> sorted;
    for (const auto& [key, value] : r.parameters()) sorted.emplace(key, &value);
    w.key("parameters").beginObject();
    for (const auto& [key, p] : sorted) {
      w.key(key);
      switch (p->parameter_choice_case()) {
        case inference::ModelRepositoryParameter::kBytesParam: w.string(base64Encode(p->bytes_param())); break;
        case inference::ModelRepositoryParameter::kStringParam: w.string(p->string_param()); break;
        case inference::ModelRepositoryParameter::kBoolParam: w.boolean(p->bool_param()); break;
        case inference::ModelRepositoryParameter::kInt64Param: w.int64(p->int64_param()); break;
        default: w.null(); break;
      }
    }
    w.endObject();
  }
  w.endObject();
  return out;
}

std::string unloadRequestToJson(const inference::RepositoryModelUnloadRequest& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  if (!r.parameters().empty()) {
    w.key("parameters").beginObject();
    for (const auto& [key, p] : r.parameters()) {
      w.key(key);
      if (p.parameter_choice_case() == inference::ModelRepositoryParameter::kBoolParam) {
        w.boolean(p.bool_param());
      } else if (p.parameter_choice_case() == inference::ModelRepositoryParameter::kStringParam) {
        w.string(p.string_param());
      } else {
        w.null();
      }
    }
    w.endObject();
  }
  w.endObject();
  return out;
}

std::string traceSettingRequestToJson(const inference::TraceSettingRequest& r) {
  std::string out;
  JsonWriter w(out);
  w.beginObject();
  std::map<std::string_view, const inference::TraceSettingRequest::SettingValue*> sorted;
  for (const auto& [key, value] : r.settings()) sorted.emplace(key, &value);
  for (const auto& [key, v] : sorted) {
    w.key(key);
    if (v->value_size() == 0) {
      w.null();
    } else if (key == "trace_level" || v->value_size() > 1) {
      w.beginArray();
      for (const std::string& s : v->value()) w.string(s);
      w.endArray();
    } else {
      w.string(v->value(0));
    }
  }
  w.endObject();
  return out;
}

// ---- merging ----

std::string mergeRepositoryIndexJson(const std::vector<std::string>& answers) {
  inference::RepositoryIndexResponse merged;
  for (const std::string& a : answers) {
    auto index = repositoryIndexFromJson(a);
    if (!index.ok()) continue;  // gatherers only pass answers that were 200s
    for (const auto& m : index->models()) *merged.add_models() = m;
  }
  return repositoryIndexToJson(merged);
}

StatusOr<std::string> mergeModelStatisticsJson(const std::vector<std::string>& answers) {
  inference::ModelStatisticsResponse merged;
  for (const std::string& a : answers) {
    INFERGATE_ASSIGN_OR_RETURN(inference::ModelStatisticsResponse stats, modelStatisticsFromJson(a));
    for (const auto& s : stats.model_stats()) *merged.add_model_stats() = s;
  }
  return modelStatisticsToJson(merged);
}

// ---- rewrite ----

std::optional<std::string> renameInJson(std::string_view json, std::string_view key,
                                        std::string_view value) {
  // A small scanner: depth 1 members only, strings skipped with their escapes.
  size_t i = 0, n = json.size();
  auto ws = [&] {
    while (i < n && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) ++i;
  };
  // Returns the end (one past the closing quote) of the string starting at i, or npos.
  auto skipString = [&](size_t at) -> size_t {
    if (at >= n || json[at] != '"') return std::string_view::npos;
    for (size_t k = at + 1; k < n; ++k) {
      if (json[k] == '\\') {
        ++k;
      } else if (json[k] == '"') {
        return k + 1;
      }
    }
    return std::string_view::npos;
  };
  // Skips one value starting at i (after whitespace); returns false when malformed.
  auto skipValue = [&]() -> bool {
    ws();
    if (i >= n) return false;
    if (json[i] == '"') {
      size_t end = skipString(i);
      if (end == std::string_view::npos) return false;
      i = end;
      return true;
    }
    if (json[i] == '{' || json[i] == '[') {
      int depth = 0;
      while (i < n) {
        char c = json[i];
        if (c == '"') {
          size_t end = skipString(i);
          if (end == std::string_view::npos) return false;
          i = end;
          continue;
        }
        if (c == '{' || c == '[') ++depth;
        if (c == '}' || c == ']') {
          if (--depth == 0) {
            ++i;
            return true;
          }
        }
        ++i;
      }
      return false;
    }
    while (i < n && json[i] != ',' && json[i] != '}' && json[i] != ']') ++i;
    return true;
  };
  ws();
  if (i >= n || json[i] != '{') return std::nullopt;
  ++i;
  while (true) {
    ws();
    if (i < n && json[i] == '}') return std::nullopt;
    size_t key_end = skipString(i);
    if (key_end == std::string_view::npos) return std::nullopt;
    std::string_view name = json.substr(i + 1, key_end - i - 2);
    i = key_end;
    ws();
    if (i >= n || json[i] != ':') return std::nullopt;
    ++i;
    ws();
    size_t value_start = i;
    if (name == key) {
      if (i >= n || json[i] != '"') return std::nullopt;
      size_t value_end = skipString(i);
      if (value_end == std::string_view::npos) return std::nullopt;
      std::string replaced;
      JsonWriter w(replaced);
      w.string(value);
      std::string out;
      out.reserve(json.size() + replaced.size());
      out.append(json.substr(0, value_start)).append(replaced).append(json.substr(value_end));
      return out;
    }
    if (!skipValue()) return std::nullopt;
    ws();
    if (i < n && json[i] == ',') {
      ++i;
      continue;
    }
    return std::nullopt;  // '}' without the key, or malformed
  }
}

namespace {

// Fields 1 and 2 replaced, every other field a slice of `message`.
StatusOr<codecs::BufferChain> rewriteFields(const codecs::Buffer& message, std::string_view model,
                                            std::optional<std::string_view> version) {
  std::span<const uint8_t> bytes = message.span();
  std::string glue;
  codecs::WireWriter writer(glue);
  std::optional<std::string> old_version;
  std::vector<std::pair<size_t, size_t>> kept;  // [begin, end) of fields kept as they are
  codecs::WireReader reader(bytes);
  while (!reader.done()) {
    size_t begin = reader.position();
    INFERGATE_ASSIGN_OR_RETURN(codecs::FieldTag tag, reader.readTag());
    if ((tag.number == 1 || tag.number == 2) && tag.type == codecs::WireType::kLen) {
      INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> value, reader.readLengthDelimited());
      if (tag.number == 2) old_version = std::string(codecs::asChars(value));
      continue;
    }
    INFERGATE_RETURN_IF_ERROR(reader.skip(tag));
    if (!kept.empty() && kept.back().second == begin) {
      kept.back().second = reader.position();
    } else {
      kept.emplace_back(begin, reader.position());
    }
  }
  if (!model.empty()) writer.bytesField(1, model);
  std::string_view new_version;
  if (version) {
    new_version = *version;
  } else if (old_version) {
    new_version = *old_version;
  }
  if (!new_version.empty()) writer.bytesField(2, new_version);
  codecs::BufferChain chain(codecs::Buffer::fromString(std::move(glue)));
  for (const auto& [b, e] : kept) chain.append(message.slice(b, e - b));
  return chain;
}

}  // namespace

StatusOr<codecs::BufferChain> rewriteModelFields(const codecs::Buffer& message,
                                                 std::string_view model,
                                                 std::optional<std::string_view> version) {
  return rewriteFields(message, model, version);
}

StatusOr<codecs::BufferChain> rewriteStreamModelFields(const codecs::Buffer& message,
                                                       std::string_view model,
                                                       std::optional<std::string_view> version) {
  std::span<const uint8_t> bytes = message.span();
  codecs::WireReader reader(bytes);
  codecs::BufferChain out;
  while (!reader.done()) {
    size_t begin = reader.position();
    INFERGATE_ASSIGN_OR_RETURN(codecs::FieldTag tag, reader.readTag());
    if (tag.number == 2 && tag.type == codecs::WireType::kLen) {
      INFERGATE_ASSIGN_OR_RETURN(std::span<const uint8_t> inner, reader.readLengthDelimited());
      size_t offset = static_cast<size_t>(inner.data() - bytes.data());
      INFERGATE_ASSIGN_OR_RETURN(codecs::BufferChain rewritten,
                                 rewriteFields(message.slice(offset, inner.size()), model, version));
      std::string prefix;
      codecs::WireWriter(prefix).lengthPrefix(2, rewritten.size());
      out.append(codecs::Buffer::fromString(std::move(prefix)));
      out.append(rewritten);
      continue;
    }
    INFERGATE_RETURN_IF_ERROR(reader.skip(tag));
    out.append(message.slice(begin, reader.position() - begin));
  }
  return out;
}

}  // namespace infergate::gateway::upstream
