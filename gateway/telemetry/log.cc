#include "gateway/telemetry/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "codecs/json_writer.h"
#include "gateway/telemetry/text_format.h"

namespace infergate::gateway::telemetry {
namespace {

struct State {
  std::mutex mu;
  LogSettingsView settings;
  std::function<void(std::string_view)> sink;
  // Read on every logEnabled() without the mutex.
  std::atomic<uint32_t> enabled_mask{0b111};  // bit per Level below kVerbose
  std::atomic<uint32_t> verbose{0};
};

State& state() {
  static State* s = new State();  // never destroyed: threads may log during exit
  return *s;
}

const char* levelName(Level level) {
  switch (level) {
    case Level::kError: return "error";
    case Level::kWarning: return "warning";
    case Level::kInfo: return "info";
    case Level::kVerbose: return "verbose";
  }
  return "info";
}

char levelLetter(Level level) {
  switch (level) {
    case Level::kError: return 'E';
    case Level::kWarning: return 'W';
    case Level::kInfo: return 'I';
    case Level::kVerbose: return 'V';
  }
  return 'I';
}

}  // namespace

LogSettingsView logSettings() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.settings;
}

void setLogSettings(const LogSettingsView& settings) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.settings = settings;
  s.enabled_mask.store((settings.error ? 1u : 0u) | (settings.warning ? 2u : 0u) |
                           (settings.info ? 4u : 0u),
                       std::memory_order_relaxed);
  s.verbose.store(settings.verbose_level, std::memory_order_relaxed);
}

bool logEnabled(Level level) {
  State& s = state();
  if (level == Level::kVerbose) return s.verbose.load(std::memory_order_relaxed) > 0;
  return (s.enabled_mask.load(std::memory_order_relaxed) >> static_cast<int>(level)) & 1u;
}

void setLogSink(std::function<void(std::string_view line)> sink) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.sink = std::move(sink);
}

std::string formatLogLine(Level level, std::string_view event,
                          std::initializer_list<LogField> fields, const LogSettingsView& settings) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t secs = system_clock::to_time_t(now);
  const long micros = static_cast<long>(duration_cast<microseconds>(now.time_since_epoch()).count() % 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[64];
  std::string out;
  if (settings.json) {
    codecs::JsonWriter w(out);
    w.beginObject().key("time").string(utcTime(now, true)).key("level").string(levelName(level));
    w.key("event").string(event);
    for (const LogField& f : fields) {
      w.key(f.key);
      std::visit(
          [&w](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string_view>) {
              w.string(v);
            } else if constexpr (std::is_same_v<T, bool>) {
              w.boolean(v);
            } else if constexpr (std::is_same_v<T, int64_t>) {
              w.int64(v);
            } else {
              w.uint64(v);
            }
          },
          f.value);
    }
    w.endObject();
  } else {
    if (settings.iso8601) {
      std::snprintf(stamp, sizeof stamp, "%s %c %d ", utcTime(now, false).c_str(),
                    levelLetter(level), static_cast<int>(::getpid()));
    } else {
      std::snprintf(stamp, sizeof stamp, "%c%02d%02d %02d:%02d:%02d.%06ld %d ", levelLetter(level),
                    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros,
                    static_cast<int>(::getpid()));
    }
    out += stamp;
    out += event;
    for (const LogField& f : fields) {
      out += ' ';
      out += f.key;
      out += '=';
      std::visit(
          [&out](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string_view>) {
              appendTextValue(out, v);
            } else if constexpr (std::is_same_v<T, bool>) {
              out += v ? "true" : "false";
            } else {
              out += std::to_string(v);
            }
          },
          f.value);
    }
  }
  out += '\n';
  return out;
}

void logEvent(Level level, std::string_view event, std::initializer_list<LogField> fields) {
  if (!logEnabled(level)) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::string line = formatLogLine(level, event, fields, s.settings);
  if (s.sink) {
    s.sink(line);
    return;
  }
  size_t written = 0;
  while (written < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + written, line.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
}

}  // namespace infergate::gateway::telemetry
