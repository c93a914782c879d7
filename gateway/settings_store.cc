#include "gateway/settings_store.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <limits>
#include <vector>

#include "codecs/json_writer.h"
#include "gateway/upstream/builtin/repository.h"

namespace infergate::gateway {
namespace {

using codecs::invalidArgument;
using codecs::Status;
using codecs::StatusOr;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr uint8_t kTimestamps = 1;
constexpr uint8_t kTensors = 2;

constexpr std::string_view kTraceLevel = "trace_level";
constexpr std::string_view kTraceRate = "trace_rate";
constexpr std::string_view kTraceCount = "trace_count";
constexpr std::string_view kLogFrequency = "log_frequency";
constexpr std::string_view kTraceFile = "trace_file";
constexpr std::string_view kTraceMode = "trace_mode";

constexpr std::string_view kLogFile = "log_file";
constexpr std::string_view kLogInfo = "log_info";
constexpr std::string_view kLogWarning = "log_warning";
constexpr std::string_view kLogError = "log_error";
constexpr std::string_view kLogVerboseLevel = "log_verbose_level";
constexpr std::string_view kLogFormat = "log_format";

Status traceFileRefused() {
  return codecs::unimplemented("trace file location can not be updated through network protocol");
}
Status logFileRefused() {
  return codecs::unimplemented("log file location can not be updated through network protocol");
}

// ---- numbers, as std::stoi reads them -------------------------------------------------

enum class Parsed { kOk, kInvalid, kOutOfRange };

// Leading blanks, an optional sign, at least one digit; what follows the digits is
// ignored. Values past +-10^12 are out of range (every key's range is far smaller).
Parsed parseStoi(std::string_view text, int64_t& out) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  const size_t first = i;
  uint64_t value = 0;
  bool huge = false;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (value > 1'000'000'000'000ULL) {
      huge = true;
    } else {
      value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    }
  }
  if (i == first) return Parsed::kInvalid;
  if (huge || value > 1'000'000'000'000ULL) return Parsed::kOutOfRange;
  out = negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
  return Parsed::kOk;
}

StatusOr<uint32_t> parseUint32Setting(std::string_view key, std::string_view text) {
  int64_t v = 0;
  Parsed p = parseStoi(text, v);
  if (p == Parsed::kInvalid) return invalidArgument("Unable to parse '", key, "', got: ", text);
  if (p == Parsed::kOutOfRange || v < 0 || v > std::numeric_limits<uint32_t>::max()) {
    return invalidArgument("Unable to parse '", key, "', value is out of range [ 0, ",
                           std::numeric_limits<uint32_t>::max(), " ], got: ", text);
  }
  return static_cast<uint32_t>(v);
}

StatusOr<int32_t> parseCountSetting(std::string_view text) {
  int64_t v = 0;
  Parsed p = parseStoi(text, v);
  if (p == Parsed::kInvalid) return invalidArgument("Unable to parse 'trace_count', got: ", text);
  if (p == Parsed::kOutOfRange || v > std::numeric_limits<int32_t>::max() ||
      v < std::numeric_limits<int32_t>::min()) {
    return invalidArgument("Unable to parse 'trace_count', value is out of range [ -1, ",
                           std::numeric_limits<int32_t>::max(), " ], got: ", text);
  }
  if (v < -1) {
    return invalidArgument("Unable to parse 'trace_count'. Expecting value >= -1, got: ", text);
  }
  return static_cast<int32_t>(v);
}

// ["OFF"] -> 0; TIMESTAMPS / TENSORS -> their bits; unknown strings ignored (no change
// when nothing is recognised); "OFF" with any other value is refused.
StatusOr<std::optional<uint8_t>> parseLevels(const std::vector<std::string_view>& values) {
  std::optional<uint8_t> level;
  uint8_t bits = 0;
  for (std::string_view v : values) {
    if (v == "OFF") {
      if (values.size() != 1) {
        return invalidArgument("Expect only one trace level 'OFF' is specified");
      }
      level = 0;
    } else if (v == "TIMESTAMPS") {
      bits |= kTimestamps;
      level = bits;
    } else if (v == "TENSORS") {
      bits |= kTensors;
      level = bits;
    }
  }
  return level;
}

std::vector<std::string_view> levelNames(const TraceSettings& s) {
  if (!s.timestamps && !s.tensors) return {"OFF"};
  std::vector<std::string_view> names;
  if (s.timestamps) names.push_back("TIMESTAMPS");
  if (s.tensors) names.push_back("TENSORS");
  return names;
}

// ---- JSON in ----------------------------------------------------------------------------

StatusOr<Struct> parseJsonObject(std::string_view body) {
  Struct object;
  auto parsed = google::protobuf::util::JsonStringToMessage(std::string(body), &object);
  if (!parsed.ok()) {
    return invalidArgument("failed to parse the request JSON buffer: ",
                           std::string_view(parsed.message().data(), parsed.message().size()));
  }
  return object;
}

const Value* member(const Struct& object, std::string_view key) {
  auto it = object.fields().find(std::string(key));
  return it == object.fields().end() ? nullptr : &it->second;
}

// A numeric trace key over HTTP: null clears, a string is parsed, anything else is refused.
template <typename T, typename ParseFn>
Status jsonNumberChange(const Struct& object, std::string_view key, ParseFn parse,
                        SettingsStore::Change<T>& change) {
  const Value* v = member(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (v->has_null_value()) {
    change.clear = true;
    return absl::OkStatus();
  }
  if (!v->has_string_value()) return invalidArgument("expect string for '", key, "'");
  INFERGATE_ASSIGN_OR_RETURN(change.value, parse(v->string_value()));
  return absl::OkStatus();
}

StatusOr<SettingsStore::TraceUpdate> traceUpdateFromJson(const Struct& object) {
  SettingsStore::TraceUpdate update;
  if (member(object, kTraceFile) != nullptr) return traceFileRefused();
  if (const Value* v = member(object, kTraceLevel)) {
    if (v->has_null_value()) {
      update.level.clear = true;
    } else if (!v->has_list_value()) {
      return invalidArgument("expect an array of strings for '", kTraceLevel, "'");
    } else {
      std::vector<std::string_view> values;
      for (const Value& item : v->list_value().values()) {
        if (!item.has_string_value()) {
          return invalidArgument("expect an array of strings for '", kTraceLevel, "'");
        }
        values.push_back(item.string_value());
      }
      INFERGATE_ASSIGN_OR_RETURN(update.level.value, parseLevels(values));
    }
  }
  auto rate = [](std::string_view t) { return parseUint32Setting(kTraceRate, t); };
  auto frequency = [](std::string_view t) { return parseUint32Setting(kLogFrequency, t); };
  INFERGATE_RETURN_IF_ERROR(jsonNumberChange(object, kTraceRate, rate, update.rate));
  INFERGATE_RETURN_IF_ERROR(jsonNumberChange(object, kTraceCount, parseCountSetting, update.count));
  INFERGATE_RETURN_IF_ERROR(
      jsonNumberChange(object, kLogFrequency, frequency, update.log_frequency));
  return update;
}

Status jsonBool(const Struct& object, std::string_view key, std::optional<bool>& out) {
  const Value* v = member(object, key);
  if (v == nullptr || v->has_null_value()) return absl::OkStatus();
  if (!v->has_bool_value()) return invalidArgument("expect boolean for '", key, "'");
  out = v->bool_value();
  return absl::OkStatus();
}

StatusOr<SettingsStore::LogUpdate> logUpdateFromJson(const Struct& object) {
  SettingsStore::LogUpdate update;
  if (const Value* v = member(object, kLogFile); v != nullptr && !v->has_null_value()) {
    if (!v->has_string_value()) return invalidArgument("expect string for '", kLogFile, "'");
    return logFileRefused();
  }
  INFERGATE_RETURN_IF_ERROR(jsonBool(object, kLogInfo, update.info));
  INFERGATE_RETURN_IF_ERROR(jsonBool(object, kLogWarning, update.warning));
  INFERGATE_RETURN_IF_ERROR(jsonBool(object, kLogError, update.error));
  if (const Value* v = member(object, kLogVerboseLevel); v != nullptr && !v->has_null_value()) {
    const double d = v->has_number_value() ? v->number_value() : -1;
    if (d < 0 || d > std::numeric_limits<uint32_t>::max() ||
        d != static_cast<double>(static_cast<uint64_t>(d))) {
      return invalidArgument("expect unsigned integer for '", kLogVerboseLevel, "'");
    }
    update.verbose_level = static_cast<uint32_t>(d);
  }
  if (const Value* v = member(object, kLogFormat); v != nullptr && !v->has_null_value()) {
    if (!v->has_string_value()) return invalidArgument("expect string for '", kLogFormat, "'");
    if (v->string_value() != "default" && v->string_value() != "ISO8601") {
      // Triton's HTTP frontend answers 503 here (its gRPC one INVALID_ARGUMENT).
      return absl::UnavailableError(
          codecs::strCat("invalid argument for log_format, got: ", v->string_value()));
    }
    update.format = v->string_value();
  }
  return update;
}

// ---- proto in ---------------------------------------------------------------------------

template <typename T, typename ParseFn>
Status protoNumberChange(const inference::TraceSettingRequest& request, std::string_view key,
                         ParseFn parse, SettingsStore::Change<T>& change) {
  auto it = request.settings().find(std::string(key));
  if (it == request.settings().end()) return absl::OkStatus();
  const auto& values = it->second.value();
  if (values.empty()) {
    change.clear = true;
    return absl::OkStatus();
  }
  if (values.size() > 1) return invalidArgument("expect only 1 value for '", key, "'");
  INFERGATE_ASSIGN_OR_RETURN(change.value, parse(values[0]));
  return absl::OkStatus();
}

StatusOr<SettingsStore::TraceUpdate> traceUpdateFromProto(
    const inference::TraceSettingRequest& request) {
  SettingsStore::TraceUpdate update;
  const auto& settings = request.settings();
  if (settings.count(std::string(kTraceFile)) != 0) return traceFileRefused();
  if (auto it = settings.find(std::string(kTraceLevel)); it != settings.end()) {
    if (it->second.value().empty()) {
      update.level.clear = true;
    } else {
      std::vector<std::string_view> values(it->second.value().begin(), it->second.value().end());
      INFERGATE_ASSIGN_OR_RETURN(update.level.value, parseLevels(values));
    }
  }
  auto rate = [](std::string_view t) { return parseUint32Setting(kTraceRate, t); };
  auto frequency = [](std::string_view t) { return parseUint32Setting(kLogFrequency, t); };
  INFERGATE_RETURN_IF_ERROR(protoNumberChange(request, kTraceRate, rate, update.rate));
  INFERGATE_RETURN_IF_ERROR(
      protoNumberChange(request, kTraceCount, parseCountSetting, update.count));
  INFERGATE_RETURN_IF_ERROR(
      protoNumberChange(request, kLogFrequency, frequency, update.log_frequency));
  return update;
}

using LogValue = inference::LogSettingsRequest::SettingValue;

const LogValue* logEntry(const inference::LogSettingsRequest& request, std::string_view key) {
  auto it = request.settings().find(std::string(key));
  return it == request.settings().end() ? nullptr : &it->second;
}

Status protoBool(const inference::LogSettingsRequest& request, std::string_view key,
                 std::optional<bool>& out) {
  const LogValue* v = logEntry(request, key);
  if (v == nullptr) return absl::OkStatus();
  if (v->parameter_choice_case() != LogValue::kBoolParam) {
    return invalidArgument("expect boolean for '", key, "'");
  }
  out = v->bool_param();
  return absl::OkStatus();
}

StatusOr<SettingsStore::LogUpdate> logUpdateFromProto(
    const inference::LogSettingsRequest& request) {
  SettingsStore::LogUpdate update;
  if (const LogValue* v = logEntry(request, kLogFile)) {
    if (v->parameter_choice_case() != LogValue::kStringParam) {
      return invalidArgument("expect string for '", kLogFile, "'");
    }
    return logFileRefused();
  }
  INFERGATE_RETURN_IF_ERROR(protoBool(request, kLogInfo, update.info));
  INFERGATE_RETURN_IF_ERROR(protoBool(request, kLogWarning, update.warning));
  INFERGATE_RETURN_IF_ERROR(protoBool(request, kLogError, update.error));
  if (const LogValue* v = logEntry(request, kLogVerboseLevel)) {
    if (v->parameter_choice_case() != LogValue::kUint32Param) {
      return invalidArgument("expect int32 for '", kLogVerboseLevel, "'");  // Triton's text
    }
    update.verbose_level = v->uint32_param();
  }
  if (const LogValue* v = logEntry(request, kLogFormat)) {
    if (v->parameter_choice_case() != LogValue::kStringParam) {
      return invalidArgument("expect string for '", kLogFormat, "'");
    }
    if (v->string_param() != "default" && v->string_param() != "ISO8601") {
      return invalidArgument("invalid argument for log_format, got: ", v->string_param());
    }
    update.format = v->string_param();
  }
  return update;
}

// ---- out --------------------------------------------------------------------------------

std::string traceToJson(const TraceSettings& s) {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginObject().key(kTraceLevel).beginArray();
  for (std::string_view name : levelNames(s)) w.string(name);
  w.endArray();
  w.key(kTraceRate).string(std::to_string(s.rate));
  w.key(kTraceCount).string(std::to_string(s.count));
  w.key(kLogFrequency).string(std::to_string(s.log_frequency));
  w.key(kTraceFile).string(s.file);
  w.key(kTraceMode).string(s.mode);
  w.endObject();
  return out;
}

inference::TraceSettingResponse traceToProto(const TraceSettings& s) {
  inference::TraceSettingResponse response;
  auto& map = *response.mutable_settings();
  auto& level = map[std::string(kTraceLevel)];
  for (std::string_view name : levelNames(s)) level.add_value(std::string(name));
  map[std::string(kTraceRate)].add_value(std::to_string(s.rate));
  map[std::string(kTraceCount)].add_value(std::to_string(s.count));
  map[std::string(kLogFrequency)].add_value(std::to_string(s.log_frequency));
  map[std::string(kTraceFile)].add_value(s.file);
  map[std::string(kTraceMode)].add_value(s.mode);
  return response;
}

std::string logToJson(const LogSettings& s) {
  std::string out;
  codecs::JsonWriter w(out);
  w.beginObject();
  w.key(kLogFile).string(s.file);
  w.key(kLogInfo).boolean(s.info);
  w.key(kLogWarning).boolean(s.warning);
  w.key(kLogError).boolean(s.error);
  w.key(kLogVerboseLevel).uint64(s.verbose_level);
  w.key(kLogFormat).string(s.format);
  w.endObject();
  return out;
}

inference::LogSettingsResponse logToProto(const LogSettings& s) {
  inference::LogSettingsResponse response;
  auto& map = *response.mutable_settings();
  map[std::string(kLogFile)].set_string_param(s.file);
  map[std::string(kLogInfo)].set_bool_param(s.info);
  map[std::string(kLogWarning)].set_bool_param(s.warning);
  map[std::string(kLogError)].set_bool_param(s.error);
  map[std::string(kLogVerboseLevel)].set_uint32_param(s.verbose_level);
  map[std::string(kLogFormat)].set_string_param(s.format);
  return response;
}

template <typename T>
void applyGlobal(const SettingsStore::Change<T>& change, T& field, const T& initial) {
  if (change.clear) field = initial;
  if (change.value) field = *change.value;
}

template <typename T>
void applyOverride(const SettingsStore::Change<T>& change, std::optional<T>& field) {
  if (change.clear) field.reset();
  if (change.value) field = *change.value;
}

void setLevel(TraceSettings& s, uint8_t level) {
  s.timestamps = (level & kTimestamps) != 0;
  s.tensors = (level & kTensors) != 0;
}

uint8_t levelOf(const TraceSettings& s) {
  return static_cast<uint8_t>((s.timestamps ? kTimestamps : 0) | (s.tensors ? kTensors : 0));
}

}  // namespace

SettingsStore::SettingsStore(ModelCheck check, TraceSettings trace, LogSettings log)
    : check_(std::move(check)),
      trace_defaults_(trace),
      global_(std::move(trace)),
      log_(std::move(log)) {}

Status SettingsStore::checkModel(std::string_view model) const {
  if (model.empty() || !check_) return absl::OkStatus();
  return check_(model);
}

TraceSettings SettingsStore::effectiveLocked(std::string_view model) const {
  TraceSettings s = global_;
  auto it = models_.find(model);
  if (it == models_.end()) return s;
  const TraceOverride& o = it->second;
  if (o.level) setLevel(s, *o.level);
  if (o.rate) s.rate = *o.rate;
  if (o.count) s.count = *o.count;
  if (o.log_frequency) s.log_frequency = *o.log_frequency;
  return s;
}

StatusOr<TraceSettings> SettingsStore::trace(std::string_view model) const {
  INFERGATE_RETURN_IF_ERROR(checkModel(model));
  std::lock_guard<std::mutex> lock(mu_);
  return effectiveLocked(model);
}

LogSettings SettingsStore::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

StatusOr<TraceSettings> SettingsStore::applyTrace(std::string_view model,
                                                  const TraceUpdate& update) {
  std::lock_guard<std::mutex> lock(mu_);
  if (model.empty()) {
    uint8_t level = levelOf(global_);
    applyGlobal(update.level, level, levelOf(trace_defaults_));
    setLevel(global_, level);
    applyGlobal(update.rate, global_.rate, trace_defaults_.rate);
    applyGlobal(update.count, global_.count, trace_defaults_.count);
    applyGlobal(update.log_frequency, global_.log_frequency, trace_defaults_.log_frequency);
    return global_;
  }
  auto it = models_.find(model);
  if (it == models_.end()) it = models_.emplace(std::string(model), TraceOverride{}).first;
  TraceOverride& o = it->second;
  applyOverride(update.level, o.level);
  applyOverride(update.rate, o.rate);
  applyOverride(update.count, o.count);
  applyOverride(update.log_frequency, o.log_frequency);
  if (o.empty()) models_.erase(it);
  return effectiveLocked(model);
}

LogSettings SettingsStore::applyLog(const LogUpdate& update) {
  std::lock_guard<std::mutex> lock(mu_);
  if (update.info) log_.info = *update.info;
  if (update.warning) log_.warning = *update.warning;
  if (update.error) log_.error = *update.error;
  if (update.verbose_level) log_.verbose_level = *update.verbose_level;
  if (update.format) log_.format = *update.format;
  if (on_log_change_) on_log_change_(log_);
  return log_;
}

StatusOr<std::string> SettingsStore::traceJson(std::string_view model) const {
  INFERGATE_ASSIGN_OR_RETURN(TraceSettings s, trace(model));
  return traceToJson(s);
}

StatusOr<std::string> SettingsStore::updateTraceJson(std::string_view model,
                                                     std::string_view body) {
  INFERGATE_RETURN_IF_ERROR(checkModel(model));
  INFERGATE_ASSIGN_OR_RETURN(Struct object, parseJsonObject(body));
  INFERGATE_ASSIGN_OR_RETURN(TraceUpdate update, traceUpdateFromJson(object));
  INFERGATE_ASSIGN_OR_RETURN(TraceSettings s, applyTrace(model, update));
  return traceToJson(s);
}

std::string SettingsStore::logJson() const { return logToJson(log()); }

StatusOr<std::string> SettingsStore::updateLogJson(std::string_view body) {
  INFERGATE_ASSIGN_OR_RETURN(Struct object, parseJsonObject(body));
  INFERGATE_ASSIGN_OR_RETURN(LogUpdate update, logUpdateFromJson(object));
  return logToJson(applyLog(update));
}

StatusOr<inference::TraceSettingResponse> SettingsStore::traceSetting(
    const inference::TraceSettingRequest& request) {
  const std::string& model = request.model_name();
  INFERGATE_RETURN_IF_ERROR(checkModel(model));
  if (request.settings().empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    return traceToProto(effectiveLocked(model));
  }
  INFERGATE_ASSIGN_OR_RETURN(TraceUpdate update, traceUpdateFromProto(request));
  INFERGATE_ASSIGN_OR_RETURN(TraceSettings s, applyTrace(model, update));
  return traceToProto(s);
}

StatusOr<inference::LogSettingsResponse> SettingsStore::logSettings(
    const inference::LogSettingsRequest& request) {
  INFERGATE_ASSIGN_OR_RETURN(LogUpdate update, logUpdateFromProto(request));
  return logToProto(applyLog(update));
}

SettingsStore::ModelCheck repositoryModelCheck(
    std::shared_ptr<const builtin::ModelRepository> repository) {
  return [repository = std::move(repository)](std::string_view model) -> Status {
    auto found = repository->find(model, "");
    if (found.ok()) return absl::OkStatus();
    for (const builtin::IndexEntry& entry : repository->index(false)) {
      if (entry.name == model) return invalidArgument("Request for unknown model : ", model);
    }
    return found.status();
  };
}

}  // namespace infergate::gateway
