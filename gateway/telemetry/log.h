#pragma once

// The operational log: one line per event, structured (JSON, or text key=value), on
// standard error. Levels as Triton's logging settings name them: error, warning, info
// each on or off, and a verbose level (0 = off); the v2 logging endpoint (HTTP
// /v2/logging, gRPC LogSettings) changes them at run time through applySettings().
// Events carry names and values, never tensor contents.
//
//   logEvent(Level::kWarning, "reload", {{"ok", false}, {"error", message}})
//   json: {"time":"2026-11-22T10:00:00.123456Z","level":"warning","event":"reload","ok":false,...}
//   text: W1122 10:00:00.123456 4711 reload ok=false error="..."          (Triton's default)
//         2026-11-22T10:00:00Z W 4711 reload ok=false error="..."         (log_format ISO8601)
//
// Threads: every function from any thread; a line is written whole (one mutex, held only
// while writing it).

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace infergate::gateway::telemetry {

enum class Level : uint8_t { kError, kWarning, kInfo, kVerbose };

struct LogField {
  using Value = std::variant<std::string_view, int64_t, uint64_t, bool>;
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}
  LogField(std::string_view k, int v) : key(k), value(static_cast<int64_t>(v)) {}
  LogField(std::string_view k, int64_t v) : key(k), value(v) {}
  LogField(std::string_view k, uint64_t v) : key(k), value(v) {}
  LogField(std::string_view k, uint32_t v) : key(k), value(static_cast<uint64_t>(v)) {}
  std::string_view key;
  Value value;
};

struct LogSettingsView {
  bool info = true, warning = true, error = true;
  uint32_t verbose_level = 0;
  bool iso8601 = false;  // text lines: ISO 8601 time instead of Triton's default
  bool json = true;
};

// The process's log settings now.
LogSettingsView logSettings();
void setLogSettings(const LogSettingsView& settings);
// Whether an event of `level` would be written (verbose: verbose_level >= 1).
bool logEnabled(Level level);

void logEvent(Level level, std::string_view event, std::initializer_list<LogField> fields = {});

// Where lines go (tests); null: back to standard error.
void setLogSink(std::function<void(std::string_view line)> sink);

// One line as logEvent writes it, without writing it.
std::string formatLogLine(Level level, std::string_view event,
                          std::initializer_list<LogField> fields, const LogSettingsView& settings);

}  // namespace infergate::gateway::telemetry
