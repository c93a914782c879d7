#include "gateway/upstream/builtin/model_config_render.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <optional>

#include "codecs/json_writer.h"

namespace infergate::gateway::builtin {
namespace {

// ---- metadata ------------------------------------------------------------------------

std::vector<int64_t> metadataShape(const ModelSpec& spec, const TensorSpec& t) {
  std::vector<int64_t> shape;
  if (spec.max_batch_size >= 1) shape.push_back(-1);
  shape.insert(shape.end(), t.dims.begin(), t.dims.end());
  return shape;
}

void writeTensors(codecs::JsonWriter& w, const ModelSpec& spec,
                  const std::vector<TensorSpec>& tensors) {
  w.beginArray();
  for (const TensorSpec& t : tensors) {
    w.beginObject();
    w.key("name").string(t.name);
    w.key("datatype").string(codecs::dataTypeName(t.datatype));
    w.key("shape").beginArray();
    for (int64_t d : metadataShape(spec, t)) w.int64(d);
    w.endArray();
    w.endObject();
  }
  w.endArray();
}

void fillTensors(
    google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out,
    const ModelSpec& spec, const std::vector<TensorSpec>& tensors) {
  for (const TensorSpec& t : tensors) {
    auto* m = out->Add();
    m->set_name(t.name);
    m->set_datatype(std::string(codecs::dataTypeName(t.datatype)));
    for (int64_t d : metadataShape(spec, t)) m->add_shape(d);
  }
}

std::vector<std::string> metadataVersions(const ModelSpec& spec, std::string_view version) {
  if (version.empty()) return spec.versions;
  return {std::string(version)};
}

// ---- the 64-bit fix-up ---------------------------------------------------------------

// Paths (field names joined by '.', array levels dropped, map keys as '*') whose string
// values Triton's ModelConfigToJson turns into numbers (PROTOCOL 11.3b).
constexpr std::array<std::string_view, 16> kInt64Paths = {
    "input.dims",
    "input.reshape.shape",
    "output.dims",
    "output.reshape.shape",
    "version_policy.specific.versions",
    "dynamic_batching.max_queue_delay_microseconds",
    "dynamic_batching.priority_levels",
    "dynamic_batching.default_priority_level",
    "dynamic_batching.default_queue_policy.default_timeout_microseconds",
    "dynamic_batching.priority_queue_policy.*.default_timeout_microseconds",
    "sequence_batching.max_sequence_idle_microseconds",
    "sequence_batching.direct.max_queue_delay_microseconds",
    "sequence_batching.oldest.max_queue_delay_microseconds",
    "sequence_batching.state.dims",
    "ensemble_scheduling.step.model_version",
    "model_warmup.inputs.*.dims",
};

// Map fields on the way to one of those paths: their keys are data, not field names.
constexpr std::array<std::string_view, 2> kMapPaths = {
    "dynamic_batching.priority_queue_policy",
    "model_warmup.inputs",
};

template <size_t N>
bool contains(const std::array<std::string_view, N>& set, std::string_view path) {
  return std::find(set.begin(), set.end(), path) != set.end();
}

bool isInteger(std::string_view s) {
  if (!s.empty() && s.front() == '-') s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

class Int64PathRewriter {
 public:
  explicit Int64PathRewriter(std::string_view in) : in_(in) { out_.reserve(in.size()); }

  std::optional<std::string> run() {
    if (!value("", 0)) return std::nullopt;
    whitespace();
    if (pos_ != in_.size()) return std::nullopt;
    return std::move(out_);
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool at(char c) const { return pos_ < in_.size() && in_[pos_] == c; }
  void copyChar() { out_.push_back(in_[pos_++]); }
  void whitespace() {
    while (at(' ') || at('\n') || at('\r') || at('\t')) copyChar();
  }

  // Moves past a string token starting at pos_ (a '"'); false if it is not terminated.
  bool skipString() {
    ++pos_;
    while (pos_ < in_.size()) {
      const char c = in_[pos_++];
      if (c == '\\') {
        if (pos_ >= in_.size()) return false;
        ++pos_;
      } else if (c == '"') {
        return true;
      }
    }
    return false;
  }

  static std::string childPath(const std::string& path, std::string_view key) {
    if (contains(kMapPaths, path)) return path + ".*";
    return path.empty() ? std::string(key) : codecs::strCat(path, ".", key);
  }

  bool value(const std::string& path, int depth) {
    if (depth > kMaxDepth) return false;
    whitespace();
    if (at('{')) return object(path, depth);
    if (at('[')) return array(path, depth);
    const size_t start = pos_;
    if (at('"')) {
      if (!skipString()) return false;
      std::string_view token = in_.substr(start, pos_ - start);
      std::string_view inner = token.substr(1, token.size() - 2);
      out_.append(contains(kInt64Paths, path) && isInteger(inner) ? inner : token);
      return true;
    }
    while (pos_ < in_.size() && !at(',') && !at(']') && !at('}') && !at(' ') && !at('\n') &&
           !at('\r') && !at('\t')) {
      ++pos_;
    }
    if (pos_ == start) return false;
    out_.append(in_.substr(start, pos_ - start));
    return true;
  }

  bool object(const std::string& path, int depth) {
    copyChar();  // {
    whitespace();
    if (at('}')) {
      copyChar();
      return true;
    }
    while (true) {
      whitespace();
      if (!at('"')) return false;
      const size_t start = pos_;
      if (!skipString()) return false;
      out_.append(in_.substr(start, pos_ - start));
      std::string_view key = in_.substr(start + 1, pos_ - start - 2);
      whitespace();
      if (!at(':')) return false;
      copyChar();
      if (!value(childPath(path, key), depth + 1)) return false;
      whitespace();
      if (at(',')) {
        copyChar();
        continue;
      }
      if (!at('}')) return false;
      copyChar();
      return true;
    }
  }

  bool array(const std::string& path, int depth) {
    copyChar();  // [
    whitespace();
    if (at(']')) {
      copyChar();
      return true;
    }
    while (true) {
      if (!value(path, depth + 1)) return false;
      whitespace();
      if (at(',')) {
        copyChar();
        continue;
      }
      if (!at(']')) return false;
      copyChar();
      return true;
    }
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::string out_;
};

}  // namespace

std::string modelMetadataJson(const ModelSpec& spec, std::string_view version) {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginObject();
  w.key("name").string(spec.name);
  w.key("versions").beginArray();
  for (const std::string& v : metadataVersions(spec, version)) w.string(v);
  w.endArray();
  w.key("platform").string(spec.platform);
  w.key("inputs");
  writeTensors(w, spec, spec.inputs);
  w.key("outputs");
  writeTensors(w, spec, spec.outputs);
  w.endObject();
  return out;
}

inference::ModelMetadataResponse modelMetadataProto(const ModelSpec& spec,
                                                    std::string_view version) {
  inference::ModelMetadataResponse out;
  out.set_name(spec.name);
  for (const std::string& v : metadataVersions(spec, version)) out.add_versions(v);
  out.set_platform(spec.platform);
  fillTensors(out.mutable_inputs(), spec, spec.inputs);
  fillTensors(out.mutable_outputs(), spec, spec.outputs);
  return out;
}

inference::ModelConfig modelConfigOf(const ModelSpec& spec) {
  inference::ModelConfig config;
  config.set_name(spec.name);
  config.set_platform(spec.platform);
  config.set_backend("builtin");
  config.mutable_version_policy()->mutable_latest()->set_num_versions(1);
  config.set_max_batch_size(spec.max_batch_size);
  for (const TensorSpec& t : spec.inputs) {
    inference::ModelInput* in = config.add_input();
    in->set_name(t.name);
    in->set_data_type(static_cast<inference::DataType>(codecs::configEnumNumber(t.datatype)));
    for (int64_t d : t.dims) in->add_dims(d);
  }
  for (const TensorSpec& t : spec.outputs) {
    inference::ModelOutput* out = config.add_output();
    out->set_name(t.name);
    out->set_data_type(static_cast<inference::DataType>(codecs::configEnumNumber(t.datatype)));
    for (int64_t d : t.dims) out->add_dims(d);
  }
  inference::ModelInstanceGroup* group = config.add_instance_group();
  group->set_name(spec.name + "_0");
  group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  group->set_count(1);
  config.mutable_optimization()->mutable_input_pinned_memory()->set_enable(true);
  config.mutable_optimization()->mutable_output_pinned_memory()->set_enable(true);
  if (spec.sequence) {
    inference::ModelSequenceBatching* seq = config.mutable_sequence_batching();
    seq->set_max_sequence_idle_microseconds(static_cast<uint64_t>(spec.sequence_idle.count()));
    seq->mutable_direct();
    using Control = inference::ModelSequenceBatching::Control;
    for (auto [name, kind] : {std::pair{"START", Control::CONTROL_SEQUENCE_START},
                              std::pair{"READY", Control::CONTROL_SEQUENCE_READY}}) {
      inference::ModelSequenceBatching::ControlInput* input = seq->add_control_input();
      input->set_name(name);
      Control* control = input->add_control();
      control->set_kind(kind);
      control->add_int32_false_true(0);
      control->add_int32_false_true(1);
    }
  }
  config.mutable_model_transaction_policy()->set_decoupled(spec.decoupled);
  config.mutable_response_cache()->set_enable(false);
  return config;
}

codecs::StatusOr<std::string> modelConfigJson(const inference::ModelConfig& config) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(config, &json, options);
  if (!status.ok()) {
    return codecs::internalError("failed to render the config of model '", config.name(),
                                 "' as JSON");
  }
  return rewriteInt64PathsAsNumbers(json);
}

std::string rewriteInt64PathsAsNumbers(std::string_view json) {
  std::optional<std::string> out = Int64PathRewriter(json).run();
  return out ? std::move(*out) : std::string(json);
}

}  // namespace infergate::gateway::builtin
