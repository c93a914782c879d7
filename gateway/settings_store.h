#pragma once

// SettingsStore: the trace settings (global + per-model overrides) and log settings that
// both frontends serve (PROTOCOL.md 2.1 "Trace settings" / "Logging", 11.6), in memory.
// The log settings drive the gateway's operational log (telemetry/log.h, through
// onLogChange); the trace settings are kept and reported with Triton's keys, types and
// rules so that clients (perf_analyzer's UpdateTraceSettings, tritonclient's
// update_log_settings) work unchanged.
//
// Trace settings, as Triton's TraceManager keeps them:
//   trace_level    ["OFF"] or any of "TIMESTAMPS", "TENSORS" (unknown strings ignored;
//                  "OFF" with anything else: INVALID_ARGUMENT)
//   trace_rate     decimal string, 0 .. 4294967295
//   trace_count    decimal string, -1 (unlimited) .. 2147483647
//   log_frequency  decimal string, 0 .. 4294967295
//   trace_file     reported, never set over the network (UNIMPLEMENTED)
//   trace_mode     always "triton" (an update of it is ignored, as Triton ignores it)
// Numbers are read as std::stoi does (leading blanks, a sign, digits; trailing bytes
// ignored). A model's override holds only the keys set for it; the others follow the
// global values. Clearing a key (HTTP JSON null, gRPC an entry with no values) removes a
// model's override of it, or resets a global key to its start-up value. A model without
// any override left is forgotten. Every key of an update is checked before any is applied.
// Model-level reads and updates first ask the ModelCheck: unknown model NOT_FOUND, known
// but not ready INVALID_ARGUMENT "Request for unknown model : <m>".
//
// Log settings: log_file (string, UNIMPLEMENTED when set), log_info / log_warning /
// log_error (bool), log_verbose_level (uint32), log_format ("default" | "ISO8601": any
// other value is UNAVAILABLE over HTTP and INVALID_ARGUMENT over gRPC, as in Triton).
// Type errors are INVALID_ARGUMENT (Triton answers HTTP 500 for them; DESIGN.md "Errors":
// the client's mistake is named as the client's). Unknown keys are ignored; JSON null
// values leave a key unchanged.
//
// JSON bodies are parsed with protobuf's JSON parser into a google.protobuf.Struct
// (already linked for the gRPC messages; the codecs' simdjson stays private to codecs/).
// Its numbers are doubles, which is exact for every integer these keys accept. A body
// that is not a JSON object is INVALID_ARGUMENT "failed to parse the request JSON buffer:
// ..." (Triton: 500). Responses are compact JSON in Triton's key order.
//
// Thread-safety: every method may be called from any thread (one mutex; no I/O inside).
// The ModelCheck is called without the mutex held.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "codecs/status.h"
#include "grpc_service.pb.h"

namespace infergate::gateway {

namespace builtin {
class ModelRepository;
}

struct TraceSettings {
  bool timestamps = false;  // trace_level TIMESTAMPS
  bool tensors = false;     // trace_level TENSORS; neither: ["OFF"]
  uint32_t rate = 1000;
  int32_t count = -1;
  uint32_t log_frequency = 0;
  std::string file;
  std::string mode = "triton";
  bool operator==(const TraceSettings&) const = default;
};

struct LogSettings {
  std::string file;
  bool info = true;
  bool warning = true;
  bool error = true;
  uint32_t verbose_level = 0;
  std::string format = "default";  // or "ISO8601"
  bool operator==(const LogSettings&) const = default;
};

class SettingsStore {
 public:
  // OK when `model` names a ready model; otherwise the error to answer (see above).
  using ModelCheck = std::function<codecs::Status(std::string_view model)>;

  // `check` null: every model name is accepted. `trace` and `log` are the start-up
  // values (a cleared global trace key returns to its value here).
  explicit SettingsStore(ModelCheck check = nullptr, TraceSettings trace = {},
                         LogSettings log = {});

  // Called with the log settings after each update (under the store's mutex: it must not
  // call back into the store). Set before the frontends start.
  void onLogChange(std::function<void(const LogSettings&)> hook) { on_log_change_ = std::move(hook); }

  // Effective values ("" = global). Model errors as above.
  codecs::StatusOr<TraceSettings> trace(std::string_view model) const;
  LogSettings log() const;

  // HTTP: GET / POST {/v2/models/<m>}/trace/setting and /v2/logging. Return the JSON body
  // of the answer (the settings after the update).
  codecs::StatusOr<std::string> traceJson(std::string_view model) const;
  codecs::StatusOr<std::string> updateTraceJson(std::string_view model, std::string_view body);
  std::string logJson() const;
  codecs::StatusOr<std::string> updateLogJson(std::string_view body);

  // gRPC: TraceSetting (empty settings map = read only) and LogSettings.
  codecs::StatusOr<inference::TraceSettingResponse> traceSetting(
      const inference::TraceSettingRequest& request);
  codecs::StatusOr<inference::LogSettingsResponse> logSettings(
      const inference::LogSettingsRequest& request);

  // One change to one key: nothing, clear it, or set it.
  template <typename T>
  struct Change {
    bool clear = false;
    std::optional<T> value;
  };
  struct TraceUpdate {
    Change<uint8_t> level;  // bit 1 TIMESTAMPS, bit 2 TENSORS; 0 = OFF
    Change<uint32_t> rate;
    Change<int32_t> count;
    Change<uint32_t> log_frequency;
  };
  struct LogUpdate {
    std::optional<bool> info, warning, error;
    std::optional<uint32_t> verbose_level;
    std::optional<std::string> format;
  };

 private:
  struct TraceOverride {
    std::optional<uint8_t> level;
    std::optional<uint32_t> rate;
    std::optional<int32_t> count;
    std::optional<uint32_t> log_frequency;
    bool empty() const { return !level && !rate && !count && !log_frequency; }
  };

  codecs::Status checkModel(std::string_view model) const;
  codecs::StatusOr<TraceSettings> applyTrace(std::string_view model, const TraceUpdate& update);
  TraceSettings effectiveLocked(std::string_view model) const;
  LogSettings applyLog(const LogUpdate& update);

  ModelCheck check_;
  const TraceSettings trace_defaults_;
  mutable std::mutex mu_;
  TraceSettings global_;
  std::map<std::string, TraceOverride, std::less<>> models_;
  LogSettings log_;
  std::function<void(const LogSettings&)> on_log_change_;
};

// The ModelCheck of a builtin repository: NOT_FOUND (the repository's own message) for a
// name it does not hold, INVALID_ARGUMENT "Request for unknown model : <m>" for a model
// whose latest version is not ready.
SettingsStore::ModelCheck repositoryModelCheck(
    std::shared_ptr<const builtin::ModelRepository> repository);

}  // namespace infergate::gateway
